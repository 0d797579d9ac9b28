//===- kernels.cpp - CPU kernels of the tp ops ----------------------------===//
//
// cpu::Name of the forward's calls (tprt/Calls.def), on host tensors; the
// dispatch layer (src/ops/) calls them on a context that runs on the CPU.
// f32 compute. Matrix products go to the GEMM library (Gemm.h); the rest are
// loops parallelized with OpenMP over independent rows, heads or elements.
//
//===----------------------------------------------------------------------===//

#include "Activation.h"
#include "Gemm.h"
#include "KernelUtils.h"
#include "Streamed.h"
#include "Vector.h"
#include "common/Rotary.h"
#include "ops/Backends.h"
#include "tprt/tprt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <omp.h>
#include <optional>
#include <string>
#include <vector>

namespace tprt {
namespace {

/// Stops at the first of `ids` outside [0, vocab): the whole vocabulary
/// (all ranks' blocks).
void requireIdsIn(const Tensor &ids, int64_t vocab) {
  const int64_t *id = ids.i64();
  for (int64_t i = 0; i < ids.numel(); ++i)
    if (id[i] < 0 || id[i] >= vocab)
      fatal("embedding: token id " + std::to_string(id[i]) + " at position " +
            std::to_string(i) + " is outside the vocabulary [0, " +
            std::to_string(vocab) + ")");
}

} // namespace

Tensor cpu::embedding(Context &ctx, const Tensor &ids, const Tensor &table,
                      int64_t slot) {
  if (ids.dtype() != DType::I64)
    fatal("embedding: ids must be int64, got " + ids.describe());
  if (table.rank() != 2 || table.dtype() == DType::I64 || table.onGpu())
    fatal("embedding: the table must be [vocab, hidden], got " +
          table.describe());
  int64_t vocab = table.dim(0), hidden = table.dim(1), n = ids.numel();
  std::vector<int64_t> shape = ids.shape();
  shape.push_back(hidden);
  // Rows are copied in the table's type (a bf16 program's embedding is bf16).
  Tensor out = ctx.placed(slot, table.dtype(), shape);
  const int64_t *id = ids.i64();
  requireIdsIn(ids, vocab);
  size_t row = hidden * dtypeSize(table.dtype());
  const auto *t = static_cast<const unsigned char *>(table.raw());
  auto *o = static_cast<unsigned char *>(out.raw());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(t + id[i] * row, row, o + i * row);
  return out;
}

Tensor cpu::streamedEmbedding(Context &ctx, const Tensor &ids, int64_t vocab,
                              int64_t hidden, int64_t blockRows,
                              bool vocabParallel,
                              const std::vector<int64_t> &starts,
                              const std::vector<int64_t> &sizes,
                              const ReadRows &read) {
  const char *op = "param_runs_embedding";
  if (ids.dtype() != DType::I64 || blockRows < 1)
    fatal(std::string(op) +
          ": ids must be int64 (and a block at least a "
          "row), got " +
          ids.describe());
  VocabRange range = vocabPartOf(ctx, vocab, vocabParallel, starts, sizes, op);
  int64_t n = ids.numel();
  const int64_t *id = ids.i64();
  requireIdsIn(ids, range.vocab);
  std::vector<int64_t> shape = ids.shape();
  shape.push_back(hidden);
  // Ids outside this rank's rows (vocabulary-parallel) give zero rows.
  Tensor out(DType::F32, shape);
  blockRows = std::min(blockRows, std::max<int64_t>(vocab, 1));
  std::vector<float> block(static_cast<size_t>(blockRows * hidden));
  for (int64_t first = 0; first < vocab; first += blockRows) {
    int64_t rows = std::min(blockRows, vocab - first);
    int64_t valid = std::clamp<int64_t>(range.rows - first, 0, rows);
    read(first, rows, block.data());
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      int64_t row = id[i] - range.start - first;
      if (row >= 0 && row < valid)
        std::copy_n(block.data() + row * hidden, hidden,
                    out.f32() + i * hidden);
    }
  }
  return out;
}

