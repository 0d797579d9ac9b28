//===- runs.cpp - ops over a table held as data-parallel runs -------------===//
//
// --zero 3 keeps a vocabulary table (embedding, output projection) as this
// rank's run of its bucket, and the compiler (tp-stream-param-runs) has
// its loss and its embedding gradient read it here a block of rows at a
// time: each block all-gathered over the data-parallel group, each block's
// gradient reduce-scattered into the bucket's gradient run, so that
// neither the table nor its gradient is ever whole. On the GPU, and for
// tables not in f32, the table is gathered whole for the ordinary call
// instead (its gradient then goes through the bucket's whole buffer, as
// without streaming).
//
//===----------------------------------------------------------------------===//

#include "cpu/Streamed.h"
#include "tprt/Train.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace tprt {
namespace {

/// The bucket `number`, held as runs of the one parameter `fqn`; its
/// gradient's buffer entry (made on first use) marks the step's gradient.
struct Streamed {
  int64_t number;
  TrainState &state;
  ShardedBucket &bucket;
  const ShardedBucket::Member &member;
};

Streamed streamedBucket(Context &ctx, int64_t number, const char *fqn,
                        const char *op) {
  TrainState *state = ctx.trainState();
  if (!state)
    fatal(std::string(op) + ": runs only in training (model --train)");
  std::string what = std::string(op) + ": bucket " + std::to_string(number);
  auto found = state->shardedBuckets.find(number);
  if (found == state->shardedBuckets.end() || !found->second.params.defined() ||
      found->second.members.size() != 1 ||
      found->second.members.front().fqn != fqn)
    fatal(what + " does not hold parameter '" + fqn +
          "' alone as runs (param_bucket_shard)");
  ShardedBucket &b = found->second;
  const ShardedBucket::Member &m = b.members.front();
  if (m.shape.size() != 2)
    fatal(what + ": parameter '" + fqn + "' is not a [rows, hidden] table");
  return {number, *state, b, m};
}

/// Whether the table is read a block at a time here: f32 runs on the host.
bool onHostInF32(const Streamed &s, const Tensor &x) {
  return s.bucket.dtype == DType::F32 && !s.bucket.params.onGpu() && !x.onGpu();
}

/// The elements each data-parallel rank's run holds of the bucket's flat
/// range [begin, begin + count) (runs are consecutive, in rank order).
std::vector<int64_t> runCounts(const ShardedBucket &b, int ranks, int64_t begin,
                               int64_t count) {
  std::vector<int64_t> counts(ranks);
  for (int r = 0; r < ranks; ++r)
    counts[r] = std::max<int64_t>(0, std::min(begin + count, (r + 1) * b.run) -
                                         std::max(begin, r * b.run));
  return counts;
}

/// Rows [first, first + rows) of the table from the ranks' runs.
void gatherRows(Context &ctx, Streamed &s, int64_t first, int64_t rows,
                float *out) {
  int64_t hidden = s.member.shape[1], begin = s.member.offset + first * hidden;
  Communicator &dp = ctx.dp();
  std::vector<int64_t> counts =
      runCounts(s.bucket, dp.size(), begin, rows * hidden);
  int64_t at = std::max(begin, s.bucket.shardBegin) - s.bucket.shardBegin;
  dp.allGatherUneven(s.bucket.params.f32() + std::min(at, s.bucket.run), out,
                     counts);
  ++s.state.shardedCollectives;
  s.state.shardedBytes += rows * hidden * 4;
}

/// The step's first gradient of the table overwrites the bucket's run
/// (which the earlier steps' sums are in); the ones after add.
void beginGradient(Context &ctx, Streamed &s, int64_t splitDim, bool owned) {
  ShardedBucket &b = s.bucket;
  if (!b.shard.defined())
    b.shard = Tensor(DType::F32, {b.run});
  b.microBatch = true;
  s.state.microBatchBuckets[s.member.fqn] = s.number;
  if (!b.reduced)
    std::fill_n(b.shard.f32(), b.run, 0.0f);
  b.reduced = true;
  ctx.grads()[s.member.fqn].takeFirst(splitDim, owned);
}

/// Adds the data-parallel sum of rows [first, first + rows)' gradient
/// into this rank's part of the bucket's run.
void reduceRows(Context &ctx, Streamed &s, int64_t first, int64_t rows,
                const float *grad) {
  int64_t hidden = s.member.shape[1], begin = s.member.offset + first * hidden;
  Communicator &dp = ctx.dp();
  std::vector<int64_t> counts =
      runCounts(s.bucket, dp.size(), begin, rows * hidden);
  std::vector<float> sums(counts[dp.rank()]);
  dp.reduceScatterSumUneven(grad, sums.data(), counts);
  int64_t at = std::max(begin, s.bucket.shardBegin) - s.bucket.shardBegin;
  float *run = s.bucket.shard.f32() + at;
  for (size_t i = 0; i < sums.size(); ++i)
    run[i] += sums[i];
  ++s.state.shardedCollectives;
  s.state.shardedBytes += rows * hidden * 4;
}

/// The table gathered whole (the fallback), as param_bucket_gather does.
Tensor gatheredTable(Context &ctx, const Streamed &s) {
  int64_t element = static_cast<int64_t>(dtypeSize(s.bucket.dtype));
  return param_bucket_gather(ctx, s.number, s.bucket.dtype, {s.member.fqn},
                             s.bucket.padded * element)
      .front();
}

} // namespace

