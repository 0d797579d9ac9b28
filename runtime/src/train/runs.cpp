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

/// `fqn`: the parameter the program names (the lookup names none).
Streamed streamedBucket(Context &ctx, int64_t number, const char *fqn,
                        const char *op) {
  TrainState *state = ctx.trainState();
  if (!state)
    fatal(std::string(op) + ": runs only in training (model --train)");
  std::string what = std::string(op) + ": bucket " + std::to_string(number);
  auto found = state->shardedBuckets.find(number);
  if (found == state->shardedBuckets.end() || !found->second.params.defined() ||
      found->second.members.size() != 1 ||
      (fqn && found->second.members.front().fqn != fqn))
    fatal(what + " does not hold " +
          (fqn ? "parameter '" + std::string(fqn) + "'" : "one table") +
          " alone as runs (param_bucket_shard)");
  fqn = found->second.members.front().fqn.c_str();
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

/// Rows [first, first + rows) of the table in the bucket's runs: the
/// elements each rank's run holds of them, and where this rank's part
/// starts in its run. Counts one collective over them.
struct RowsInRuns {
  std::vector<int64_t> counts;
  int64_t at;
};
RowsInRuns rowsInRuns(Context &ctx, Streamed &s, int64_t first, int64_t rows) {
  int64_t hidden = s.member.shape[1], begin = s.member.offset + first * hidden;
  ++s.state.shardedCollectives;
  s.state.shardedBytes += rows * hidden * 4;
  int64_t at = std::max(begin, s.bucket.shardBegin) - s.bucket.shardBegin;
  return {runCounts(s.bucket, ctx.dp().size(), begin, rows * hidden),
          std::min(at, s.bucket.run)};
}

/// Rows [first, first + rows) of the table from the ranks' runs.
void gatherRows(Context &ctx, Streamed &s, int64_t first, int64_t rows,
                float *out) {
  RowsInRuns part = rowsInRuns(ctx, s, first, rows);
  ctx.dp().allGatherUneven(s.bucket.params.f32() + part.at, out, part.counts);
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
  RowsInRuns part = rowsInRuns(ctx, s, first, rows);
  std::vector<float> sums(part.counts[ctx.dp().rank()]);
  ctx.dp().reduceScatterSumUneven(grad, sums.data(), part.counts);
  float *run = s.bucket.shard.f32() + part.at;
  for (size_t i = 0; i < sums.size(); ++i)
    run[i] += sums[i];
}

/// Counts a block of `blockRows` rows as gathered while it lives (the
/// memory plan's most gathered at once).
struct HeldBlock {
  TrainState &state;
  int64_t bytes;
  HeldBlock(const Streamed &s, int64_t blockRows)
      : state(s.state),
        bytes(std::min(std::max<int64_t>(blockRows, 1), s.member.shape[0]) *
              s.member.shape[1] * 4) {
    state.gatheredHeld += bytes;
    state.largestGather = std::max(state.largestGather, state.gatheredHeld);
  }
  ~HeldBlock() { state.gatheredHeld -= bytes; }
};

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
  Streamed s =
      streamedBucket(ctx, bucket, /*fqn=*/nullptr, "param_runs_embedding");
  if (!onHostInF32(s, ids)) {
    Tensor table = gatheredTable(ctx, s);
    return vocabParallel ? embedding_vocab_parallel(ctx, ids, table,
                                                    std::move(vocabStarts),
                                                    std::move(vocabSizes))
                         : embedding(ctx, ids, table, -1);
  }
  HeldBlock held(s, blockRows);
  return cpu::streamedEmbedding(
      ctx, ids, s.member.shape[0], s.member.shape[1], blockRows, vocabParallel,
      vocabStarts, vocabSizes, [&](int64_t first, int64_t count, float *w) {
        gatherRows(ctx, s, first, count, w);
      });
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
  beginGradient(ctx, s, splitDim, owned);
  HeldBlock held(s, blockRows);
  return cpu::streamedLinearCrossEntropy(
      ctx, x, ids, mask, s.member.shape[0], blockRows, vocabParallel,
      vocabStarts, vocabSizes,
      [&](int64_t first, int64_t count, float *w) {
        gatherRows(ctx, s, first, count, w);
      },
      [&](int64_t first, int64_t count, const float *grad) {
        reduceRows(ctx, s, first, count, grad);
      });
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