Tensor cpu::embedding_vocab_parallel(Context &ctx, const Tensor &ids,
                                     const Tensor &table,
                                     std::vector<int64_t> starts,
                                     std::vector<int64_t> sizes) {
  if (ids.dtype() != DType::I64 || table.rank() != 2 ||
      table.dtype() == DType::I64 || table.onGpu())
    fatal("embedding_vocab_parallel: ids must be int64 and the table a 2-D "
          "float tensor, got " +
          ids.describe() + " and " + table.describe());
  int64_t hidden = table.dim(1), n = ids.numel();
  VocabRange range =
      vocabRangeOf(ctx.tp().rank(), ctx.tp().size(), table.dim(0), starts,
                   sizes, "embedding_vocab_parallel");
  int64_t start = range.start, rows = range.rows;
  std::vector<int64_t> shape = ids.shape();
  shape.push_back(hidden);
  Tensor out(table.dtype(), shape);
  const int64_t *id = ids.i64();
  requireIdsIn(ids, range.vocab);
  size_t row = hidden * dtypeSize(table.dtype());
  const auto *t = static_cast<const unsigned char *>(table.raw());
  auto *o = static_cast<unsigned char *>(out.raw());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    if (id[i] >= start && id[i] < start + rows)
      std::copy_n(t + (id[i] - start) * row, row, o + i * row);
  return out;
}

/// One row (or group) of rms_norm: row / sqrt(mean(row^2) + eps) *
/// (offset + weight), the mean's sum in double.
static void normalizeRow(const float *row, const float *weight, float offset,
                         float eps, int64_t n, float *out) {
  double sum = cpu::sumOfSquares(row, n);
  float inv = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
  cpu::scaleRow(row, inv, weight, offset, out, n);
}

Tensor cpu::rms_norm(Context &ctx, const Tensor &x, const Tensor &w, double eps,
                     double offset, int64_t group, int64_t slot) {
  bool bf16 = onHostAsBf16(x);
  if (!bf16)
    TPRT_IN_F32(x,
                cpu::rms_norm(ctx, widened(x), widened(w), eps, offset, group))
  Tensor wf = widened(w);
  requireF32(wf, "rms_norm", "the weight");
  int64_t features = x.dim(-1);
  if (group == 0)
    group = features;
  if (group <= 0 || features % group != 0 || w.numel() != group)
    fatal("rms_norm: input " + x.describe() + ", weight " + w.describe() +
          " and group " + std::to_string(group) + " do not match");
  const float *weight = wf.f32();
  float off = static_cast<float>(offset), epsilon = static_cast<float>(eps);
  auto normalize = [&](const float *in, float *o, int64_t groups) {
    for (int64_t g = 0; g < groups; ++g)
      normalizeRow(in + g * group, weight, off, epsilon, group, o + g * group);
  };
  if (bf16) {
    int64_t rows = std::max<int64_t>(1, kElementBlock / group);
    return mapBf16Blocks({&x}, rows * group,
                         [&](int64_t, int64_t count, const float *const *in,
                             float *o) { normalize(in[0], o, count / group); });
  }
  requireF32(x, "rms_norm", "the input");
  Tensor out = ctx.placed(slot, DType::F32, x.shape());
  int64_t groups = x.numel() / group;
  const float *in = x.f32();
  float *o = out.f32();
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g)
    normalize(in + g * group, o + g * group, 1);
  return out;
}

Tensors cpu::add_rms_norm(Context &ctx, const Tensor &a, const Tensor &b,
                          const Tensor &w, double eps, double offset) {
  requireSameShape(a, b, "add_rms_norm");
  bool bf16 = onHostAsBf16(a) && onHostAsBf16(b);
  // f16 (no vector loop here): the two calls it stands for.
  if (!bf16 && (a.dtype() != DType::F32 || b.dtype() != DType::F32))
    return composed::add_rms_norm(ctx, a, b, w, eps, offset);
  Tensor wf = widened(w);
  requireF32(wf, "add_rms_norm", "the weight");
  int64_t features = a.rank() ? a.dim(-1) : 0;
  if (features == 0 || wf.numel() != features)
    fatal("add_rms_norm: input " + a.describe() + " and weight " +
          w.describe() + " do not match");
  DType type = bf16 ? DType::BF16 : DType::F32;
  Tensor sum = Tensor::uninitialized(type, a.shape()),
         normed = Tensor::uninitialized(type, a.shape());
  int64_t rows = a.numel() / features;
  const float *weight = wf.f32();
  float off = static_cast<float>(offset), epsilon = static_cast<float>(eps);
#pragma omp parallel if (rows > 1)
  {
    // bf16: the rounded sum widened, and the row's norm before rounding.
    std::vector<float> scratch(bf16 ? 2 * features : 0);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t at = r * features;
      if (!bf16) {
        const float *x = a.f32() + at, *y = b.f32() + at;
        float *s = sum.f32() + at;
#pragma omp simd
        for (int64_t i = 0; i < features; ++i)
          s[i] = x[i] + y[i];
        normalizeRow(s, weight, off, epsilon, features, normed.f32() + at);
        continue;
      }
      auto in = [at](const Tensor &t) {
        return static_cast<const uint16_t *>(t.raw()) + at;
      };
      auto out = [at](Tensor &t) {
        return static_cast<uint16_t *>(t.raw()) + at;
      };
      float *s = scratch.data(), *o = s + features;
      cpu::addBf16(in(a), in(b), out(sum), features);
      cpu::widenBf16(in(sum), s, features);
      normalizeRow(s, weight, off, epsilon, features, o);
      cpu::narrowToBf16(o, out(normed), features);
    }
  }
  return {sum, normed};
}

