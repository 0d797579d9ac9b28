//===- KernelUtils.h - what the CPU kernels share ---------------*- C++ -*-===//
//
// The OpenMP elementwise loops of the forward (kernels.cpp) and backward
// (backward.cpp) kernels, the CPU attention's tiles and masking; the
// operand checks both backends apply are common/Checks.h's.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_KERNELUTILS_H
#define TPRT_CPU_KERNELUTILS_H

#include "Activation.h"
#include "Bf16.h"
#include "Gemm.h"
#include "Vector.h"
#include "common/Attention.h"
#include "common/Checks.h"
#include "tprt/tprt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace tprt {

/// The elementwise loops of a bf16 program read and write bf16 directly
/// (Bf16.h) instead of converting whole tensors.
inline bool onHostAsBf16(const Tensor &t) {
  return t.defined() && t.dtype() == DType::BF16 && !t.onGpu();
}

/// The result of a kernel: in its activation slot when there is a context
/// (Context::placed), else allocated.
inline Tensor resultTensor(Context *ctx, int64_t slot, DType dtype,
                           std::vector<int64_t> shape) {
  return ctx ? ctx->placed(slot, dtype, std::move(shape))
             : Tensor::uninitialized(dtype, std::move(shape));
}

/// fn over every element, in f32; a bf16 input gives a bf16 output (f16
/// ones go through f32 copies). The result goes in `slot` of `ctx`'s
/// activation plan, when given.
template <typename Fn>
Tensor unaryMap(const Tensor &x, const char *op, Fn fn, Context *ctx = nullptr,
                int64_t slot = -1) {
  if (onHostAsBf16(x)) {
    Tensor out = resultTensor(ctx, slot, DType::BF16, x.shape());
    const auto *in = static_cast<const uint16_t *>(x.raw());
    auto *o = static_cast<uint16_t *>(out.raw());
    int64_t n = x.numel();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i)
      o[i] = bf16Store(fn(bf16Load(in[i])));
    return out;
  }
  TPRT_IN_F32(x, unaryMap(widened(x), op, fn))
  requireF32(x, op, "the input");
  Tensor out = resultTensor(ctx, slot, DType::F32, x.shape());
  const float *in = x.f32();
  float *o = out.f32();
  int64_t n = x.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    o[i] = fn(in[i]);
  return out;
}

template <typename Fn>
Tensor binaryMap(const Tensor &a, const Tensor &b, const char *op, Fn fn,
                 Context *ctx = nullptr, int64_t slot = -1) {
  if (onHostAsBf16(a) && onHostAsBf16(b)) {
    requireSameShape(a, b, op);
    Tensor out = resultTensor(ctx, slot, DType::BF16, a.shape());
    const auto *x = static_cast<const uint16_t *>(a.raw()),
               *y = static_cast<const uint16_t *>(b.raw());
    auto *o = static_cast<uint16_t *>(out.raw());
    int64_t n = a.numel();
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i)
      o[i] = bf16Store(fn(bf16Load(x[i]), bf16Load(y[i])));
    return out;
  }
  TPRT_IN_F32(reducedType(a, b), binaryMap(widened(a), widened(b), op, fn))
  requireF32(a, op, "the left operand");
  requireF32(b, op, "the right operand");
  requireSameShape(a, b, op);
  Tensor out = resultTensor(ctx, slot, DType::F32, a.shape());
  const float *x = a.f32(), *y = b.f32();
  float *o = out.f32();
  int64_t n = a.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    o[i] = fn(x[i], y[i]);
  return out;
}

