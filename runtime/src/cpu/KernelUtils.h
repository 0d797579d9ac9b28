//===- KernelUtils.h - what the CPU kernels share ---------------*- C++ -*-===//
//
// Operand checks and the OpenMP elementwise loops of the forward
// (kernels.cpp) and backward (backward.cpp) kernels; the shape checks
// (AxisView, requireSplittable, AttentionShape) serve the CUDA kernels too.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_KERNELUTILS_H
#define TPRT_CPU_KERNELUTILS_H

#include "Activation.h"
#include "Bf16.h"
#include "Gemm.h"
#include "Vector.h"
#include "cuda/Tiling.h"
#include "tprt/tprt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace tprt {

inline void requireF32(const Tensor &t, const char *op, const char *what) {
  if (!t.defined() || t.dtype() != DType::F32)
    fatal(std::string(op) + ": " + what + " must be an f32 tensor, got " +
          (t.defined() ? t.describe() : "nothing"));
  // The CPU kernels read host memory: an op without a CUDA kernel says so
  // instead of dereferencing a device pointer.
  if (t.onGpu())
    fatal(std::string(op) + " has no CUDA kernel yet (" + what + " is " +
          t.describe() + "): run with --device cpu");
}

/// The CPU kernels compute in f32. A program compiled for bf16 or f16
/// (tpc --dtype) hands them activations of that type: such a call runs the
/// f32 kernel on widened operands and rounds its result once to the
/// activation's type (FP32 inside the op, one rounding of its output, as
/// PyTorch's reduced-precision CPU kernels do). `reducedType` is the type of
/// a reduced-precision activation, F32 for any other.
inline DType reducedType(const Tensor &x) {
  return x.defined() && (x.dtype() == DType::BF16 || x.dtype() == DType::F16)
             ? x.dtype()
             : DType::F32;
}
/// The reduced-precision type of either operand of a binary op.
inline DType reducedType(const Tensor &a, const Tensor &b) {
  DType t = reducedType(a);
  return t != DType::F32 ? t : reducedType(b);
}
inline DType reducedTypeOf(const Tensor &x) { return reducedType(x); }
inline DType reducedTypeOf(DType dtype) { return dtype; }
/// An operand as f32 (integer and absent tensors as they are).
inline Tensor widened(const Tensor &t) {
  return reducedType(t) == DType::F32 ? t : t.to(DType::F32);
}
inline Tensor narrowed(const Tensor &t, DType dtype) {
  return t.defined() && t.dtype() == DType::F32 ? t.to(dtype) : t;
}
inline Tensors narrowed(const Tensors &ts, DType dtype) {
  Tensors out;
  for (const Tensor &t : ts)
    out.push_back(narrowed(t, dtype));
  return out;
}
/// A kernel's several results each rounded to the type of the operand it
/// belongs to (a gradient is of its input's type).
inline Tensors narrowedLike(const Tensors &results,
                            std::initializer_list<const Tensor *> operands) {
  Tensors out;
  auto like = operands.begin();
  for (const Tensor &t : results) {
    DType dtype = like != operands.end() && (*like)->defined()
                      ? (*like)->dtype()
                      : DType::F32;
    out.push_back(narrowed(t, dtype == DType::I64 ? DType::F32 : dtype));
    if (like != operands.end())
      ++like;
  }
  return out;
}
/// Runs `call` (the kernel on widened operands) and rounds its result to
/// the type `dtype` (a tensor's reducedType, or a DType) when it is not f32.
#define TPRT_IN_F32(dtype, call)                                               \
  if (::tprt::DType reduced = ::tprt::reducedTypeOf(dtype);                    \
      reduced != ::tprt::DType::F32)                                           \
    return ::tprt::narrowed(call, reduced);

inline void requireSameShape(const Tensor &a, const Tensor &b, const char *op) {
  if (a.shape() != b.shape())
    fatal(std::string(op) + ": shapes differ: " + a.describe() + " vs " +
          b.describe());
}

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