Tensor cpu::rotary(Context &ctx, const Tensor &x, int64_t headDim,
                   int64_t rotaryDim, double theta, bool interleaved,
                   int64_t ropeType, double factor, double lowFreqFactor,
                   double highFreqFactor, int64_t originalMaxPositions,
                   double betaFast, double betaSlow, bool truncate,
                   double attentionFactor, bool transpose,
                   std::vector<double> shortFactor,
                   std::vector<double> longFactor, int64_t slot) {
  if (!onHostAsBf16(x))
    TPRT_IN_F32(x, cpu::rotary(ctx, widened(x), headDim, rotaryDim, theta,
                               interleaved, ropeType, factor, lowFreqFactor,
                               highFreqFactor, originalMaxPositions, betaFast,
                               betaSlow, truncate, attentionFactor, transpose,
                               shortFactor, longFactor))
  if (!x.defined() || (x.dtype() != DType::F32 && !onHostAsBf16(x)))
    requireF32(x, "rotary", "the input");
  RotaryPlan plan = planRotary(
      ctx, x, headDim, rotaryDim, theta, ropeType, factor, lowFreqFactor,
      highFreqFactor, originalMaxPositions, betaFast, betaSlow, truncate,
      attentionFactor, transpose, shortFactor, longFactor);
  int64_t batch = x.dim(0), seq = x.dim(1), heads = x.dim(2) / headDim,
          half = plan.rotaryDim / 2;
  const std::vector<float> &cosT = plan.tables->cosT, &sinT = plan.tables->sinT;
  // Rows of [B * S, H * headDim] from `first` on, in to o.
  int64_t width = heads * headDim;
  auto rotate = [&](const float *in, float *o, int64_t first, int64_t rows) {
    std::copy_n(in, rows * width, o);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t p = (first + r) % seq;
      for (int64_t h = 0; h < heads; ++h) {
        int64_t base = r * width + h * headDim;
        for (int64_t i = 0; i < half; ++i) {
          int64_t i1 = interleaved ? 2 * i : i;
          int64_t i2 = interleaved ? 2 * i + 1 : i + half;
          float c = cosT[p * half + i], s = sinT[p * half + i];
          float x1 = in[base + i1], x2 = in[base + i2];
          o[base + i1] = x1 * c - x2 * s;
          o[base + i2] = x2 * c + x1 * s;
        }
      }
    }
  };
  if (onHostAsBf16(x)) {
    int64_t rows = std::max<int64_t>(1, kElementBlock / width);
    return mapBf16Blocks(
        {&x}, rows * width,
        [&](int64_t begin, int64_t count, const float *const *in, float *o) {
          rotate(in[0], o, begin / width, count / width);
        });
  }
  requireF32(x, "rotary", "the input");
  Tensor out = ctx.placed(slot, DType::F32, x.shape());
  const float *in = x.f32();
  float *o = out.f32();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < batch * seq; ++row)
    rotate(in + row * width, o + row * width, row, 1);
  return out;
}

