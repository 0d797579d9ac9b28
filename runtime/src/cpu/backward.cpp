//===- backward.cpp - CPU kernels of the backward ops ---------------------===//
//
// The VJPs of the forward kernels (kernels.cpp), f32: matrix products
// through Gemm.h, the rest OpenMP loops over independent rows, heads or
// features (never two threads adding into one element). The GPU's are in
// src/cuda/backward.cu.
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
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace tprt {

Tensor cpu::sum_leading(Context &ctx, const Tensor &x) {
  requireF32(x, "sum_leading", "the input");
  int64_t n = x.dim(-1), rows = x.numel() / std::max<int64_t>(n, 1);
  Tensor out(DType::F32, {n});
  const float *in = x.f32();
  float *o = out.f32();
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < n; ++j) {
    double sum = 0;
    for (int64_t r = 0; r < rows; ++r)
      sum += in[r * n + j];
    o[j] = static_cast<float>(sum);
  }
  return out;
}

Tensor cpu::feature_slice_grad(Context &ctx, const Tensor &dy, int64_t offset,
                               int64_t width) {
  int64_t size = dy.rank() ? dy.dim(-1) : 0;
  int64_t rows =
      requireFeatureRange(dy, offset, size, width, "feature_slice_grad");
  std::vector<int64_t> shape = dy.shape();
  shape.back() = width;
  Tensor out(dy.dtype(), shape);
  size_t element = dtypeSize(dy.dtype());
  copyByteRuns(static_cast<unsigned char *>(out.raw()) + offset * element,
               width * element, dy.raw(), size * element, size * element, rows);
  return out;
}

namespace {

/// Adds f32 `dy` row i into row ids[i] - start of `out` ([rows, hidden]),
/// for the ids in [start, start + rows) other than `paddingIdx`.
void scatterAddEmbeddingRows(const Tensor &ids, const Tensor &dy, float *out,
                             int64_t rows, int64_t hidden, int64_t start,
                             int64_t paddingIdx, const char *name) {
  requireF32(dy, name, "dy");
  if (ids.dtype() != DType::I64 || dy.numel() != ids.numel() * hidden)
    fatal(std::string(name) + ": ids " + ids.describe() + " and dy " +
          dy.describe() + " do not match a table of " + std::to_string(hidden) +
          " features");
  int64_t n = ids.numel();
  const int64_t *id = ids.i64();
  const float *d = dy.f32();
  // Threads own features: a token repeated in the batch adds into one row.
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < hidden; ++h)
    for (int64_t i = 0; i < n; ++i)
      if (id[i] >= start && id[i] < start + rows && id[i] != paddingIdx)
        out[(id[i] - start) * hidden + h] += d[i * hidden + h];
}

} // namespace

Tensor cpu::embedding_grad(Context &ctx, const Tensor &ids, const Tensor &dy,
                           const Tensor &table, bool vocabParallel,
                           int64_t paddingIdx, std::vector<int64_t> vocabStarts,
                           std::vector<int64_t> vocabSizes) {
  // Only the table's shape is read; its gradient is of its type.
  if (reducedType(dy) != DType::F32)
    return cpu::embedding_grad(ctx, ids, widened(dy), table, vocabParallel,
                               paddingIdx, std::move(vocabStarts),
                               std::move(vocabSizes));
  if (table.rank() != 2)
    fatal("embedding_grad: the table " + table.describe() + " is not 2-D");
  VocabRange range = vocabPartOf(ctx, table.dim(0), vocabParallel, vocabStarts,
                                 vocabSizes, "embedding_grad");
  Tensor out(DType::F32, table.shape());
  scatterAddEmbeddingRows(ids, dy, out.f32(), range.rows, table.dim(1),
                          range.start, paddingIdx, "embedding_grad");
  return narrowed(out, reducedType(table));
}