/// x viewed as [outer, n, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
  AxisView(const Tensor &x, int64_t axis, const char *op) {
    if (axis < 0 || axis >= x.rank())
      fatal(std::string(op) + ": axis " + std::to_string(axis) + " of a rank-" +
            std::to_string(x.rank()) + " tensor");
    for (int64_t d = 0; d < x.rank(); ++d)
      (d < axis ? outer : d == axis ? n : inner) *= x.dim(d);
  }
};

/// Features [offset, offset + size) of `x`'s rows (tp.feature_slice and
/// its gradient): the number of rows; a range past the row is fatal.
inline int64_t requireFeatureRange(const Tensor &x, int64_t offset,
                                   int64_t size, int64_t width,
                                   const char *op) {
  if (x.rank() < 1 || offset < 0 || size < 0 || offset > width - size)
    fatal(std::string(op) + ": features [" + std::to_string(offset) + ", " +
          std::to_string(offset + size) + ") of rows of " +
          std::to_string(width) + " (" + x.describe() + ")");
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.rank(); ++d)
    rows *= x.dim(d);
  return rows;
}

/// `rows` runs of `run` bytes, `srcPitch` and `dstPitch` bytes apart, on
/// the host (the feature slices and their gradients, any element type).
inline void copyByteRuns(void *dst, size_t dstPitch, const void *src,
                         size_t srcPitch, size_t run, int64_t rows) {
  auto *d = static_cast<unsigned char *>(dst);
  const auto *s = static_cast<const unsigned char *>(src);
  for (int64_t r = 0; run && r < rows; ++r)
    std::memcpy(d + r * dstPitch, s + r * srcPitch, run);
}

/// What a reduce-scatter's indivisible dimension usually means.
constexpr const char *kSequenceHint =
    " (with sequence parallelism the sequence length must be a multiple of "
    "tp)";

/// Dimension `axis` of `x` splits into one block per rank; `hint` ends the
/// message when it does not.
inline void requireSplittable(const Tensor &x, const AxisView &v, int64_t axis,
                              int64_t ranks, const char *op,
                              const char *hint = "") {
  if (v.n % ranks)
    fatal(std::string(op) + ": dimension " + std::to_string(axis) + " of " +
          x.describe() + " is not divisible by " + std::to_string(ranks) +
          " ranks" + hint);
}

/// A key mask's elements after checking it is int64 [batch, seq] on
/// `device` (`seqName` names the sequence in the message); null when it is
/// undefined (no mask).
inline const int64_t *checkedKeyMask(const Tensor &keyMask, int64_t batch,
                                     int64_t seq, Device device, const char *op,
                                     const char *seqName) {
  if (!keyMask.defined())
    return nullptr;
  if (keyMask.dtype() != DType::I64 || keyMask.device() != device ||
      keyMask.rank() != 2 || keyMask.dim(0) != batch || keyMask.dim(1) != seq)
    fatal(std::string(op) + ": key mask " + keyMask.describe() +
          " is not int64 [batch, " + seqName + "]");
  return keyMask.i64();
}

/// The shapes of an attention call (forward or backward), checked: q
/// [B, Sq, heads * headDim], k and v [B, Skv, kvHeads * headDim], the key
/// mask int64 [B, Skv] or undefined, all on `device`. Queries are the last
/// Sq positions of the keys (Sq == Skv without a cache).
struct AttentionShape {
  int64_t batch, sq, skv, group, queryOffset;
  const int64_t *mask = nullptr;

  AttentionShape(const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor &keyMask, int64_t heads, int64_t kvHeads,
                 int64_t headDim, const char *op, Device device = Device::CPU) {
    for (auto [t, what] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}})
      if (!t->defined() || t->dtype() != DType::F32 || t->device() != device)
        fatal(std::string(op) + ": " + what + " must be an f32 tensor on " +
              deviceName(device) + ", got " +
              (t->defined() ? t->describe() : "nothing"));
    if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3 ||
        q.dim(2) != heads * headDim || k.dim(2) != kvHeads * headDim ||
        v.shape() != k.shape() || k.dim(0) != q.dim(0) || kvHeads <= 0 ||
        heads % kvHeads != 0)
      fatal(std::string(op) + ": q " + q.describe() + ", k " + k.describe() +
            ", v " + v.describe() + " do not match " + std::to_string(heads) +
            " heads, " + std::to_string(kvHeads) + " KV heads of " +
            std::to_string(headDim));
    batch = q.dim(0);
    sq = q.dim(1);
    skv = k.dim(1);
    group = heads / kvHeads;
    queryOffset = skv - sq;
    mask = checkedKeyMask(keyMask, batch, skv, device, op, "seq_kv");
    // A mask that hides no key is none: the kernels skip its test per
    // score (a training batch without padding).
    if (mask && device == Device::CPU &&
        std::all_of(mask, mask + batch * skv, [](int64_t m) { return m != 0; }))
      mask = nullptr;
  }
};

