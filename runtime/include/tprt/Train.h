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

#include <algorithm>
#include <map>
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
  /// The most data a shard file --save writes holds, in MiB (transformers'
  /// 5 GiB; a tensor larger than that gets a file of its own).
  double saveShardMiB = 5120;
  /// A directory --save wrote to continue from (--resume), or empty.
  std::string resume;
  std::string log; ///< a JSON-lines file, or empty
  /// On the GPU, each micro-batch replays a CUDA graph from the second
  /// step on (--cuda-graphs; cuda/Graphs.h).
  bool cudaGraphs = true;
};

/// Where a run stands: what --save records beside the weights and the
/// optimizer state (trainer_state.json), and --resume continues from.
struct RunPosition {
  int64_t step = 0;         ///< optimizer steps taken
  int64_t rowsConsumed = 0; ///< data rows read so far (all groups)
  std::optional<uint64_t> seed;
  int64_t dataRows = 0, dataLength = 0; ///< the --data file's shape
  uint64_t dataHash = 0; ///< and its sampled hash (tprt/Fingerprint.h)
};

/// A checkpoint to resume from: its position and optimizer state.
struct ResumePoint {
  std::string dir;
  RunPosition position;
  std::string optimizer;
  int64_t optimizerStep = 0;
  int tp = 0, dp = 0; ///< the grid it was saved from
  /// The optimizer state's tensors (FQN.exp_avg, ...), by name.
  std::map<std::string, SafetensorsEntry> state;
};

/// A gradient bucket sharded over the data-parallel group (--zero 1,
/// grad_bucket_reduce_scatter): its padded FP32 buffer, which the bucket's
/// gradient buffers are views of when they can be, and this rank's run of
/// it, where the reduce-scatter leaves the reduced sums.
///
/// Reduced per micro-batch (--zero 2), `flat` is held only from the
/// bucket's first accumulation of a micro-batch to its reduce-scatter, and
/// `shard` is a buffer of its own, where the micro-batches' sums add up.
struct ShardedBucket {
  Tensor flat, shard;
  /// --zero 3: this rank's run of the parameters themselves, in their type
  /// (param_bucket_shard), which the update writes and param_bucket_gather
  /// all-gathers; undefined otherwise.
  Tensor params;
  /// This rank's run is [shardBegin, shardBegin + shard.numel()) of flat
  /// (`shard` is a view of it, or, per micro-batch, its own buffer).
  int64_t shardBegin = 0;
  /// The elements of `flat` (and of the gathered parameters), and of
  /// each rank's run of them.
  int64_t padded = 0, run = 0;
  DType dtype = DType::F32;
  bool microBatch = false;
  /// Each gradient's FQN, offset in `flat` and elements, in the program's
  /// order.
  struct Member {
    std::string fqn;
    int64_t offset, numel;
    /// The parameter's shape on this rank (its tensor-parallel block).
    std::vector<int64_t> shape;
  };
  std::vector<Member> members;
  /// Reduced in this optimizer step (per micro-batch: the next
  /// reduce-scatter adds into the run instead of overwriting it).
  bool reduced = false;

  /// Whether the bucket holds exactly `fqns`, in that order.
  bool holds(const std::vector<std::string> &fqns) const {
    return std::equal(
        members.begin(), members.end(), fqns.begin(), fqns.end(),
        [](const Member &m, const std::string &fqn) { return m.fqn == fqn; });
  }

  /// The member `fqn` (one the bucket holds).
  const Member *member(const std::string &fqn) const {
    for (const Member &m : members)
      if (m.fqn == fqn)
        return &m;
    return nullptr;
  }

  /// The part of `m` in this rank's run, as [begin, end) of its elements.
  std::pair<int64_t, int64_t> ownedRange(const Member &m) const {
    int64_t lo = std::max(m.offset, shardBegin),
            hi = std::min(m.offset + m.numel, shardBegin + run);
    return hi > lo ? std::make_pair(lo - m.offset, hi - m.offset)
                   : std::make_pair(int64_t{0}, int64_t{0});
  }
};

