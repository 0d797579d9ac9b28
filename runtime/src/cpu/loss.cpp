//===- loss.cpp - the causal-LM cross-entropy -----------------------------===//
//
// tp.cross_entropy and its gradient. Position t of a row predicts token
// t + 1 and counts when the mask there is non-zero (transformers' labels
// with -100 on padding, shifted by one). The vocabulary-parallel form holds
// one block of the vocabulary per rank: the maximum, the sum of
// exponentials and the target logit are all-reduced per position, so the
// logits are never gathered.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "KernelUtils.h"
#include "Streamed.h"
#include "Vector.h"
#include "ops/Backends.h"
#include "tprt/tprt.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace tprt {
namespace {

/// Positions whose exponentials one vectorized call computes.
constexpr int64_t kRowBlock = 16;

/// The label of flattened position i of [B, S] ids (row i / S, position
/// i % S), or -1 when it does not count.
int64_t labelAt(const Tensor &ids, const Tensor &mask, int64_t seq, int64_t i) {
  if (i % seq + 1 >= seq || mask.i64()[i + 1] == 0)
    return -1;
  return ids.i64()[i + 1];
}

/// Stops when position i's label is outside the `vocab` tokens of the
/// whole vocabulary (all ranks' blocks).
void checkLabel(const char *op, int64_t label, int64_t i, int64_t seq,
                int64_t vocab) {
  if (label >= vocab || label < -1)
    fatal(std::string(op) + ": label " + std::to_string(label) + " at row " +
          std::to_string(i / seq) + ", position " +
          std::to_string(i % seq + 1) + " is outside the vocabulary [0, " +
          std::to_string(vocab) + ")");
}

/// The shapes of a loss call: logits [B, S, V], ids and mask [B, S].
struct LossShape {
  int64_t batch, seq, vocab;
  LossShape(const Tensor &logits, const Tensor &ids, const Tensor &mask,
            const char *op, bool hostBf16 = false) {
    if (!hostBf16)
      requireF32(logits, op, "the logits");
    if (logits.rank() != 3 || ids.dtype() != DType::I64 ||
        mask.dtype() != DType::I64 || ids.rank() != 2 ||
        ids.shape() != mask.shape() || ids.dim(0) != logits.dim(0) ||
        ids.dim(1) != logits.dim(1))
      fatal(std::string(op) + ": logits " + logits.describe() + ", ids " +
            ids.describe() + " and mask " + mask.describe() +
            " are not [B, S, V], int64 [B, S], int64 [B, S]");
    batch = logits.dim(0);
    seq = logits.dim(1);
    vocab = logits.dim(2);
  }
  /// The label of position (b, t), or -1 when it does not count.
  int64_t label(const Tensor &ids, const Tensor &mask, int64_t b,
                int64_t t) const {
    return labelAt(ids, mask, seq, b * seq + t);
  }
};

/// Rows [first, first + rows) of the logits as f32: in place for f32
/// logits, widened into `scratch` (rows x vocab floats) for host bf16 ones.
const float *logitRows(const Tensor &logits, int64_t vocab, int64_t first,
                       int64_t rows, std::vector<float> &scratch) {
  if (logits.dtype() == DType::F32)
    return logits.f32() + first * vocab;
  cpu::widenBf16(static_cast<const uint16_t *>(logits.raw()) + first * vocab,
                 scratch.data(), rows * vocab);
  return scratch.data();
}

/// `rows` rows of `held` logits of which the first `n` are the vocabulary
/// (the rest an uneven block's padding): sums[r] of exp(x[r, i] -
/// shifts[r]) over i < n, `exps` holding rows x held floats.
void sumsOfExpHeldRows(const float *x, const float *shifts, int64_t rows,
                       int64_t n, int64_t held, float *exps, double *sums) {
  if (n == held)
    return cpu::sumsOfExpRows(x, shifts, rows, n, exps, sums);
  for (int64_t r = 0; r < rows; ++r)
    cpu::sumsOfExpRows(x + r * held, shifts + r, 1, n, exps, sums + r);
}

/// out[r, i] = exp(x[r, i] - shifts[r]) for i < n, zero in the padding.
void expShiftedHeldRows(const float *x, const float *shifts, int64_t rows,
                        int64_t n, int64_t held, float *out) {
  if (n == held)
    return cpu::expShiftedRows(x, shifts, rows, n, out);
  for (int64_t r = 0; r < rows; ++r) {
    cpu::expShiftedRows(x + r * held, shifts + r, 1, n, out + r * held);
    std::fill(out + r * held + n, out + (r + 1) * held, 0.0f);
  }
}

/// For each of `rows` rows of `held` logits (the first `n` real), the sum
/// of exp(l[r, i] - shifts[r]) in double, given to store(r, sum); the rows
/// over the threads in blocks of kRowBlock.
template <typename Store>
void rowSumsOfExp(const float *l, const float *shifts, int64_t rows, int64_t n,
                  int64_t held, Store store) {
#pragma omp parallel
  {
    std::vector<float> exps(kRowBlock * held);
    double blockSums[kRowBlock];
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; r += kRowBlock) {
      int64_t count = std::min(kRowBlock, rows - r);
      sumsOfExpHeldRows(l + r * held, shifts + r, count, n, held, exps.data(),
                        blockSums);
      for (int64_t j = 0; j < count; ++j)
        store(r + j, blockSums[j]);
    }
  }
}