Tensors cpu::rms_norm_grad(Context &ctx, const Tensor &x, const Tensor &w,
                           const Tensor &dy, double eps, double offset,
                           int64_t group) {
  // bf16 rows are widened a row at a time (mapBf16Blocks' reason).
  bool bf16 = onHostAsBf16(x) && onHostAsBf16(dy);
  if (!bf16 && reducedType(x, dy) != DType::F32)
    return narrowedLike(cpu::rms_norm_grad(ctx, widened(x), widened(w),
                                           widened(dy), eps, offset, group),
                        {&x, &w});
  if (!bf16) {
    requireF32(x, "rms_norm_grad", "x");
    requireF32(dy, "rms_norm_grad", "dy");
  }
  Tensor wf = widened(w);
  requireF32(wf, "rms_norm_grad", "the weight");
  requireSameShape(x, dy, "rms_norm_grad");
  int64_t features = x.dim(-1);
  if (group == 0)
    group = features;
  if (group <= 0 || features % group != 0 || w.numel() != group)
    fatal("rms_norm_grad: input " + x.describe() + ", weight " + w.describe() +
          " and group " + std::to_string(group) + " do not match");
  int64_t groups = x.numel() / group;
  // Rows in blocks fixed by the shape alone, not the thread count: the
  // weight's gradient sums each block's rows, then the blocks in order, so
  // it is the same bits on any number of threads.
  int64_t blockRows = std::max<int64_t>(8, (groups + 63) / 64);
  int64_t blocks = (groups + blockRows - 1) / blockRows;
  std::vector<double> partial(blocks * group, 0.0);
  Tensor dx = Tensor::uninitialized(bf16 ? DType::BF16 : DType::F32, x.shape());
  const float *weight = wf.f32();
  float off = static_cast<float>(offset), epsilon = static_cast<float>(eps);
#pragma omp parallel
  {
    std::vector<float> scratch(bf16 ? 3 * group : 0);
#pragma omp for schedule(static)
    for (int64_t block = 0; block < blocks; ++block) {
      double *sums = partial.data() + block * group;
      int64_t end = std::min(groups, (block + 1) * blockRows);
      for (int64_t g = block * blockRows; g < end; ++g) {
        int64_t at = g * group;
        if (!bf16) {
          cpu::rmsNormRowGrad(x.f32() + at, dy.f32() + at, weight, off, epsilon,
                              group, dx.f32() + at, sums);
          continue;
        }
        float *row = scratch.data(), *drow = row + group, *out = drow + group;
        cpu::widenBf16(static_cast<const uint16_t *>(x.raw()) + at, row, group);
        cpu::widenBf16(static_cast<const uint16_t *>(dy.raw()) + at, drow,
                       group);
        cpu::rmsNormRowGrad(row, drow, weight, off, epsilon, group, out, sums);
        cpu::narrowToBf16(out, static_cast<uint16_t *>(dx.raw()) + at, group);
      }
    }
  }
  Tensor dw(DType::F32, w.shape());
  float *dwp = dw.f32();
  for (int64_t i = 0; i < group; ++i) {
    double sum = 0;
    for (int64_t block = 0; block < blocks; ++block)
      sum += partial[block * group + i];
    dwp[i] = static_cast<float>(sum);
  }
  // The weight's gradient is of the weight's type.
  return {dx, narrowed(dw, reducedType(w))};
}