/// An f32 kernel over host bf16 tensors of one shape, `block` elements at a
/// time (whole rows for a row-wise kernel): each block of every input is
/// widened into the thread's f32 scratch, `fn(begin, count, in, out)`
/// computes the block's f32 result into `out`, and that is rounded into the
/// bf16 result. The same values as the kernel on whole widened tensors,
/// without writing and reading their f32 copies (whole-tensor conversions
/// took 6% of the medium Llama's bf16 training step, perf).
template <typename Fn>
Tensor mapBf16Blocks(std::initializer_list<const Tensor *> inputs,
                     int64_t block, const Fn &fn) {
  const Tensor &first = **inputs.begin();
  std::vector<const uint16_t *> src;
  for (const Tensor *t : inputs)
    src.push_back(static_cast<const uint16_t *>(t->raw()));
  Tensor out = Tensor::uninitialized(DType::BF16, first.shape());
  auto *dst = static_cast<uint16_t *>(out.raw());
  int64_t n = first.numel(), inputCount = static_cast<int64_t>(src.size());
#pragma omp parallel if (n > block)
  {
    int64_t stride = std::min(block, n);
    std::vector<float> scratch((inputCount + 1) * stride);
    std::vector<const float *> in(inputCount);
#pragma omp for schedule(static)
    for (int64_t begin = 0; begin < n; begin += block) {
      int64_t count = std::min(block, n - begin);
      for (int64_t k = 0; k < inputCount; ++k) {
        float *f32 = scratch.data() + k * stride;
        cpu::widenBf16(src[k] + begin, f32, count);
        in[k] = f32;
      }
      float *result = scratch.data() + inputCount * stride;
      fn(begin, count, in.data(), result);
      cpu::narrowToBf16(result, dst + begin, count);
    }
  }
  return out;
}

/// Elements per block of the elementwise loops: 64 KiB of f32.
constexpr int64_t kElementBlock = 16384;

/// `rows` runs of `run` bytes, `srcPitch` and `dstPitch` bytes apart, on
/// the host (the feature slices and their gradients, any element type).
inline void copyByteRuns(void *dst, size_t dstPitch, const void *src,
                         size_t srcPitch, size_t run, int64_t rows) {
  auto *d = static_cast<unsigned char *>(dst);
  const auto *s = static_cast<const unsigned char *>(src);
  for (int64_t r = 0; run && r < rows; ++r)
    std::memcpy(d + r * dstPitch, s + r * srcPitch, run);
}

/// The CPU attention's tiles: queries per block (a unit of parallel work)
/// and keys per tile of scores (one [query block, key tile] of floats per
/// thread).
constexpr int64_t kAttentionQueryBlock = 64, kAttentionKeyBlock = 128;

/// What tp.attention does to tiles of `scale * q k^T` scores between the
/// two products: soft-capping, the causal, window and key masks, and the
/// softmax, online (forward) or from each row's log-sum-exp (backward). A
/// query that sees no key gets a row of zeros.
struct AttentionMasking {
  bool causal;
  int64_t window;
  float cap;
  const int64_t *keyMask; // [batch, skv], or null
  int64_t skv;

  /// Whether the query at key position `pos` of batch row `b` sees key
  /// `key` (the GPU kernel's rule, and the key mask).
  bool sees(int64_t b, int64_t pos, int64_t key) const {
    return attentionVisible(pos, key, causal, window) &&
           (!keyMask || keyMask[b * skv + key] != 0);
  }

  /// A score soft-capped (cap tanh(s / cap); the tanh kept in `tanh` when
  /// given, for the backward), or as it is without a cap.
  float capped(float s, float *tanh = nullptr) const {
    if (cap <= 0)
      return s;
    float t = std::tanh(s / cap);
    if (tanh)
      *tanh = t;
    return cap * t;
  }

  /// Row `i` of a [rows, cols] tile of scores (queries at positions
  /// firstPos.., keys j0..) soft-capped (each tanh kept in `tanhs` when
  /// given), -inf where the query does not see the key. Returns the
  /// columns [lo, hi) outside which the row is all -inf.
  KeyRange maskRow(float *row, int64_t cols, int64_t b, int64_t pos, int64_t j0,
                   float *tanhs) const {
    const float ninf = -std::numeric_limits<float>::infinity();
    KeyRange keys = attentionVisibleKeys(pos, skv, causal, window);
    int64_t lo = std::clamp<int64_t>(keys.begin - j0, 0, cols),
            hi = std::clamp<int64_t>(keys.end - j0, lo, cols);
    std::fill(row, row + lo, ninf);
    std::fill(row + hi, row + cols, ninf);
    if (cap > 0)
      for (int64_t j = lo; j < hi; ++j)
        row[j] = capped(row[j], tanhs ? tanhs + j : nullptr);
    if (keyMask)
      for (int64_t j = lo; j < hi; ++j)
        if (keyMask[b * skv + j0 + j] == 0)
          row[j] = ninf;
    return {lo, hi};
  }