/// A row's target that does not count (its position's label is -1).
constexpr int64_t kUncounted = std::numeric_limits<int64_t>::min();

/// The logits' gradient in place: softmax - onehot. targetOf(r) is row r's
/// target among these `held` columns (outside [0, n): another block's), or
/// kUncounted, whose row is zeroed.
template <typename TargetOf>
void softmaxMinusOneHot(float *l, const float *lse, int64_t rows, int64_t n,
                        int64_t held, TargetOf targetOf) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r += kRowBlock) {
    int64_t count = std::min(kRowBlock, rows - r);
    expShiftedHeldRows(l + r * held, lse + r, count, n, held, l + r * held);
    for (int64_t j = r; j < r + count; ++j) {
      int64_t target = targetOf(j);
      if (target == kUncounted)
        std::fill_n(l + j * held, held, 0.0f);
      else if (target >= 0 && target < n)
        l[j * held + target] -= 1.0f;
    }
  }
}

/// Completes `rows` positions' log-sum-exp (`lse` holds their maxima, the
/// sums of exponentials below them and the target logits are this rank's
/// parts when `vocabParallel`, all-reduced here) and returns the sum of
/// lse - target logit over the positions that count (labelOf(r) >= 0).
template <typename LabelOf>
double addLosses(Context &ctx, bool vocabParallel, float *lse, float *sums,
                 float *targets, int64_t rows, LabelOf labelOf) {
  if (vocabParallel) {
    ctx.tp().allReduceSum(sums, rows);
    ctx.tp().allReduceSum(targets, rows);
  }
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    lse[r] += std::log(sums[r]);
    if (labelOf(r) >= 0)
      loss += static_cast<double>(lse[r]) - targets[r];
  }
  return loss;
}

Tensors crossEntropy(Context &ctx, const Tensor &logits, const Tensor &ids,
                     const Tensor &mask, bool vocabParallel,
                     const std::vector<int64_t> &starts = {},
                     const std::vector<int64_t> &sizes = {}) {
  const char *op =
      vocabParallel ? "cross_entropy_vocab_parallel" : "cross_entropy";
  bool bf16 = onHostAsBf16(logits);
  LossShape s(logits, ids, mask, op, bf16);
  int64_t positions = s.batch * s.seq;
  VocabRange range =
      vocabPartOf(ctx, s.vocab, vocabParallel, starts, sizes, op);
  int64_t start = range.start, n = range.rows;
  // bf16 logits are read a block of positions at a time, widened into the
  // thread's scratch (mapBf16Blocks' reason).
  auto scratchFor = [&] {
    return std::vector<float>(bf16 ? kRowBlock * s.vocab : 0);
  };
  // Per position: the maximum, then the sum of exponentials below it and
  // the target logit (zero on the ranks that do not own it).
  Tensor lse = Tensor::uninitialized(DType::F32, {s.batch, s.seq});
  std::vector<float> sums(positions), targets(positions, 0.0f);
  float *m = lse.f32();
#pragma omp parallel
  {
    std::vector<float> scratch = scratchFor();
#pragma omp for schedule(static)
    for (int64_t i = 0; i < positions; i += kRowBlock) {
      int64_t rows = std::min(kRowBlock, positions - i);
      const float *x = logitRows(logits, s.vocab, i, rows, scratch);
      for (int64_t r = 0; r < rows; ++r)
        m[i + r] = cpu::maxOf(x + r * s.vocab, n);
    }
  }
  if (vocabParallel)
    ctx.tp().allReduceMax(m, positions);
  for (int64_t i = 0; i < positions; ++i) {
    int64_t label = labelAt(ids, mask, s.seq, i);
    checkLabel(op, label, i, s.seq, range.vocab);
    if (label >= start && label < start + n) {
      int64_t at = i * s.vocab + label - start;
      targets[i] =
          bf16 ? bf16Load(static_cast<const uint16_t *>(logits.raw())[at])
               : logits.f32()[at];
    }
  }
#pragma omp parallel
  {
    std::vector<float> scratch = scratchFor(), exps(kRowBlock * s.vocab);
    double blockSums[kRowBlock];
#pragma omp for schedule(static)
    for (int64_t i = 0; i < positions; i += kRowBlock) {
      int64_t rows = std::min(kRowBlock, positions - i);
      const float *x = logitRows(logits, s.vocab, i, rows, scratch);
      sumsOfExpHeldRows(x, m + i, rows, n, s.vocab, exps.data(), blockSums);
      for (int64_t r = 0; r < rows; ++r)
        sums[i + r] = static_cast<float>(blockSums[r]);
    }
  }
  double loss = addLosses(
      ctx, vocabParallel, m, sums.data(), targets.data(), positions,
      [&](int64_t i) { return s.label(ids, mask, i / s.seq, i % s.seq); });
  Tensor total = Tensor::uninitialized(DType::F32, {});
  *total.f32() = static_cast<float>(loss);
  return {total, lse};
}