Tensors cpu::attention_grad(Context &ctx, const Tensor &q, const Tensor &k,
                            const Tensor &v, const Tensor &dout,
                            const Tensor &keyMask, int64_t heads,
                            int64_t kvHeads, int64_t headDim, double scale,
                            bool causal, int64_t window, double softcap,
                            const Tensor &out, const Tensor &savedLse) {
  if (reducedType(q, dout) != DType::F32 || reducedType(out) != DType::F32)
    return narrowedLike(cpu::attention_grad(ctx, widened(q), widened(k),
                                            widened(v), widened(dout), keyMask,
                                            heads, kvHeads, headDim, scale,
                                            causal, window, softcap,
                                            widened(out), savedLse),
                        {&q, &k, &v});
  AttentionShape shape(q, k, v, keyMask, heads, kvHeads, headDim,
                       "attention_grad");
  requireF32(dout, "attention_grad", "dout");
  requireSameShape(q, dout, "attention_grad");
  // The forward's output and log-sum-exp (attention_lse), when given, stand
  // for the forward the backward would otherwise run again.
  bool saved = savedAttentionGiven(q, heads, out, savedLse, "attention_grad");
  if (saved) {
    requireF32(out, "attention_grad", "the forward's output");
    requireF32(savedLse, "attention_grad", "the log-sum-exp");
  }
  int64_t batch = shape.batch, sq = shape.sq, skv = shape.skv,
          group = shape.group, queryOffset = shape.queryOffset;
  const int64_t *mask = shape.mask;
  Tensor dq(DType::F32, q.shape()), dk(DType::F32, k.shape()),
      dv(DType::F32, v.shape());
  const float *qd = q.f32(), *kd = k.f32(), *vd = v.f32(), *dod = dout.f32();
  float fscale = static_cast<float>(scale), cap = static_cast<float>(softcap);
  int64_t qStride = heads * headDim, kvStride = kvHeads * headDim;
  AttentionMasking masking{causal, window, cap, mask, skv};
  const float ninf = -std::numeric_limits<float>::infinity();
  int64_t queryBlocks = (sq + kAttentionQueryBlock - 1) / kAttentionQueryBlock;
  // One (batch, KV head) per iteration: the query heads of its group add
  // into the same dk and dv. Per block of queries, tiled over keys as the
  // forward: first the block's forward again (each row's log-sum-exp, and
  // delta = dout . out = rowsum(P * dP)), then per key tile P from the
  // log-sum-exp, dv += P^T dout, dP = dout v^T, dS = P (dP - delta) through
  // the cap's tanh, dq += scale dS k, dk += scale dS^T q. A thread holds
  // tiles, never a [sq, skv] matrix.
#pragma omp parallel
  {
    const int64_t tileSize = kAttentionQueryBlock * kAttentionKeyBlock;
    std::vector<float> p(tileSize), dp(tileSize), tanhs(cap > 0 ? tileSize : 0),
        acc(kAttentionQueryBlock * headDim), rowMax(kAttentionQueryBlock),
        rowSum(kAttentionQueryBlock), lse(kAttentionQueryBlock),
        delta(kAttentionQueryBlock);
#pragma omp for collapse(2) schedule(static)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t kvh = 0; kvh < kvHeads; ++kvh) {
        const float *kh = kd + b * skv * kvStride + kvh * headDim;
        const float *vh = vd + b * skv * kvStride + kvh * headDim;
        float *dkh = dk.f32() + b * skv * kvStride + kvh * headDim;
        float *dvh = dv.f32() + b * skv * kvStride + kvh * headDim;
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
          for (int64_t qb = 0; qb < queryBlocks; ++qb) {
            int64_t i0 = qb * kAttentionQueryBlock,
                    rows = std::min(kAttentionQueryBlock, sq - i0),
                    firstPos = i0 + queryOffset;
            int64_t offset = (b * sq + i0) * qStride + h * headDim;
            const float *qh = qd + offset, *doh = dod + offset;
            float *dqh = dq.f32() + offset;
            if (saved) {
              for (int64_t i = 0; i < rows; ++i) {
                // A row that sees no key (+inf) has no gradient.
                float l = savedLse.f32()[(b * sq + i0 + i) * heads + h];
                lse[i] = std::isinf(l) ? ninf : l;
                delta[i] = static_cast<float>(
                    cpu::dotOf(doh + i * qStride,
                               out.f32() + offset + i * qStride, headDim));
              }
            } else {
              masking.attendQueryBlock(
                  qh, qStride, kh, vh, kvStride, rows, headDim, fscale, b,
                  firstPos, p.data(), acc.data(), rowMax.data(), rowSum.data());
              for (int64_t i = 0; i < rows; ++i) {
                // A row that sees no key has no gradient (lse -inf: P = 0).
                lse[i] = rowSum[i] > 0 ? rowMax[i] + std::log(rowSum[i]) : ninf;
                double dot = cpu::dotOf(doh + i * qStride,
                                        acc.data() + i * headDim, headDim);
                delta[i] =
                    rowSum[i] > 0 ? static_cast<float>(dot / rowSum[i]) : 0.0f;
              }
            }
            KeyRange range = attentionKeyRange(firstPos, firstPos + rows - 1,
                                               skv, causal, window);
            for (int64_t j0 = range.begin; j0 < range.end;
                 j0 += kAttentionKeyBlock) {
              int64_t cols = std::min(kAttentionKeyBlock, range.end - j0);
              cpu::sgemm(false, true, rows, cols, headDim, fscale, qh, qStride,
                         kh + j0 * kvStride, kvStride, 0.0f, p.data(), cols);
              masking.tileProbabilities(p.data(), rows, cols, b, firstPos, j0,
                                        lse.data(),
                                        cap > 0 ? tanhs.data() : nullptr);
              cpu::sgemm(true, false, cols, headDim, rows, 1.0f, p.data(), cols,
                         doh, qStride, 1.0f, dvh + j0 * kvStride, kvStride);
              cpu::sgemm(false, true, rows, cols, headDim, 1.0f, doh, qStride,
                         vh + j0 * kvStride, kvStride, 0.0f, dp.data(), cols);
              for (int64_t i = 0; i < rows; ++i) {
                cpu::softmaxGradRow(p.data() + i * cols, delta[i],
                                    dp.data() + i * cols, cols);
                if (cap > 0) // through the cap's tanh
                  for (int64_t e = i * cols; e < (i + 1) * cols; ++e)
                    dp[e] *= 1.0f - tanhs[e] * tanhs[e];
              }
              cpu::sgemm(false, false, rows, headDim, cols, fscale, dp.data(),
                         cols, kh + j0 * kvStride, kvStride, 1.0f, dqh,
                         qStride);
              cpu::sgemm(true, false, cols, headDim, rows, fscale, dp.data(),
                         cols, qh, qStride, 1.0f, dkh + j0 * kvStride,
                         kvStride);
            }
          }
      }
  }
  return {dq, dk, dv};
}

