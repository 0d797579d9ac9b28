//===- train.cpp - the training loop of generated executables -------------===//
//
// Each optimizer step runs the generated training step on K micro-batches
// of B sequences (the next rows of the data, every rank of the group the
// same), which add their gradients into the buffers; then the generated
// optimizer step: the boundary, the replica gradients' buckets, the
// division by the step's number of label tokens (AutoModel's
// num_label_tokens), the norm, the clipping (--max-grad-norm) and the
// update of the parameters in place.
//
//===----------------------------------------------------------------------===//

#include "tprt/Train.h"
#include "tprt/Fingerprint.h"

#ifdef TPRT_WITH_CUDA
#include "cuda/Graphs.h"
#endif

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mpi.h>
#include <optional>
#include <random>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tprt {
namespace {

/// The order the rows of the data are read in: the file's, or with a
/// seed a permutation of them drawn anew for each pass over the file (the
/// same on every rank: the same generator, seed and pass).
class RowOrder {
public:
  RowOrder(int64_t rows, std::optional<uint64_t> seed)
      : rows_(rows), seed_(seed) {}

  /// The row the `index`-th read takes.
  int64_t operator[](int64_t index) {
    if (!seed_)
      return index % rows_;
    int64_t pass = index / rows_;
    if (pass != pass_) {
      order_.resize(static_cast<size_t>(rows_));
      for (int64_t r = 0; r < rows_; ++r)
        order_[r] = r;
      std::mt19937_64 generator(*seed_ + static_cast<uint64_t>(pass));
      // Fisher-Yates with the generator's raw output: std::shuffle's
      // use of the generator is the library's choice, this is ours.
      for (int64_t r = rows_ - 1; r > 0; --r)
        std::swap(order_[r],
                  order_[generator() % static_cast<uint64_t>(r + 1)]);
      pass_ = pass;
    }
    return order_[index % rows_];
  }

private:
  int64_t rows_;
  std::optional<uint64_t> seed_;
  int64_t pass_ = -1;
  std::vector<int64_t> order_;
};

/// Reads [first, first + count) in `order` of `t`'s rows, a new tensor.
Tensor takeRows(const Tensor &t, RowOrder &order, int64_t first,
                int64_t count) {
  int64_t length = t.dim(1);
  Tensor out = Tensor::uninitialized(t.dtype(), {count, length});
  for (int64_t r = 0; r < count; ++r)
    std::copy_n(t.i64() + order[first + r] * length, length,
                out.i64() + r * length);
  return out;
}

/// Label tokens of a micro-batch: positions whose next token counts.
int64_t labelTokens(const Tensor &mask) {
  int64_t count = 0, length = mask.dim(1);
  for (int64_t r = 0; r < mask.dim(0); ++r)
    for (int64_t t = 1; t < length; ++t)
      count += mask.i64()[r * length + t] != 0;
  return count;
}

Tensor readTokens(const std::string &path, const char *what) {
  Tensor t = readNpy(path);
  if (t.dtype() != DType::I64 || t.rank() != 2 || t.dim(1) < 2)
    fatal(std::string(what) + " '" + path +
          "' must be an int32 or int64 [sequences, length >= 2] array, got " +
          t.describe());
  return t;
}

/// Every id of `tokens` in [0, vocab) (vocab 0: not known).
void checkVocabulary(const Tensor &tokens, const std::string &path,
                     int64_t vocab) {
  const int64_t *id = tokens.i64();
  for (int64_t i = 0; i < tokens.numel(); ++i)
    if (id[i] < 0 || (vocab > 0 && id[i] >= vocab))
      fatal("--data '" + path + "': token id " + std::to_string(id[i]) +
            " at row " + std::to_string(i / tokens.dim(1)) + ", position " +
            std::to_string(i % tokens.dim(1)) +
            " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
}

/// The checkpoint directory exists (made if needed) and takes files.
void checkWritable(const std::string &dir) {
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    fatal("--save: cannot create '" + dir + "': " + std::strerror(errno));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    fatal("--save: cannot write into '" + dir + "': " + std::strerror(errno));
}

/// Where the run starts: the beginning of `o.data` (`rows` sequences of
/// `length` tokens), or where the run `resume` saved stopped, in the same
/// order (its seed), when `o.data` is the file it read.
RunPosition startingPosition(const TrainOptions &o, int64_t rows,
                             int64_t length, const ResumePoint *resume) {
  RunPosition position;
  position.seed = o.seed;
  position.dataRows = rows;
  position.dataLength = length;
  struct stat st;
  if (::stat(o.data.c_str(), &st) == 0)
    position.dataHash =
        sampledFileHash(o.data.c_str(), static_cast<uint64_t>(st.st_size));
  if (!resume)
    return position;
  const RunPosition &saved = resume->position;
  if (saved.dataRows != rows || saved.dataLength != length)
    fatal("--resume '" + resume->dir + "': the run read --data of " +
          std::to_string(saved.dataRows) + " sequences of " +
          std::to_string(saved.dataLength) + " tokens; '" + o.data + "' has " +
          std::to_string(rows) + " of " + std::to_string(length));
  if (saved.dataHash != position.dataHash)
    fatal("--resume '" + resume->dir + "': --data '" + o.data +
          "' is not the file the run read (its content differs)");
  return saved;
}

/// Rank 0's line for a step on stdout, and in the --log file when open.
void reportStep(std::ofstream &log, int64_t step, double loss, double norm,
                double speed, bool skipped) {
  // A NaN's sign says nothing (which kernel's arithmetic made it): "nan".
  auto shown = [](double v) { return std::isnan(v) ? std::fabs(v) : v; };
  std::printf("step %lld loss %.6f grad_norm %.6f tokens/s %.1f%s\n",
              static_cast<long long>(step), shown(loss), shown(norm), speed,
              skipped ? " (update skipped: the gradient norm is not finite)"
                      : "");
  std::fflush(stdout);
  if (!log.is_open())
    return;
  // JSON has no NaN or infinity: a value that is not finite is null.
  char normText[32] = "null", lossText[32] = "null";
  if (std::isfinite(norm))
    std::snprintf(normText, sizeof(normText), "%.9g", norm);
  if (std::isfinite(loss))
    std::snprintf(lossText, sizeof(lossText), "%.9g", loss);
  char line[256];
  std::snprintf(line, sizeof(line),
                "{\"step\": %lld, \"loss\": %s, \"grad_norm\": %s, "
                "\"tokens_per_s\": %.1f, \"skipped\": %s}\n",
                static_cast<long long>(step), lossText, normText, speed,
                skipped ? "true" : "false");
  log << line << std::flush;
}

} // namespace

/// What this rank holds besides activations, by kind, as the plan report
/// predicts it (its "Memory per rank" table): every buffer counted once;
/// then with the activation arenas, against the peak resident memory.
static void reportMemoryHeld(Context &ctx, const TrainState &state,
                             double peakMiB) {
  uint64_t parameters = 0, gradients = 0;
  for (const auto &entry : ctx.paramLayouts())
    if (entry.second.runBegin < 0)
      parameters += ctx.cachedParam(entry.first)->bytes();
  // Parameters held as runs (--zero 3): each bucket's run, padding and all.
  for (const auto &entry : state.shardedBuckets)
    if (entry.second.params.defined())
      parameters += entry.second.params.bytes();
  for (const auto &entry : state.buckets)
    gradients += entry.second.bytes();
  // A bucket's run is a view of its whole buffer, or, reduced per
  // micro-batch, a buffer of its own beside the whole ones held at once.
  for (const auto &entry : state.shardedBuckets)
    gradients += entry.second.microBatch ? entry.second.shard.bytes()
                                         : entry.second.flat.bytes();
  gradients += static_cast<uint64_t>(state.microBatchPeak);
  // (A gradient reduced per micro-batch has no buffer between them.)
  for (const auto &entry : ctx.grads())
    if (!entry.second.inBucket && entry.second.grad.defined())
      gradients += entry.second.grad.bytes();
  auto [masters, moments] = state.optimizer
                                ? state.optimizer->stateBytes()
                                : std::pair<uint64_t, uint64_t>{0, 0};
  uint64_t total = parameters + masters + gradients + moments +
                   static_cast<uint64_t>(state.largestGather);
  std::printf("memory held by rank 0 besides activations: parameters %llu, "
              "FP32 master weights %llu, gradient buffers %llu, optimizer "
              "state %llu, parameter all-gather %llu: total %llu bytes "
              "(%.1f MiB)\n",
              static_cast<unsigned long long>(parameters),
              static_cast<unsigned long long>(masters),
              static_cast<unsigned long long>(gradients),
              static_cast<unsigned long long>(moments),
              static_cast<unsigned long long>(state.largestGather),
              static_cast<unsigned long long>(total), total / 1048576.0);
  // On the GPU what is held lives in device memory, not in the RSS.
  if (ctx.device() != Device::CPU)
    return;
  uint64_t arenas = ctx.activationArenaBytes();
  double predicted = (total + arenas) / 1048576.0;
  std::printf("memory predicted for rank 0: held %llu + activation arenas "
              "%llu = %llu bytes (%.1f MiB); peak RSS %.1f MiB is %.3fx it\n",
              static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(arenas),
              static_cast<unsigned long long>(total + arenas), predicted,
              peakMiB, predicted > 0 ? peakMiB / predicted : 0.0);
}

int train(Context &ctx, const TrainOptions &o, int64_t sequenceMultiple,
          const ResumePoint *resume) {
  if (!tprt_model_train_step || !tprt_model_optimizer_step)
    fatal("this program was compiled for inference only: compile it with "
          "tpc --train to use --train");
  Tensor data = readTokens(o.data, "--data");
  checkVocabulary(data, o.data,
                  &tprt_model_vocab_size ? tprt_model_vocab_size : 0);
  Tensor mask;
  if (!o.dataMask.empty()) {
    mask = readTokens(o.dataMask, "--data-mask");
    if (mask.shape() != data.shape())
      fatal("--data-mask '" + o.dataMask + "' is " + mask.describe() +
            ", the data " + data.describe());
  } else {
    mask = Tensor(DType::I64, data.shape());
    std::fill_n(mask.i64(), mask.numel(), 1);
  }
  // An optimizer step takes the next dp x K x B rows; data-parallel rank
  // d gets the d-th K x B of them (so --dp 2 --grad-accum 1 sees the rows
  // --grad-accum 2 sees on one group).
  int64_t dp = ctx.dp().size();
  int64_t perStep = dp * o.microBatch * o.gradAccum;
  if (data.dim(0) < perStep)
    fatal("--data '" + o.data + "' has " + std::to_string(data.dim(0)) +
          " sequences; one step needs " + std::to_string(perStep) + " (" +
          (dp > 1 ? std::to_string(dp) + " data-parallel groups x " : "") +
          "--micro-batch " + std::to_string(o.microBatch) + " x --grad-accum " +
          std::to_string(o.gradAccum) + ")");
  // Sequence parallelism holds an equal share of the positions on each
  // rank: rows are padded to a multiple (mask 0: out of attention and of
  // the loss), as NeMo AutoModel pads them.
  int64_t length = data.dim(1);
  data = padSequence(data, sequenceMultiple);
  mask = padSequence(mask, sequenceMultiple);
  if (data.dim(1) != length)
    ctx.setUnpaddedSequence(length);
  if (!o.save.empty() && ctx.rank() == 0)
    checkWritable(o.save);
  std::ofstream log;
  if (!o.log.empty() && ctx.rank() == 0) {
    log.open(o.log);
    if (!log)
      fatal("--log: cannot write '" + o.log + "'");
  }

  RunPosition position = startingPosition(o, data.dim(0), length, resume);
  TrainState state(o);
  state.resume = resume;
  ctx.setTrainState(&state);
  // The init (a partitioned program's broadcast of its replicas) runs with
  // the state set: under --zero 3 it leaves the parameters as runs in the
  // state's buckets.
  if (tprt_model_init)
    tprt_model_init(ctx);
  RowOrder order(data.dim(0), position.seed);
#ifdef TPRT_WITH_CUDA
  // On the GPU the micro-batches replay a CUDA graph from the second step
  // on: the first made the buffers (and the buckets they are views of) that
  // the graph writes. Not with sharded buckets (--zero), whose reduce-
  // scatters and all-gathers keep state on the host per micro-batch, nor
  // when the data's ids were not checked against the vocabulary above (a
  // replay skips the kernels' checks, which read back to the host).
  std::optional<cuda::EntryGraphs> graphs;
  if (o.cudaGraphs && ctx.device() == Device::CUDA && &tprt_model_vocab_size &&
      tprt_model_vocab_size > 0)
    graphs.emplace(tprt_model_train_step, "the training step's micro-batch");
#endif
  int64_t stepRows = position.rowsConsumed;
  int64_t firstStep = position.step + 1, lastStep = position.step + o.steps;
  for (int64_t step = firstStep; step <= lastStep;
       ++step, stepRows += perStep) {
    double start = MPI_Wtime();
    bool replaying = false;
#ifdef TPRT_WITH_CUDA
    replaying = graphs && step > firstStep && state.shardedBuckets.empty();
#endif
    // The buffers stay (views of the gradient buckets); each step's first
    // gradient overwrites, or, replaying, they start at zero.
    beginTrainStep(ctx, state, /*zeroBuffers=*/replaying);
    double loss = 0;
    int64_t tokens = 0, processed = 0;
    int64_t row = stepRows + ctx.dp().rank() * o.microBatch * o.gradAccum;
    for (int64_t k = 0; k < o.gradAccum; ++k, row += o.microBatch) {
      Tensor ids = takeRows(data, order, row, o.microBatch);
      Tensor m = takeRows(mask, order, row, o.microBatch);
      tokens += labelTokens(m);
      // The micro-batch goes where the kernels run; the loss comes back.
      Tensor keys = m.to(ctx.device());
      if (keepsEveryKey(m))
        ctx.setKeyMaskKeepsAll(keys);
      Tensor stepLoss;
#ifdef TPRT_WITH_CUDA
      if (replaying)
        stepLoss = graphs->run(ctx, ids.to(ctx.device()), keys);
#endif
      if (!replaying)
        stepLoss = tprt_model_train_step(ctx, ids.to(ctx.device()), keys);
      loss += *stepLoss.to(Device::CPU).f32();
      processed += o.microBatch * length;
    }
    // The global batch's loss and label tokens (one data-parallel rank's
    // share each).
    if (dp > 1) {
      double sums[3] = {loss, static_cast<double>(tokens),
                        static_cast<double>(processed)};
      ctx.dp().allReduceSumF64(sums, 3);
      loss = sums[0];
      tokens = static_cast<int64_t>(sums[1]);
      processed = static_cast<int64_t>(sums[2]);
    }
    if (tokens == 0)
      fatal("step " + std::to_string(step) +
            " has no label tokens (every mask entry after the first position "
            "is 0)");
    state.labelTokens = tokens;
    tprt_model_optimizer_step(ctx);
    double norm = state.gradNorm;
    double seconds = MPI_Wtime() - start;
    loss /= static_cast<double>(tokens);
    if (ctx.rank() == 0)
      reportStep(log, step, loss, norm, processed / seconds, state.skipped);
  }
  // The peak resident memory of the largest rank.
  double rss = 0;
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0)
    rss = usage.ru_maxrss / 1024.0;
  MPI_Allreduce(MPI_IN_PLACE, &rss, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (ctx.rank() == 0) {
    std::printf("peak RSS %.1f MiB (the largest rank)\n", rss);
    reportMemoryHeld(ctx, state, rss);
    std::printf("replica gradient sync: %lld all-reduces of %.3f MiB (FP32) "
                "per optimizer step\n",
                static_cast<long long>(state.bucketCollectives),
                state.bucketBytes / 1048576.0);
#ifdef TPRT_WITH_CUDA
    if (graphs)
      std::printf("cuda graphs: %s\n",
                  graphs->captured()
                      ? "the micro-batches replayed a captured graph"
                      : "no micro-batch graph captured (all ran eagerly)");
#endif
    if (state.shardedCollectives)
      std::printf("data-parallel sharded buckets (--zero): %lld "
                  "reduce-scatters and all-gathers of %.3f MiB per "
                  "optimizer step\n",
                  static_cast<long long>(state.shardedCollectives),
                  state.shardedBytes / 1048576.0);
  }
  if (!o.save.empty()) {
    position.step = lastStep;
    position.rowsConsumed = stepRows;
    saveCheckpoint(ctx, o.save, o, position, state.optimizer.get());
  }
  ctx.setTrainState(nullptr);
  return 0;
}

} // namespace tprt