/// The sizes of a mamba2_mixer call (forward, or backward with `dout`),
/// checked: x [batch, seq, hidden] and the parameters of `heads` heads of
/// `headDim` in `groups` groups of state `state` and a convolution of
/// `kernel`, all f32 on `device`; the key mask int64 [batch, seq] or
/// undefined; dout, when defined, x's shape.
struct Mamba2Shape {
  int64_t batch = 0, seq = 0, hidden = 0, heads, headDim, groups, state, kernel,
          inner, conv, proj, tokens = 0, groupSize = 0;
  const int64_t *mask = nullptr;

  Mamba2Shape(const char *op, const Tensor &x, const Tensor &inProj,
              const Tensor &convWeight, const Tensor &convBias,
              const Tensor &dtBias, const Tensor &aLog, const Tensor &d,
              const Tensor &normWeight, const Tensor &outProj,
              const Tensor &keyMask, const Tensor &dout, int64_t heads,
              int64_t headDim, int64_t groups, int64_t state, int64_t kernel,
              Device device = Device::CPU)
      : heads(heads), headDim(headDim), groups(groups), state(state),
        kernel(kernel), inner(heads * headDim),
        conv(inner + 2 * groups * state), proj(inner + conv + heads) {
    for (const Tensor *t : {&x, &inProj, &convWeight, &convBias, &dtBias, &aLog,
                            &d, &normWeight, &outProj})
      if (!t->defined() || t->dtype() != DType::F32 || t->device() != device)
        fatal(std::string(op) + ": an operand must be an f32 tensor on " +
              deviceName(device) + ", got " +
              (t->defined() ? t->describe() : "nothing"));
    if (x.rank() != 3 || inProj.rank() != 2 || outProj.rank() != 2 ||
        inProj.dim(0) != proj || convWeight.numel() != conv * kernel ||
        convBias.numel() != conv || dtBias.numel() != heads ||
        aLog.numel() != heads || d.numel() != heads ||
        normWeight.numel() != inner || outProj.dim(1) != inner || groups <= 0 ||
        heads % groups != 0 ||
        (dout.defined() &&
         (dout.shape() != x.shape() || dout.dtype() != DType::F32 ||
          dout.device() != device)))
      fatal(std::string(op) + ": parameters do not match " +
            std::to_string(heads) + " heads of " + std::to_string(headDim) +
            ", " + std::to_string(groups) + " groups of state " +
            std::to_string(state));
    batch = x.dim(0);
    seq = x.dim(1);
    hidden = x.dim(2);
    tokens = batch * seq;
    groupSize = inner / groups;
    mask = checkedKeyMask(keyMask, batch, seq, device, op, "seq");
  }
  /// Whether token `token` (batch row * seq + position) is not padding
  /// (host masks only).
  bool kept(int64_t token) const { return !mask || mask[token] != 0; }
};

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
    return cuda::attentionVisible(pos, key, causal, window) &&
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
  cuda::KeyRange maskRow(float *row, int64_t cols, int64_t b, int64_t pos,
                         int64_t j0, float *tanhs) const {
    const float ninf = -std::numeric_limits<float>::infinity();
    cuda::KeyRange keys = cuda::attentionVisibleKeys(pos, skv, causal, window);
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
      cuda::KeyRange seen = maskRow(row, cols, b, firstPos + i, j0, nullptr);
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
  /// can see (cuda::attentionKeyRange, the GPU kernel's rule): two products
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
    cuda::KeyRange range = cuda::attentionKeyRange(
        firstPos, firstPos + rows - 1, skv, causal, window);
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