/// Logits per block of tp.linear_cross_entropy: 4 MiB of f32 (at least
/// 256 positions, lossBlockPositions: smaller blocks are slower than the
/// separate ops at a large vocabulary; docs/training.md has the
/// measurements).
constexpr int64_t kLossBlockElements = int64_t(1) << 20;

/// tp.linear_cross_entropy on the host in f32: per block of positions, the
/// logits (one product), the rows' maxima, sums of exponentials and target
/// logits as crossEntropy computes them (all-reduced per block when
/// vocabulary-parallel), the loss, the logits' gradient in place, then the
/// block's rows of dx and its share of dw (two products, dw accumulated).
/// The same arithmetic per row as the separate ops, the loss summed in the
/// same order; only dw's sum over positions is grouped by block.
/// With `dwInto`, dw is added into that [V, H] f32 buffer (overwriting it
/// when `overwrite`) and not returned.
Tensors linearCrossEntropy(Context &ctx, const Tensor &x, const Tensor &w,
                           const Tensor &ids, const Tensor &mask,
                           bool vocabParallel,
                           const std::vector<int64_t> &starts,
                           const std::vector<int64_t> &sizes,
                           float *dwInto = nullptr, bool overwrite = false) {
  const char *op = vocabParallel ? "linear_cross_entropy_vocab_parallel"
                                 : "linear_cross_entropy";
  requireF32(x, op, "x");
  requireF32(w, op, "the weight");
  requireLinearCrossEntropyShapes(x, w, ids, mask, op);
  int64_t seq = x.dim(1), hidden = x.dim(2), vocab = w.dim(0);
  int64_t positions = x.dim(0) * seq;
  // An uneven block's padding rows of w are zeros: their logits are
  // computed (one product) but never read, and their gradient is zero.
  VocabRange range = vocabPartOf(ctx, vocab, vocabParallel, starts, sizes, op);
  int64_t start = range.start, n = range.rows;
  bool bf16Operands = ctx.autocast() == DType::BF16;
  auto label = [&](int64_t i) { return labelAt(ids, mask, seq, i); };
  for (int64_t i = 0; i < positions; ++i)
    checkLabel(op, label(i), i, seq, range.vocab);
  int64_t blockRows = lossBlockPositions(positions, vocab, kLossBlockElements);
  Tensor dx(DType::F32, x.shape()), dw;
  if (!dwInto)
    dw = Tensor(DType::F32, w.shape());
  float *dwOut = dwInto ? dwInto : dw.f32();
  if (dwInto && overwrite && (positions == 0 || vocab == 0 || hidden == 0))
    std::fill_n(dwInto, w.numel(), 0.0f);
  std::vector<float> logits(blockRows * vocab), lse(blockRows), sums(blockRows),
      targets(blockRows);
  double loss = 0;
  for (int64_t first = 0; first < positions; first += blockRows) {
    int64_t rows = std::min(blockRows, positions - first);
    const float *xb = x.f32() + first * hidden;
    float *l = logits.data();
    if (vocab > 0 && hidden > 0)
      cpu::linear(w, xb, l, 1, rows, ctx.constantWeights(), bf16Operands);
    else
      std::fill_n(l, rows * vocab, 0.0f);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      lse[r] = cpu::maxOf(l + r * vocab, n);
    if (vocabParallel)
      ctx.tp().allReduceMax(lse.data(), rows);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t target = label(first + r);
      targets[r] = target >= start && target < start + n
                       ? l[r * vocab + target - start]
                       : 0.0f;
    }
    rowSumsOfExp(l, lse.data(), rows, n, vocab, [&](int64_t r, double sum) {
      sums[r] = static_cast<float>(sum);
    });
    loss +=
        addLosses(ctx, vocabParallel, lse.data(), sums.data(), targets.data(),
                  rows, [&](int64_t r) { return label(first + r); });
    softmaxMinusOneHot(l, lse.data(), rows, n, vocab, [&](int64_t r) {
      int64_t target = label(first + r);
      return target < 0 ? kUncounted : target - start;
    });
    if (vocab > 0 && hidden > 0) {
      cpu::linearGradInput(l, w.f32(), dx.f32() + first * hidden, rows, hidden,
                           vocab, bf16Operands);
      cpu::linearGradWeight(l, xb, dwOut, rows, hidden, vocab, bf16Operands,
                            /*accumulate=*/first > 0 || (dwInto && !overwrite));
    }
  }
  Tensor total = Tensor::uninitialized(DType::F32, {});
  *total.f32() = static_cast<float>(loss);
  if (dwInto)
    return {total, dx};
  return {total, dx, dw};
}

} // namespace