Tensor cpu::silu_grad(Context &ctx, const Tensor &x, const Tensor &dy) {
  requireSameShape(x, dy, "silu_grad");
  // The sigmoid as a oneDNN primitive, then the product as one vector loop
  // per block (a scalar expf per element took 1 to 3% of a training step).
  if (onHostAsBf16(x) && onHostAsBf16(dy))
    return mapBf16Blocks(
        {&x, &dy}, kElementBlock,
        [](int64_t, int64_t count, const float *const *in, float *out) {
          cpu::activation(cpu::Activation::Sigmoid, in[0], out, count);
          cpu::siluGradFromSigmoid(in[0], in[1], out, count);
        });
  TPRT_IN_F32(reducedType(x, dy), cpu::silu_grad(ctx, widened(x), widened(dy)))
  requireF32(x, "silu_grad", "the input");
  requireF32(dy, "silu_grad", "the output's gradient");
  Tensor out = Tensor::uninitialized(DType::F32, x.shape());
  int64_t n = x.numel();
  cpu::activation(cpu::Activation::Sigmoid, x.f32(), out.f32(), n);
  cpu::parallelBlocks(n, 16384, [&](int64_t begin, int64_t count) {
    cpu::siluGradFromSigmoid(x.f32() + begin, dy.f32() + begin,
                             out.f32() + begin, count);
  });
  return out;
}