/// Attention of f32 q, k and v into `out` (q's shape, f32) and, when not
/// null, each query's log-sum-exp into `lse` ([batch, sq, heads]; +inf for
/// a query that sees no key).
static void attendAll(const Tensor &q, const Tensor &k, const Tensor &v,
                      const Tensor &keyMask, int64_t heads, int64_t kvHeads,
                      int64_t headDim, double scale, bool causal,
                      int64_t window, double softcap, float *o, float *lse) {
  AttentionShape shape(q, k, v, keyMask, heads, kvHeads, headDim, "attention");
  int64_t batch = shape.batch, sq = shape.sq, skv = shape.skv,
          group = shape.group, queryOffset = shape.queryOffset;
  const int64_t *mask = shape.mask;
  const float *qd = q.f32(), *kd = k.f32(), *vd = v.f32();
  float fscale = static_cast<float>(scale), cap = static_cast<float>(softcap);
  int64_t qStride = heads * headDim, kvStride = kvHeads * headDim;
  AttentionMasking masking{causal, window, cap, mask, skv};
  // Per (batch, head, block of queries), tiled over keys: a thread holds
  // one tile of scores, never a [sq, skv] matrix.
  int64_t queryBlocks = (sq + kAttentionQueryBlock - 1) / kAttentionQueryBlock;
#pragma omp parallel
  {
    std::vector<float> tile(kAttentionQueryBlock * kAttentionKeyBlock),
        acc(kAttentionQueryBlock * headDim), rowMax(kAttentionQueryBlock),
        rowSum(kAttentionQueryBlock);
#pragma omp for collapse(3) schedule(static)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t qb = 0; qb < queryBlocks; ++qb) {
          int64_t kvh = h / group, i0 = qb * kAttentionQueryBlock,
                  rows = std::min(kAttentionQueryBlock, sq - i0);
          masking.attendQueryBlock(
              qd + (b * sq + i0) * qStride + h * headDim, qStride,
              kd + b * skv * kvStride + kvh * headDim,
              vd + b * skv * kvStride + kvh * headDim, kvStride, rows, headDim,
              fscale, b, i0 + queryOffset, tile.data(), acc.data(),
              rowMax.data(), rowSum.data());
          // A query that sees no key gets zeros.
          for (int64_t i = 0; i < rows; ++i) {
            float inv = rowSum[i] > 0 ? 1.0f / rowSum[i] : 0.0f;
            cpu::scaleTo(acc.data() + i * headDim, inv,
                         o + (b * sq + i0 + i) * qStride + h * headDim,
                         headDim);
            if (lse)
              lse[(b * sq + i0 + i) * heads + h] =
                  rowSum[i] > 0 ? rowMax[i] + std::log(rowSum[i])
                                : std::numeric_limits<float>::infinity();
          }
        }
  }
}

Tensor cpu::attention(Context &ctx, const Tensor &q, const Tensor &k,
                      const Tensor &v, const Tensor &keyMask, int64_t heads,
                      int64_t kvHeads, int64_t headDim, double scale,
                      bool causal, int64_t window, double softcap,
                      int64_t slot) {
  TPRT_IN_F32(q, cpu::attention(ctx, widened(q), widened(k), widened(v),
                                keyMask, heads, kvHeads, headDim, scale, causal,
                                window, softcap, slot))
  requireF32(q, "attention", "q");
  Tensor out = ctx.placed(slot, DType::F32, q.shape());
  attendAll(q, k, v, keyMask, heads, kvHeads, headDim, scale, causal, window,
            softcap, out.f32(), nullptr);
  return out;
}

Tensors cpu::attention_lse(Context &, const Tensor &q, const Tensor &k,
                           const Tensor &v, const Tensor &keyMask,
                           int64_t heads, int64_t kvHeads, int64_t headDim,
                           double scale, bool causal, int64_t window,
                           double softcap) {
  // A reduced type's output is rounded once; the statistics stay f32.
  DType type = reducedType(q);
  Tensor qf = widened(q), kf = widened(k), vf = widened(v);
  requireF32(qf, "attention_lse", "q");
  int64_t batch = qf.rank() == 3 ? qf.dim(0) : 0,
          sq = qf.rank() == 3 ? qf.dim(1) : 0;
  Tensor out(DType::F32, qf.shape()), lse(DType::F32, {batch, sq, heads});
  attendAll(qf, kf, vf, keyMask, heads, kvHeads, headDim, scale, causal, window,
            softcap, out.f32(), lse.f32());
  return {narrowed(out, type), lse};
}