Tensor param_runs_embedding(Context &ctx, const Tensor &ids, int64_t bucket,
                            bool vocabParallel,
                            std::vector<int64_t> vocabStarts,
                            std::vector<int64_t> vocabSizes,
                            int64_t blockRows) {
  const char *op = "param_runs_embedding";
  TrainState *state = ctx.trainState();
  auto found = state ? state->shardedBuckets.find(bucket)
                     : std::map<int64_t, ShardedBucket>::iterator();
  if (!state || found == state->shardedBuckets.end() ||
      found->second.members.size() != 1)
    fatal(std::string(op) + ": bucket " + std::to_string(bucket) +
          " does not hold one table as runs (param_bucket_shard)");
  Streamed s = streamedBucket(ctx, bucket,
                              found->second.members.front().fqn.c_str(), op);
  if (!onHostInF32(s, ids)) {
    Tensor table = gatheredTable(ctx, s);
    return vocabParallel ? embedding_vocab_parallel(ctx, ids, table,
                                                    std::move(vocabStarts),
                                                    std::move(vocabSizes))
                         : embedding(ctx, ids, table, -1);
  }
  int64_t rows = s.member.shape[0], hidden = s.member.shape[1];
  // The block of rows held while the lookup runs, counted as gathered.
  int64_t held = std::min(std::max<int64_t>(blockRows, 1), rows) * hidden * 4;
  s.state.gatheredHeld += held;
  s.state.largestGather = std::max(s.state.largestGather, s.state.gatheredHeld);
  Tensor out = cpu::streamedEmbedding(
      ctx, ids, rows, hidden, blockRows, vocabParallel, vocabStarts, vocabSizes,
      [&](int64_t first, int64_t count, float *w) {
        gatherRows(ctx, s, first, count, w);
      });
  s.state.gatheredHeld -= held;
  return out;
}

Tensors param_runs_linear_cross_entropy(
    Context &ctx, const Tensor &x, const Tensor &ids, const Tensor &mask,
    int64_t bucket, const char *fqn, int64_t splitDim, bool owned,
    bool vocabParallel, std::vector<int64_t> vocabStarts,
    std::vector<int64_t> vocabSizes, int64_t blockRows) {
  Streamed s =
      streamedBucket(ctx, bucket, fqn, "param_runs_linear_cross_entropy");
  if (!onHostInF32(s, x) || x.dtype() != DType::F32) {
    Tensor w = gatheredTable(ctx, s);
    return accumulate_linear_cross_entropy(
        ctx, x, w, ids, mask, fqn, splitDim, owned, vocabParallel,
        std::move(vocabStarts), std::move(vocabSizes));
  }
  int64_t rows = s.member.shape[0], hidden = s.member.shape[1];
  beginGradient(ctx, s, splitDim, owned);
  // The block of rows held while the loss runs, counted as gathered.
  int64_t held = std::min(std::max<int64_t>(blockRows, 1), rows) * hidden * 4;
  s.state.gatheredHeld += held;
  s.state.largestGather = std::max(s.state.largestGather, s.state.gatheredHeld);
  Tensors out = cpu::streamedLinearCrossEntropy(
      ctx, x, ids, mask, rows, blockRows, vocabParallel, vocabStarts,
      vocabSizes,
      [&](int64_t first, int64_t count, float *w) {
        gatherRows(ctx, s, first, count, w);
      },
      [&](int64_t first, int64_t count, const float *grad) {
        reduceRows(ctx, s, first, count, grad);
      });
  s.state.gatheredHeld -= held;
  return out;
}

void param_runs_embedding_grad(Context &ctx, const Tensor &ids,
                               const Tensor &dy, int64_t bucket,
                               const char *fqn, int64_t splitDim, bool owned,
                               bool vocabParallel, int64_t paddingIdx,
                               std::vector<int64_t> vocabStarts,
                               std::vector<int64_t> vocabSizes,
                               int64_t blockRows) {
  Streamed s = streamedBucket(ctx, bucket, fqn, "param_runs_embedding_grad");
  if (!onHostInF32(s, dy)) {
    Tensor w = gatheredTable(ctx, s);
    return accumulate_embedding_grad(
        ctx, ids, dy, w, fqn, splitDim, owned, vocabParallel, paddingIdx,
        std::move(vocabStarts), std::move(vocabSizes));
  }
  beginGradient(ctx, s, splitDim, owned);
  cpu::streamedEmbeddingGrad(
      ctx, ids, dy, s.member.shape[0], s.member.shape[1], blockRows,
      vocabParallel, paddingIdx, vocabStarts, vocabSizes,
      [&](int64_t first, int64_t count, const float *grad) {
        reduceRows(ctx, s, first, count, grad);
      });
}

} // namespace tprt