  /// One step of the online softmax over a [rows, cols] tile of scores
  /// (queries at positions firstPos.., keys j0..): soft-capping and masks, then
  /// the tile becomes exp(score - running maximum) (0 where masked), and each
  /// row's running maximum, sum and [rows, headDim] accumulator are rescaled to
  /// the new maximum. The caller adds tile V to the accumulator and divides by
  /// the sum at the end.
  void onlineSoftmax(float *tile, int64_t rows, int64_t cols, int64_t b,
                     int64_t firstPos, int64_t j0, float *rowMax, float *rowSum,
                     float *acc, int64_t headDim) const {
    const float ninf = -std::numeric_limits<float>::infinity();
    float correction[kAttentionQueryBlock];
    for (int64_t i = 0; i < rows; ++i) {
      float *row = tile + i * cols;
      KeyRange seen = maskRow(row, cols, b, firstPos + i, j0, nullptr);
      float best = std::max(
          rowMax[i], cpu::maxOf(row + seen.begin, seen.end - seen.begin));
      if (best == ninf) { // nothing visible yet: the row stays empty
        correction[i] = 1.0f;
        continue;
      }
      cpu::subtractInPlace(row, best, cols); // -inf stays -inf, whose exp is 0
      correction[i] = std::exp(rowMax[i] - best); // 0 for the first keys
      rowMax[i] = best;
    }
    cpu::activation(cpu::Activation::Exp, tile, tile, rows * cols);
    for (int64_t i = 0; i < rows; ++i) {
      float total = static_cast<float>(cpu::sumOf(tile + i * cols, cols));
      rowSum[i] = rowSum[i] * correction[i] + total;
      if (correction[i] != 1.0f)
        cpu::scaleInPlace(acc + i * headDim, correction[i], headDim);
    }
  }

  /// The probabilities of a [rows, cols] tile of `scale * q k^T` scores
  /// (queries at positions firstPos.., keys j0..) from each row's
  /// log-sum-exp over all its keys (the backward's recomputation):
  /// soft-capping (each tanh kept in `tanhs` when given) and masks, then
  /// exp(score - lse), 0 where masked.
  void tileProbabilities(float *tile, int64_t rows, int64_t cols, int64_t b,
                         int64_t firstPos, int64_t j0, const float *lse,
                         float *tanhs) const {
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < rows; ++i) {
      float *row = tile + i * cols;
      if (lse[i] == ninf) { // the row sees no key at all
        std::fill(row, row + cols, ninf);
        continue;
      }
      maskRow(row, cols, b, firstPos + i, j0,
              tanhs ? tanhs + i * cols : nullptr);
      cpu::subtractInPlace(row, lse[i], cols); // exp(-inf) is 0
    }
    cpu::activation(cpu::Activation::Exp, tile, tile, rows * cols);
  }

  /// One head's attention for a block of `rows` queries at positions
  /// firstPos.. (`qh`: the block's first query) over the key tiles the block
  /// can see (attentionKeyRange, the GPU kernel's rule): two products
  /// per tile on the packed layout (leading dimensions step over the other
  /// heads) with the online softmax between them. Leaves the unnormalized
  /// output in acc [rows, headDim] and each row's running maximum and sum
  /// (the output is acc / rowSum; rowSum 0: the row sees no key). `tile`
  /// holds kAttentionQueryBlock x kAttentionKeyBlock floats of scratch.
  void attendQueryBlock(const float *qh, int64_t qStride, const float *kh,
                        const float *vh, int64_t kvStride, int64_t rows,
                        int64_t headDim, float scale, int64_t b,
                        int64_t firstPos, float *tile, float *acc,
                        float *rowMax, float *rowSum) const {
    KeyRange range =
        attentionKeyRange(firstPos, firstPos + rows - 1, skv, causal, window);
    std::fill_n(rowMax, rows, -std::numeric_limits<float>::infinity());
    std::fill_n(rowSum, rows, 0.0f);
    std::fill_n(acc, rows * headDim, 0.0f);
    for (int64_t j0 = range.begin; j0 < range.end; j0 += kAttentionKeyBlock) {
      int64_t cols = std::min(kAttentionKeyBlock, range.end - j0);
      cpu::sgemm(false, true, rows, cols, headDim, scale, qh, qStride,
                 kh + j0 * kvStride, kvStride, 0.0f, tile, cols);
      onlineSoftmax(tile, rows, cols, b, firstPos, j0, rowMax, rowSum, acc,
                    headDim);
      cpu::sgemm(false, false, rows, headDim, cols, 1.0f, tile, cols,
                 vh + j0 * kvStride, kvStride, 1.0f, acc, headDim);
    }
  }
};

} // namespace tprt

#endif // TPRT_CPU_KERNELUTILS_H