/// An activation over all of `x`, vectorized (Activation.h); bf16 in
/// blocks.
static Tensor activationOf(Context &ctx, const Tensor &x, cpu::Activation f,
                           const char *op, int64_t slot = -1) {
  if (onHostAsBf16(x))
    return mapBf16Blocks(
        {&x}, kElementBlock,
        [f](int64_t, int64_t count, const float *const *in, float *out) {
          cpu::activation(f, in[0], out, count);
        });
  requireF32(x, op, "the input");
  Tensor out = ctx.placed(slot, DType::F32, x.shape());
  cpu::activation(f, x.f32(), out.f32(), x.numel());
  return out;
}

Tensor cpu::silu(Context &ctx, const Tensor &x, int64_t slot) {
  if (!onHostAsBf16(x))
    TPRT_IN_F32(x, cpu::silu(ctx, widened(x)))
  return activationOf(ctx, x, cpu::Activation::Silu, "silu", slot);
}

Tensor cpu::gelu(Context &ctx, const Tensor &x, bool tanhApproximation,
                 int64_t slot) {
  if (!onHostAsBf16(x))
    TPRT_IN_F32(x, cpu::gelu(ctx, widened(x), tanhApproximation))
  return activationOf(ctx, x,
                      tanhApproximation ? cpu::Activation::GeluTanh
                                        : cpu::Activation::Gelu,
                      "gelu", slot);
}

Tensor cpu::relu_squared(Context &ctx, const Tensor &x, int64_t slot) {
  return unaryMap(
      x, "relu_squared", [](float v) { return v > 0 ? v * v : 0.0f; }, &ctx,
      slot);
}

/// A vectorized loop (Vector.h, built per ISA) over two host tensors of one
/// shape whose elements are T (uint16_t: bf16, float: f32).
template <typename T>
static Tensor
sameShapeElementwise(Context &ctx, const Tensor &a, const Tensor &b,
                     void (*loop)(const T *, const T *, T *, int64_t),
                     int64_t slot) {
  Tensor out = ctx.placed(slot, a.dtype(), a.shape());
  const auto *x = static_cast<const T *>(a.raw()),
             *y = static_cast<const T *>(b.raw());
  auto *o = static_cast<T *>(out.raw());
  cpu::parallelBlocks(a.numel(), kElementBlock,
                      [&](int64_t begin, int64_t count) {
                        loop(x + begin, y + begin, o + begin, count);
                      });
  return out;
}

Tensor cpu::add(Context &ctx, const Tensor &a, const Tensor &b, int64_t slot) {
  if (onHostAsBf16(a) && onHostAsBf16(b) && a.shape() == b.shape())
    return sameShapeElementwise(ctx, a, b, cpu::addBf16, slot);
  return binaryMap(
      a, b, "add", [](float x, float y) { return x + y; }, &ctx, slot);
}

Tensor cpu::mul(Context &ctx, const Tensor &a, const Tensor &b, int64_t slot) {
  if (onHostAsBf16(a) && onHostAsBf16(b) && a.shape() == b.shape())
    return sameShapeElementwise(ctx, a, b, cpu::mulBf16, slot);
  if (a.dtype() == DType::F32 && b.dtype() == DType::F32 &&
      a.shape() == b.shape()) // binaryMap's loop is SSE2's
    return sameShapeElementwise(ctx, a, b, cpu::mulTo, slot);
  return binaryMap(
      a, b, "mul", [](float x, float y) { return x * y; }, &ctx, slot);
}

Tensor cpu::scale(Context &ctx, const Tensor &x, double factor, int64_t slot) {
  float f = static_cast<float>(factor);
  return unaryMap(
      x, "scale", [f](float v) { return v * f; }, &ctx, slot);
}

Tensor cpu::softcap(Context &ctx, const Tensor &x, double cap, int64_t slot) {
  float c = static_cast<float>(cap);
  return unaryMap(
      x, "softcap", [c](float v) { return c * std::tanh(v / c); }, &ctx, slot);
}

Tensor cpu::feature_slice(Context &ctx, const Tensor &x, int64_t offset,
                          int64_t size, int64_t slot) {
  int64_t width = x.rank() ? x.dim(-1) : 0;
  int64_t rows = requireFeatureRange(x, offset, size, width, "feature_slice");
  std::vector<int64_t> shape = x.shape();
  shape.back() = size;
  Tensor out = resultTensor(&ctx, slot, x.dtype(), shape);
  size_t element = dtypeSize(x.dtype());
  copyByteRuns(out.raw(), size * element,
               static_cast<const unsigned char *>(x.raw()) + offset * element,
               width * element, size * element, rows);
  return out;
}

} // namespace tprt
