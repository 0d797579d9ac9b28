//===- Train.h - the training mode of generated executables -----*- C++ -*-===//
//
// What `model --train` runs around the generated tprt_model_train_step:
// the micro-batches of each optimizer step, the optimizer boundary (loss
// normalization, gradient norm, update) and the checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_TRAIN_H
#define TPRT_TRAIN_H

#include "tprt/tprt.h"

#include <string>

namespace tprt {

struct TrainOptions {
  std::string data;      ///< int64 .npy [sequences, length]
  std::string dataMask;  ///< optional int64 .npy of the same shape
  std::string optimizer; ///< "adamw" or "sgd"
  int64_t steps = 1, microBatch = 1, gradAccum = 1;
  double lr = 1e-3, weightDecay = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
         momentum = 0.9;
  /// Gradients are scaled by max / (norm + 1e-6) when that is below 1, as
  /// torch.nn.utils.clip_grad_norm_ does (0: no clipping).
  double maxGradNorm = 0;
  std::string save; ///< a directory, or empty
  std::string log;  ///< a JSON-lines file, or empty
};

/// The optimizer state of every trainable parameter, by FQN.
class Optimizer {
public:
  explicit Optimizer(const TrainOptions &options) : options_(options) {}
  /// One update of every parameter with a gradient buffer in `ctx` (already
  /// divided by the number of label tokens).
  void step(Context &ctx);

private:
  const TrainOptions &options_;
  int64_t step_ = 0;
  std::map<std::string, Tensor> first_, second_;
};

/// The 2-norm of all gradients, each element counted once: a split
/// gradient's squares are summed over the ranks (divided by the ranks that
/// share its block), a replicated one's taken from this rank (they are
/// equal on all).
double gradNorm(Context &ctx);

/// Writes every parameter, whole (gathered on rank 0), as DIR/
/// model.safetensors with its FQN, and a copy of the config.json beside the
/// model file when there is one; through temporary names, renamed when
/// complete. Collective.
void saveCheckpoint(Context &ctx, const std::string &dir);

/// The training loop: `options.steps` optimizer steps of
/// `options.gradAccum` micro-batches. Returns the exit status.
int train(Context &ctx, const TrainOptions &options);

} // namespace tprt

#endif // TPRT_TRAIN_H