Tensors cpu::silu_mul_grad(Context &ctx, const Tensor &gate, const Tensor &up,
                           const Tensor &dy) {
  requireSameShape(gate, up, "silu_mul_grad");
  requireSameShape(gate, dy, "silu_mul_grad");
  bool bf16 = onHostAsBf16(gate) && onHostAsBf16(up) && onHostAsBf16(dy);
  bool f32 = gate.dtype() == DType::F32 && up.dtype() == DType::F32 &&
             dy.dtype() == DType::F32;
  // f16: the three ops it fuses (no pass saved, the same gradients).
  if (!bf16 && !f32)
    return composed::silu_mul_grad(ctx, gate, up, dy);
  DType type = bf16 ? DType::BF16 : DType::F32;
  Tensor dgate = Tensor::uninitialized(type, gate.shape()),
         dup = Tensor::uninitialized(type, gate.shape());
  int64_t n = gate.numel();
  // 16 KiB per f32 row: a block's rows (six in bf16) stay in the cache.
  constexpr int64_t kBlock = 4096;
  // Per block: the sigmoid as a oneDNN primitive, then one vector loop
  // (bf16 blocks widened on the way in and rounded on the way out).
#pragma omp parallel if (n > kBlock)
  {
    int64_t stride = std::min(kBlock, n);
    std::vector<float> scratch((bf16 ? 6 : 1) * stride);
    float *sig = scratch.data();
#pragma omp for schedule(static)
    for (int64_t begin = 0; begin < n; begin += kBlock) {
      int64_t count = std::min(kBlock, n - begin);
      if (!bf16) {
        const float *g = gate.f32() + begin;
        cpu::activation(cpu::Activation::Sigmoid, g, sig, count);
        cpu::siluMulGradFromSigmoid(g, up.f32() + begin, dy.f32() + begin, sig,
                                    dgate.f32() + begin, dup.f32() + begin,
                                    count);
        continue;
      }
      float *g = sig + stride, *u = g + stride, *d = u + stride,
            *dg = d + stride, *du = dg + stride;
      auto bits = [begin](const Tensor &t) {
        return static_cast<const uint16_t *>(t.raw()) + begin;
      };
      cpu::widenBf16(bits(gate), g, count);
      cpu::widenBf16(bits(up), u, count);
      cpu::widenBf16(bits(dy), d, count);
      cpu::activation(cpu::Activation::Sigmoid, g, sig, count);
      cpu::siluMulGradFromSigmoid(g, u, d, sig, dg, du, count);
      cpu::narrowToBf16(dg, static_cast<uint16_t *>(dgate.raw()) + begin,
                        count);
      cpu::narrowToBf16(du, static_cast<uint16_t *>(dup.raw()) + begin, count);
    }
  }
  return {dgate, dup};
}

Tensor cpu::relu_squared_grad(Context &ctx, const Tensor &x, const Tensor &dy) {
  return binaryMap(x, dy, "relu_squared_grad", [](float v, float d) {
    return v > 0 ? 2.0f * v * d : 0.0f;
  });
}

Tensor cpu::gelu_grad(Context &ctx, const Tensor &x, const Tensor &dy,
                      bool tanhApproximation) {
  if (tanhApproximation)
    return binaryMap(x, dy, "gelu_grad", [](float v, float d) {
      const float k = 0.7978845608028654f; // sqrt(2 / pi)
      float t = std::tanh(k * (v + 0.044715f * v * v * v));
      return d * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * k *
                                          (1.0f + 3.0f * 0.044715f * v * v));
    });
  return binaryMap(x, dy, "gelu_grad", [](float v, float d) {
    const float invSqrt2Pi = 0.3989422804014327f;
    return d * (0.5f * (1.0f + std::erf(v * 0.7071067811865476f)) +
                v * invSqrt2Pi * std::exp(-0.5f * v * v));
  });
}

Tensor cpu::softcap_grad(Context &ctx, const Tensor &x, const Tensor &dy,
                         double cap) {
  float c = static_cast<float>(cap);
  return binaryMap(x, dy, "softcap_grad", [c](float v, float d) {
    float t = std::tanh(v / c);
    return d * (1.0f - t * t);
  });
}

Tensor cpu::replica_sum(Context &ctx, const Tensor &x,
                        std::vector<int64_t> blocks) {
  requireF32(x, "replica_sum", "the input");
  int64_t n = x.numel();
  ReplicaBlocks b = replicaBlocksOf(ctx.tp().rank(), ctx.tp().size(), blocks);
  // Each block's slot of one all-reduce: the ranks sharing it add into it.
  std::vector<float> slots(b.count * n, 0.0f);
  std::copy_n(x.f32(), n, slots.data() + b.mine * n);
  ctx.tp().allReduceSum(slots.data(), static_cast<int64_t>(slots.size()));
  Tensor out = Tensor::uninitialized(DType::F32, x.shape());
  std::copy_n(slots.data() + b.mine * n, n, out.f32());
  return out;
}