/// The optimizer state of every trainable parameter, by FQN.
class Optimizer {
public:
  /// `masterWeights`: parameters held in bf16 or f16 are updated through
  /// an FP32 master copy (state `master_weight`), rounded once into them.
  Optimizer(const TrainOptions &options, std::string name, bool masterWeights)
      : options_(options), name_(std::move(name)), masters_(masterWeights) {}
  const std::string &name() const { return name_; }
  bool masterWeights() const { return masters_; }
  /// One update of every parameter with a gradient buffer in `ctx`, on the
  /// buffer times its pending scale (1 / label tokens, the mean's and the
  /// clipping's factors), which it resets.
  void step(Context &ctx);
  /// The same update of this rank's runs of the data-parallel sharded
  /// buckets only (--zero 1), whose state it holds; the parameters' other
  /// elements are left to param_bucket_all_gather.
  void stepSharded(Context &ctx,
                   const std::map<int64_t, ShardedBucket> &buckets);
  /// Continues from `point`: its step count, and each parameter's state
  /// read (this rank's block) when the parameter is first updated.
  void resumeFrom(const ResumePoint *point);

  int64_t stepCount() const { return step_; }
  /// The state's tensors of each parameter by their names in a checkpoint
  /// (AdamW: exp_avg, exp_avg_sq; SGD: momentum_buffer), this rank's
  /// blocks, FP32.
  std::vector<std::pair<std::string, const Tensor *>>
  stateOf(const std::string &fqn) const;
  /// The bytes of the state this rank holds: [FP32 master weights, the
  /// rest].
  std::pair<uint64_t, uint64_t> stateBytes() const;
  /// The names of the state tensors of a parameter held as `param`
  /// (AdamW: exp_avg, exp_avg_sq; SGD: momentum_buffer; and master_weight
  /// for a bf16 or f16 one with master weights).
  std::vector<std::string> stateNames(const Tensor &param) const;
  /// With --zero: where `fqn`'s state tensors start in its parameter (this
  /// rank's block, flattened); they hold the elements from there on. None
  /// when the state is the whole block.
  std::optional<int64_t> stateBegin(const std::string &fqn) const;
  /// Whether the state is sharded over data parallelism (--zero): a rank
  /// may hold the state of a part of a parameter, or none.
  bool sharded() const { return sharded_; }

private:
  /// The update of `param` (a parameter, or the run of its elements from
  /// `begin` on) through the path its type takes: in place (f32, bf16
  /// without masters), through its FP32 master, or through an f32 copy
  /// (f16 without masters).
  void updateHeld(Context &ctx, const std::string &fqn, Tensor &param,
                  Tensor &grad, float gradScale, std::optional<int64_t> begin);
  /// Whether a parameter held as `param` has an FP32 master.
  bool hasMaster(const Tensor &param) const {
    return masters_ && param.dtype() != DType::F32;
  }
  /// One parameter's update, on its f32 values (a bf16 one in f32 blocks),
  /// with the gradient grad * gradScale.
  /// `param` may be a run of the parameter's elements from `begin` on
  /// (--zero).
  void update(Context &ctx, const std::string &fqn, Tensor &param, Tensor &grad,
              float gradScale, std::optional<int64_t> begin = std::nullopt);
  /// `fqn`'s state tensor `name` as the update first needs it: zeros, or
  /// this rank's block of it from the checkpoint resumed from (its run of
  /// `param`'s elements from `begin` on, when given).
  Tensor initialState(Context &ctx, const std::string &fqn,
                      const std::string &name, const Tensor &param,
                      std::optional<int64_t> begin);

