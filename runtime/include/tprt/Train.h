//===- Train.h - the training mode of generated executables -----*- C++ -*-===//
//
// What `model --train` runs around the generated tprt_model_train_step and
// tprt_model_optimizer_step: the micro-batches of each optimizer step, the
// state the optimizer step's runtime calls share, and the checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_TRAIN_H
#define TPRT_TRAIN_H

#include "tprt/tprt.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tprt {

struct TrainOptions {
  std::string data;     ///< int64 .npy [sequences, length]
  std::string dataMask; ///< optional int64 .npy of the same shape
  int64_t steps = 1, microBatch = 1, gradAccum = 1;
  double lr = 1e-3, weightDecay = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
         momentum = 0.9;
  /// Gradients are scaled by max / (norm + 1e-6) when that is below 1, as
  /// torch.nn.utils.clip_grad_norm_ does (0: no clipping).
  double maxGradNorm = 0;
  /// 2, or infinity (--norm-type inf): the largest magnitude.
  double normType = 2;
  /// --seed: the data's rows in a permutation drawn from it for each pass
  /// over the file (without: in the file's order).
  std::optional<uint64_t> seed;
  std::string save; ///< a directory, or empty
  std::string log;  ///< a JSON-lines file, or empty
};

/// The optimizer state of every trainable parameter, by FQN.
class Optimizer {
public:
  Optimizer(const TrainOptions &options, std::string name)
      : options_(options), name_(std::move(name)) {}
  const std::string &name() const { return name_; }
  /// One update of every parameter with a gradient buffer in `ctx`, on the
  /// buffer times its pending scale (1 / label tokens, the mean's and the
  /// clipping's factors), which it resets.
  void step(Context &ctx);

private:
  /// One parameter's update, on its f32 values (a bf16 one in f32 blocks),
  /// with the gradient grad * gradScale.
  void update(const std::string &fqn, Tensor &param, Tensor &grad,
              float gradScale);

  const TrainOptions &options_;
  std::string name_; ///< "adamw" or "sgd"
  int64_t step_ = 0;
  std::map<std::string, Tensor> first_, second_;
};

/// What the training loop and the optimizer step's runtime calls share
/// (Context::trainState).
struct TrainState {
  explicit TrainState(const TrainOptions &options) : options(options) {}
  const TrainOptions &options;
  /// Set by the loop before the optimizer step: the step's label tokens.
  int64_t labelTokens = 0;
  /// Set by the optimizer step: the norm before clipping, and whether the
  /// update was skipped (a norm that is not finite).
  double gradNorm = 0;
  bool skipped = false;
  /// The replica-gradient buckets of the last optimizer step: all-reduces
  /// issued and FP32 bytes reduced.
  int64_t bucketCollectives = 0, bucketBytes = 0;
  /// Each bucket's FP32 buffer, by group and number: the gradients of the
  /// bucket are views of it after the first step.
  std::map<std::string, Tensor> buckets;
  /// Made by the first update (the program names the optimizer).
  std::unique_ptr<Optimizer> optimizer;
};

/// The buffers' elements one after the other into `out` (FP32).
void packBucket(const std::vector<Tensor *> &grads, float *out);
/// The reverse: the buffers' elements from `in`.
void unpackBucket(const float *in, const std::vector<Tensor *> &grads);

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