void cpu::accumulate_grad(Context &ctx, const Tensor &grad, const Tensor &param,
                          const char *fqn, int64_t splitDim, bool owned) {
  // The buffers are FP32 whatever the parameter's type: a bf16 program's
  // micro-batch gradients are summed (and later reduced) in FP32, read as
  // bf16 (no widened copy of every gradient, mapBf16Blocks' reason).
  bool bf16 = onHostAsBf16(grad);
  if (!bf16 && reducedType(grad) != DType::F32)
    return cpu::accumulate_grad(ctx, widened(grad), param, fqn, splitDim,
                                owned);
  if (!bf16)
    requireF32(grad, "accumulate_grad", "the gradient");
  if (grad.shape() != param.shape())
    fatal(std::string("accumulate_grad: the gradient of '") + fqn + "' is " +
          grad.describe() + ", the parameter " + param.describe());
  Context::GradBuffer &buffer = ctx.gradBuffer(param, fqn);
  bool first = buffer.takeFirst(splitDim, owned);
  float *acc = buffer.grad.f32();
  cpu::parallelBlocks(
      grad.numel(), kElementBlock, [&](int64_t begin, int64_t count) {
        if (bf16) {
          const auto *g = static_cast<const uint16_t *>(grad.raw()) + begin;
          if (first)
            cpu::widenBf16(g, acc + begin, count);
          else
            cpu::addWidenedBf16(g, acc + begin, count);
        } else if (first) {
          std::copy_n(grad.f32() + begin, count, acc + begin);
        } else {
          const float *g = grad.f32() + begin;
          for (int64_t i = 0; i < count; ++i)
            acc[begin + i] += g[i];
        }
      });
}

void cpu::accumulate_embedding_grad(Context &ctx, const Tensor &ids,
                                    const Tensor &dy, const Tensor &param,
                                    const char *fqn, int64_t splitDim,
                                    bool owned, bool vocabParallel,
                                    int64_t paddingIdx,
                                    std::vector<int64_t> vocabStarts,
                                    std::vector<int64_t> vocabSizes) {
  if (reducedType(dy) != DType::F32)
    return cpu::accumulate_embedding_grad(
        ctx, ids, widened(dy), param, fqn, splitDim, owned, vocabParallel,
        paddingIdx, std::move(vocabStarts), std::move(vocabSizes));
  if (param.rank() != 2)
    fatal(std::string("accumulate_embedding_grad: the parameter '") + fqn +
          "' is " + param.describe() + ", not a table");
  Context::GradBuffer &buffer = ctx.gradBuffer(param, fqn);
  float *acc = buffer.grad.f32();
  // The table's whole buffer, zeroed by all threads.
  if (buffer.takeFirst(splitDim, owned))
    cpu::parallelBlocks(buffer.grad.numel(), kElementBlock,
                        [&](int64_t begin, int64_t count) {
                          std::fill_n(acc + begin, count, 0.0f);
                        });
  VocabRange range = vocabPartOf(ctx, param.dim(0), vocabParallel, vocabStarts,
                                 vocabSizes, "accumulate_embedding_grad");
  scatterAddEmbeddingRows(ids, dy, acc, range.rows, param.dim(1), range.start,
                          paddingIdx, "accumulate_embedding_grad");
}

void cpu::streamedEmbeddingGrad(Context &ctx, const Tensor &ids,
                                const Tensor &dy, int64_t vocab, int64_t hidden,
                                int64_t blockRows, bool vocabParallel,
                                int64_t paddingIdx,
                                const std::vector<int64_t> &starts,
                                const std::vector<int64_t> &sizes,
                                const TakeRows &take) {
  const char *op = "param_runs_embedding_grad";
  if (reducedType(dy) != DType::F32)
    return streamedEmbeddingGrad(ctx, ids, widened(dy), vocab, hidden,
                                 blockRows, vocabParallel, paddingIdx, starts,
                                 sizes, take);
  if (blockRows < 1)
    fatal(std::string(op) + ": no rows per block");
  VocabRange range = vocabPartOf(ctx, vocab, vocabParallel, starts, sizes, op);
  blockRows = std::min(blockRows, std::max<int64_t>(vocab, 1));
  std::vector<float> grad(static_cast<size_t>(blockRows * hidden));
  for (int64_t first = 0; first < vocab; first += blockRows) {
    int64_t rows = std::min(blockRows, vocab - first);
    int64_t valid = std::clamp<int64_t>(range.rows - first, 0, rows);
    std::fill(grad.begin(), grad.end(), 0.0f);
    scatterAddEmbeddingRows(ids, dy, grad.data(), valid, hidden,
                            range.start + first, paddingIdx, op);
    take(first, rows, grad.data());
  }
}

} // namespace tprt