  const TrainOptions &options_;
  std::string name_; ///< "adamw" or "sgd"
  bool masters_ = false;
  int64_t step_ = 0;
  std::map<std::string, Tensor> first_, second_, master_;
  std::map<std::string, int64_t> begins_;
  bool sharded_ = false;
  const ResumePoint *resume_ = nullptr;
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
  /// The data-parallel sharded buckets (--zero 1), by number, and the
  /// reduce-scatters and all-gathers of the last step with their bytes.
  std::map<int64_t, ShardedBucket> shardedBuckets;
  int64_t shardedCollectives = 0, shardedBytes = 0;
  /// The buckets reduced per micro-batch (--zero 2), by member FQN, once
  /// their layout is known (their first reduce-scatter); and the bytes of
  /// their whole buffers held now and at most at once.
  std::map<std::string, int64_t> microBatchBuckets;
  int64_t microBatchHeld = 0, microBatchPeak = 0;
  /// The largest parameter all-gather buffer allocated (bytes); under
  /// --zero 3, the most bytes of gathered parameters held at once, and the
  /// bytes held now.
  int64_t largestGather = 0;
  int64_t gatheredHeld = 0;
  /// Made by the first update (the program names the optimizer).
  std::unique_ptr<Optimizer> optimizer;
  /// --resume: where the run continues from (null: a new run).
  const ResumePoint *resume = nullptr;
};

/// A step begins: every gradient's next accumulation overwrites its
/// buffer, no sharded bucket is reduced yet (a per-micro-batch bucket's
/// next reduce-scatter overwrites its run). With `zeroBuffers`, the
/// buffers made so far are zeroed instead and every accumulation adds, so
/// that the step's micro-batches all do the same work (each replays one
/// CUDA graph); optimizer_boundary then no longer tells a parameter that
/// got no gradient (the step before checked it).
void beginTrainStep(Context &ctx, TrainState &state, bool zeroBuffers = false);
/// Context::gradBuffer of a parameter without a buffer: when it is in a
/// bucket reduced per micro-batch, the bucket's whole FP32 buffer is
/// allocated and its gradients become views of it. Returns whether it was.
bool bindMicroBatchBucket(Context &ctx, TrainState &state,
                          const std::string &fqn, Device device);

/// The buffers' elements one after the other into `out` (FP32).
void packBucket(const std::vector<Tensor *> &grads, float *out);
/// The reverse: the buffers' elements from `in`.
void unpackBucket(const float *in, const std::vector<Tensor *> &grads);

/// Writes the checkpoint DIR as transformers lays out a large one:
/// model-0000k-of-0000n.safetensors (at most --save-shard-mib each) and
/// model.safetensors.index.json, or model.safetensors when one file holds
/// them all, every parameter whole under its FQN in the type it is held in; a
/// PEFT adapter_model.safetensors for LoRA factors; the config.json the model
/// came with; the optimizer state in the same layout
/// (optimizer-0000k-of-0000n.safetensors and optimizer.safetensors.index.json,
/// or optimizer.safetensors) and trainer_state.json (the grid, the position,
/// each parameter's placement). Every rank writes its own blocks at their
/// offsets, replicated tensors spread over the ranks by bytes, so nothing is
/// gathered. Files are written under temporary names that rank 0 renames once
/// every rank finished, trainer_state.json last. Collective.
void saveCheckpoint(Context &ctx, const std::string &dir,
                    const TrainOptions &options, const RunPosition &position,
                    const Optimizer *optimizer);

/// Reads DIR/trainer_state.json and the optimizer state's index, and checks
/// them against the program (its parameters and their global shapes, its
/// optimizer) and the run's options (--seed): an error names the file and
/// the tensor or field. Every rank, before the first collective. `params`
/// is the program's tprt_model_params: the library takes what the program
/// defines from main, so that it links as a shared library too.
std::unique_ptr<ResumePoint> readResumePoint(const std::string &dir,
                                             const TrainOptions &options,
                                             const ParamSpec *params);

/// The training loop: `options.steps` optimizer steps of
/// `options.gradAccum` micro-batches, after those of `resume` when given.
/// Rows are padded to a multiple of `sequenceMultiple` (the program's
/// tprt_model_sequence_multiple). Returns the exit status.
int train(Context &ctx, const TrainOptions &options, int64_t sequenceMultiple,
          const ResumePoint *resume = nullptr);

} // namespace tprt

#endif // TPRT_TRAIN_H