Tensors cpu::linear_cross_entropy(Context &ctx, const Tensor &x,
                                  const Tensor &w, const Tensor &ids,
                                  const Tensor &mask) {
  if (x.dtype() != DType::F32 || w.dtype() != DType::F32)
    return composed::linear_cross_entropy(ctx, x, w, ids, mask);
  return linearCrossEntropy(ctx, x, w, ids, mask, false, {}, {});
}

Tensors cpu::linear_cross_entropy_vocab_parallel(
    Context &ctx, const Tensor &x, const Tensor &w, const Tensor &ids,
    const Tensor &mask, std::vector<int64_t> vocabStarts,
    std::vector<int64_t> vocabSizes) {
  if (x.dtype() != DType::F32 || w.dtype() != DType::F32)
    return composed::linear_cross_entropy_vocab_parallel(
        ctx, x, w, ids, mask, std::move(vocabStarts), std::move(vocabSizes));
  return linearCrossEntropy(ctx, x, w, ids, mask, true, vocabStarts,
                            vocabSizes);
}

Tensors cpu::accumulate_linear_cross_entropy(Context &ctx, const Tensor &x,
                                             const Tensor &w, const Tensor &ids,
                                             const Tensor &mask,
                                             const char *fqn, int64_t splitDim,
                                             bool owned, bool vocabParallel,
                                             std::vector<int64_t> vocabStarts,
                                             std::vector<int64_t> vocabSizes) {
  if (x.dtype() != DType::F32 || w.dtype() != DType::F32)
    return composed::accumulate_linear_cross_entropy(
        ctx, x, w, ids, mask, fqn, splitDim, owned, vocabParallel,
        std::move(vocabStarts), std::move(vocabSizes));
  Context::GradBuffer &buffer = ctx.gradBuffer(w, fqn);
  bool first = buffer.takeFirst(splitDim, owned);
  return linearCrossEntropy(ctx, x, w, ids, mask, vocabParallel, vocabStarts,
                            vocabSizes, buffer.grad.f32(), first);
}

Tensors cpu::streamedLinearCrossEntropy(
    Context &ctx, const Tensor &x, const Tensor &ids, const Tensor &mask,
    int64_t vocab, int64_t blockRows, bool vocabParallel,
    const std::vector<int64_t> &starts, const std::vector<int64_t> &sizes,
    const ReadRows &read, const TakeRows &take) {
  const char *op = "param_runs_linear_cross_entropy";
  requireF32(x, op, "x");
  if (x.rank() != 3 || ids.dtype() != DType::I64 ||
      mask.dtype() != DType::I64 || ids.rank() != 2 ||
      ids.shape() != mask.shape() || ids.dim(0) != x.dim(0) ||
      ids.dim(1) != x.dim(1) || blockRows < 1)
    fatal(std::string(op) + ": x " + x.describe() + ", ids " + ids.describe() +
          " and mask " + mask.describe() +
          " are not [B, S, H], int64 [B, S], int64 [B, S] (or no rows per "
          "block)");
  int64_t seq = x.dim(1), hidden = x.dim(2), positions = x.dim(0) * seq;
  VocabRange range = vocabPartOf(ctx, vocab, vocabParallel, starts, sizes, op);
  int64_t start = range.start, n = range.rows;
  bool bf16Operands = ctx.autocast() == DType::BF16;
  auto label = [&](int64_t i) { return labelAt(ids, mask, seq, i); };
  for (int64_t i = 0; i < positions; ++i)
    checkLabel(op, label(i), i, seq, range.vocab);
  blockRows = std::min(blockRows, std::max<int64_t>(vocab, 1));
  // Positions per product, as linearCrossEntropy picks them for a block.
  int64_t positionRows =
      lossBlockPositions(positions, blockRows, kLossBlockElements);
  Tensor block = Tensor::uninitialized(DType::F32, {blockRows, hidden});
  std::vector<float> logits(std::max<int64_t>(positionRows, 1) * blockRows);
  // Calls fn(first row, rows, valid rows, positions [p, p + count), their
  // logits) for every block of the weight and of the positions; the
  // block's rows are in `block`.
  auto forEachBlock = [&](auto fn) {
    for (int64_t first = 0; first < vocab; first += blockRows) {
      int64_t rows = std::min(blockRows, vocab - first);
      int64_t valid = std::clamp<int64_t>(n - first, 0, rows);
      read(first, rows, block.f32());
      Tensor w = Tensor::view(block, 0, {rows, hidden});
      for (int64_t p = 0; p < positions; p += positionRows) {
        int64_t count = std::min(positionRows, positions - p);
        if (hidden > 0)
          cpu::linear(w, x.f32() + p * hidden, logits.data(), 1, count,
                      /*packed=*/false, bf16Operands);
        else
          std::fill_n(logits.data(), count * rows, 0.0f);
        fn(first, rows, valid, p, count, logits.data());
      }
    }
  };
  // The maxima, then the sums of exponentials below them (in double over
  // the blocks) and the target logits, then the loss, as crossEntropy.
  Tensor lse = Tensor::uninitialized(DType::F32, {positions});
  float *m = lse.f32();
  std::fill_n(m, positions, -std::numeric_limits<float>::infinity());
  forEachBlock([&](int64_t, int64_t rows, int64_t valid, int64_t p,
                   int64_t count, const float *l) {
    if (valid == 0)
      return;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < count; ++r)
      m[p + r] = std::max(m[p + r], cpu::maxOf(l + r * rows, valid));
  });
  if (vocabParallel)
    ctx.tp().allReduceMax(m, positions);
  std::vector<double> sums(positions, 0.0);
  std::vector<float> targets(positions, 0.0f);
  forEachBlock([&](int64_t first, int64_t rows, int64_t valid, int64_t p,
                   int64_t count, const float *l) {
    if (valid == 0)
      return;
    rowSumsOfExp(l, m + p, count, valid, rows,
                 [&](int64_t r, double sum) { sums[p + r] += sum; });
    for (int64_t r = 0; r < count; ++r) {
      int64_t target = label(p + r) - start - first;
      if (target >= 0 && target < valid)
        targets[p + r] = l[r * rows + target];
    }
  });
  std::vector<float> sumsF(sums.begin(), sums.end());
  double loss = addLosses(ctx, vocabParallel, m, sumsF.data(), targets.data(),
                          positions, label);
  // The gradients: softmax - onehot at counted positions, per block; dx
  // sums the blocks' products, each block's dw goes to `take`.
  Tensor dx(DType::F32, x.shape());
  std::vector<float> part(positionRows * hidden),
      dw(static_cast<size_t>(blockRows * hidden));
  forEachBlock([&](int64_t first, int64_t rows, int64_t valid, int64_t p,
                   int64_t count, float *l) {
    softmaxMinusOneHot(l, m + p, count, valid, rows, [&](int64_t r) {
      int64_t target = label(p + r);
      return target < 0 ? kUncounted : target - start - first;
    });
    if (hidden > 0) {
      cpu::linearGradInput(l, block.f32(), part.data(), count, hidden, rows,
                           bf16Operands);
      float *d = dx.f32() + p * hidden;
      for (int64_t i = 0; i < count * hidden; ++i)
        d[i] += part[i];
      cpu::linearGradWeight(l, x.f32() + p * hidden, dw.data(), count, hidden,
                            rows, bf16Operands, /*accumulate=*/p > 0);
    }
    if (p + count == positions)
      take(first, rows, dw.data());
  });
  Tensor total = Tensor::uninitialized(DType::F32, {});
  *total.f32() = static_cast<float>(loss);
  return {total, dx};
}

Tensors cpu::cross_entropy(Context &ctx, const Tensor &logits,
                           const Tensor &ids, const Tensor &mask) {
  // As transformers' loss upcasts the logits: loss and lse in f32.
  if (!onHostAsBf16(logits) && reducedType(logits) != DType::F32)
    return cpu::cross_entropy(ctx, widened(logits), ids, mask);
  return crossEntropy(ctx, logits, ids, mask, /*vocabParallel=*/false);
}

Tensors cpu::cross_entropy_vocab_parallel(Context &ctx, const Tensor &logits,
                                          const Tensor &ids, const Tensor &mask,
                                          std::vector<int64_t> vocabStarts,
                                          std::vector<int64_t> vocabSizes) {
  if (!onHostAsBf16(logits) && reducedType(logits) != DType::F32)
    return cpu::cross_entropy_vocab_parallel(ctx, widened(logits), ids, mask,
                                             std::move(vocabStarts),
                                             std::move(vocabSizes));
  return crossEntropy(ctx, logits, ids, mask, /*vocabParallel=*/true,
                      vocabStarts, vocabSizes);
}

Tensor cpu::cross_entropy_grad(Context &ctx, const Tensor &logits,
                               const Tensor &ids, const Tensor &mask,
                               const Tensor &lse, bool vocabParallel,
                               std::vector<int64_t> vocabStarts,
                               std::vector<int64_t> vocabSizes) {
  // bf16 logits are widened a block of rows at a time (mapBf16Blocks'
  // reason), the gradient rounded to bf16 as the block is done.
  bool bf16 = onHostAsBf16(logits);
  if (!bf16)
    TPRT_IN_F32(logits,
                cpu::cross_entropy_grad(ctx, widened(logits), ids, mask, lse,
                                        vocabParallel, vocabStarts, vocabSizes))
  LossShape s(logits, ids, mask, "cross_entropy_grad", bf16);
  requireF32(lse, "cross_entropy_grad", "lse");
  if (lse.shape() != ids.shape())
    fatal("cross_entropy_grad: lse " + lse.describe() + " is not [B, S]");
  VocabRange range = vocabPartOf(ctx, s.vocab, vocabParallel, vocabStarts,
                                 vocabSizes, "cross_entropy_grad");
  int64_t start = range.start, n = range.rows;
  Tensor out = Tensor::uninitialized(logits.dtype(), logits.shape());
  const float *l = lse.f32();
  int64_t positions = s.batch * s.seq;
#pragma omp parallel
  {
    std::vector<float> scratch(bf16 ? kRowBlock * s.vocab : 0);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < positions; i += kRowBlock) {
      int64_t rows = std::min(kRowBlock, positions - i);
      const float *x = bf16 ? scratch.data() : logits.f32() + i * s.vocab;
      float *o = bf16 ? scratch.data() : out.f32() + i * s.vocab;
      if (bf16)
        cpu::widenBf16(static_cast<const uint16_t *>(logits.raw()) +
                           i * s.vocab,
                       scratch.data(), rows * s.vocab);
      expShiftedHeldRows(x, l + i, rows, n, s.vocab, o);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t label = s.label(ids, mask, (i + r) / s.seq, (i + r) % s.seq);
        if (label < 0)
          std::fill_n(o + r * s.vocab, s.vocab, 0.0f);
        else if (label >= start && label < start + n)
          o[r * s.vocab + label - start] -= 1.0f;
      }
      if (bf16)
        cpu::narrowToBf16(o, static_cast<uint16_t *>(out.raw()) + i * s.vocab,
                          rows * s.vocab);
    }
  }
  return out;
}

} // namespace tprt
