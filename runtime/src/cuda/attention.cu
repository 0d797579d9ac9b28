//===- attention.cu - each attention call to cuDNN or the tiled kernels ---===//
//
// tp.attention and its gradient on the GPU. A bf16 or f16 call that
// chooseAttentionKernel (tprt/AttentionKernel.h) gives to cuDNN runs its
// fused flash attention in the operands' own type (cudnn.cpp); every other
// call, and one cuDNN cannot take (not found, or it refuses the graph: said
// once on rank 0), runs the tiled kernels in f32 (kernels.cu, backward.cu).
// TPRT_ATTENTION chooses: `auto` (the default), `tiled` (every call), or
// `cudnn` (a call the rule gives cuDNN that cuDNN cannot run is an error).
//
// cuDNN takes the key mask as an additive bias [batch, 1, 1, skv]: 0 where
// kept, a large negative finite value where masked (not -inf, so that a
// query whose keys are all masked gets a finite row). tp.attention gives
// such a query zeros, so its output row is zeroed after the forward and its
// dout row before the backward (attentionSeesKey, common/Attention.h).
// The backward recomputes the forward for its log-sum-exp, as the tiled
// kernels do: nothing [seq, seq] is ever kept.
//
//===----------------------------------------------------------------------===//

#include "Cudnn.h"
#include "Elements.cuh"
#include "Runtime.h"
#include "Tiling.h"
#include "common/Attention.h"
#include "common/Checks.h"
#include "tprt/AttentionKernel.h"

#include <cfloat>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>

namespace tprt {
namespace cuda {

namespace {

constexpr int kThreads = 256;

/// A masked key's bias: far below any score, and far enough from the
/// type's end that a kernel scaling scores (by log2 e, for exp2) stays
/// finite: a row of masked keys is then finite, not NaN.
constexpr float kMaskedBf16 = -1e30f, kMaskedF16 = -30000.0f;

template <typename T>
__global__ void maskBiasKernel(const int64_t *mask, T *bias, int64_t n,
                               float masked) {
  TPRT_GRID_STRIDE(i, n) bias[i] = fromFloat<T>(mask[i] != 0 ? 0.0f : masked);
}

/// seen[b, row] = 1 when the query sees some key, else 0.
__global__ void seenRowsKernel(const int64_t *mask, float *seen, int64_t batch,
                               int64_t sq, int64_t skv, bool causal,
                               int64_t window) {
  TPRT_GRID_STRIDE(i, batch * sq) {
    int64_t b = i / sq, row = i % sq;
    seen[i] =
        attentionSeesKey(row + skv - sq, skv, causal, window, mask + b * skv)
            ? 1.0f
            : 0.0f;
  }
}

/// x[r, :] = 0 where seen[r] is 0 (the rows of [rows, width]).
template <typename T>
__global__ void zeroUnseenRowsKernel(T *x, const float *seen, int64_t rows,
                                     int64_t width) {
  TPRT_GRID_STRIDE(i, rows * width) {
    if (seen[i / width] == 0.0f)
      x[i] = fromFloat<T>(0.0f);
  }
}

enum class Policy { Auto, Tiled, Cudnn };

Policy policy() {
  static const Policy chosen = [] {
    const char *env = std::getenv("TPRT_ATTENTION");
    std::string value = env ? env : "auto";
    if (value == "auto")
      return Policy::Auto;
    if (value == "tiled")
      return Policy::Tiled;
    if (value == "cudnn")
      return Policy::Cudnn;
    fatal("TPRT_ATTENTION='" + value +
          "': expected auto, tiled or cudnn (docs/gpu.md)");
  }();
  return chosen;
}

/// `message` on stderr from rank 0, once per process.
void noteOnce(const std::string &message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(message).second)
    noteOnRank0("attention: " + message);
}

/// cuDNN could not run `shape`: the tiled kernels will, unless
/// TPRT_ATTENTION=cudnn asked for cuDNN.
void fallBack(const FusedAttentionShape &shape, const std::string &why) {
  if (policy() == Policy::Cudnn)
    fatal("attention (" + shape.key() + "): TPRT_ATTENTION=cudnn, but " + why);
  noteOnce("cuDNN does not run " + shape.key() + " (" + why +
           "); the tiled kernels do");
}

/// A call cuDNN is to run: its shape, and with a key mask the bias and the
/// rows that see a key.
struct FusedCall {
  FusedAttentionShape shape;
  Tensor bias, seen;
};

/// The call as cuDNN takes it, or nothing when the tiled kernels run it.
std::optional<FusedCall> fusedCall(const Tensor &q, const Tensor &k,
                                   const Tensor &v, const Tensor &keyMask,
                                   int64_t heads, int64_t kvHeads,
                                   int64_t headDim, double scale, bool causal,
                                   int64_t window, double softcap,
                                   const char *op) {
  DType dtype = q.dtype();
  if (policy() == Policy::Tiled || reducedType(q) == DType::F32 ||
      k.dtype() != dtype || v.dtype() != dtype)
    return std::nullopt;
  AttentionShape checked(q, k, v, keyMask, heads, kvHeads, headDim, op,
                         Device::CUDA, dtype);
  if (checked.batch == 0 || checked.sq == 0 || checked.skv == 0)
    return std::nullopt;
  bool masked = checked.mask != nullptr;
  AttentionKernelChoice choice =
      chooseAttentionKernel({true, headDim, checked.sq, checked.skv, causal,
                             window, softcap, masked});
  FusedCall call{{dtype, checked.batch, checked.sq, checked.skv, heads, kvHeads,
                  headDim, scale, causal, window, masked},
                 Tensor(),
                 Tensor()};
  if (choice.kernel != AttentionKernel::CudnnFused)
    return std::nullopt;
  std::string why;
  if (!cudnnAvailable(why)) {
    fallBack(call.shape, why);
    return std::nullopt;
  }
  if (masked) {
    int64_t n = checked.batch * checked.skv;
    call.bias = Tensor::uninitialized(dtype, {checked.batch, 1, 1, checked.skv},
                                      Device::CUDA);
    if (dtype == DType::BF16)
      maskBiasKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
          checked.mask, static_cast<__nv_bfloat16 *>(call.bias.raw()), n,
          kMaskedBf16);
    else
      maskBiasKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
          checked.mask, static_cast<__half *>(call.bias.raw()), n, kMaskedF16);
    checkLaunch("attention: key mask bias");
    int64_t rows = checked.batch * checked.sq;
    call.seen = Tensor::uninitialized(DType::F32, {checked.batch, checked.sq},
                                      Device::CUDA);
    seenRowsKernel<<<gridBlocks(rows, kThreads), kThreads, 0, stream()>>>(
        checked.mask, call.seen.f32(), checked.batch, checked.sq, checked.skv,
        causal, window);
    checkLaunch("attention: rows that see a key");
  }
  return call;
}

/// Zeroes the rows of `x` ([batch, sq, width]) whose query sees no key.
void zeroUnseenRows(Tensor &x, const Tensor &seen) {
  int64_t rows = seen.numel(), width = x.numel() / (rows ? rows : 1);
  int64_t n = rows * width;
  if (n == 0)
    return;
  if (x.dtype() == DType::BF16)
    zeroUnseenRowsKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
        static_cast<__nv_bfloat16 *>(x.raw()), seen.f32(), rows, width);
  else
    zeroUnseenRowsKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
        static_cast<__half *>(x.raw()), seen.f32(), rows, width);
  checkLaunch("attention: rows that see no key");
}

/// out[b, c, a] = in[b, a, c].
__global__ void swapLastTwoKernel(const float *in, float *out, int64_t n,
                                  int64_t a, int64_t c) {
  TPRT_GRID_STRIDE(i, n) {
    int64_t b = i / (a * c), x = i / c % a, y = i % c;
    out[(b * c + y) * a + x] = in[i];
  }
}

/// [batch, A, C] statistics as [batch, C, A]: the kernels' [batch, heads,
/// sq] and attention_lse's [batch, sq, heads].
Tensor swappedLastTwo(const Tensor &in) {
  requireGpu(in, DType::F32, "attention", "the log-sum-exp");
  if (in.rank() != 3)
    fatal("attention: the log-sum-exp " + in.describe() + " is not 3-D");
  int64_t a = in.dim(1), c = in.dim(2), n = in.numel();
  Tensor out =
      Tensor::uninitialized(DType::F32, {in.dim(0), c, a}, Device::CUDA);
  if (n == 0)
    return out;
  swapLastTwoKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
      in.f32(), out.f32(), n, a, c);
  checkLaunch("attention: log-sum-exp layout");
  return out;
}

/// The forward through cuDNN into a new tensor (and `stats` when not
/// null), or nothing when cuDNN refused it.
std::optional<Tensor> fusedForward(const FusedCall &call, const Tensor &q,
                                   const Tensor &k, const Tensor &v,
                                   Tensor *stats) {
  const FusedAttentionShape &s = call.shape;
  Tensor out = Tensor::uninitialized(s.dtype, q.shape(), Device::CUDA);
  if (stats)
    *stats = Tensor::uninitialized(DType::F32, {s.batch, s.heads, s.sq},
                                   Device::CUDA);
  std::string why;
  if (!cudnnAttentionForward(s, q.raw(), k.raw(), v.raw(),
                             call.bias.defined() ? call.bias.raw() : nullptr,
                             out.raw(), stats ? stats->f32() : nullptr, why)) {
    fallBack(s, why);
    return std::nullopt;
  }
  return out;
}

} // namespace

Tensor attention(Context &ctx, const Tensor &q, const Tensor &k,
                 const Tensor &v, const Tensor &keyMask, int64_t heads,
                 int64_t kvHeads, int64_t headDim, double scale, bool causal,
                 int64_t window, double softcap, int64_t) {
  // An input's mask that keeps every key is none (no bias, no test).
  Tensor mask = ctx.keyMaskKeepsAll(keyMask) ? Tensor() : keyMask;
  if (std::optional<FusedCall> call =
          fusedCall(q, k, v, mask, heads, kvHeads, headDim, scale, causal,
                    window, softcap, "attention")) {
    if (std::optional<Tensor> out = fusedForward(*call, q, k, v, nullptr)) {
      if (call->seen.defined())
        zeroUnseenRows(*out, call->seen);
      return *out;
    }
  }
  TPRT_IN_F32(q,
              tiledAttention(widened(q), widened(k), widened(v), mask, heads,
                             kvHeads, headDim, scale, causal, window, softcap))
  return tiledAttention(q, k, v, mask, heads, kvHeads, headDim, scale, causal,
                        window, softcap);
}

Tensors attention_lse(Context &ctx, const Tensor &q, const Tensor &k,
                      const Tensor &v, const Tensor &keyMask, int64_t heads,
                      int64_t kvHeads, int64_t headDim, double scale,
                      bool causal, int64_t window, double softcap) {
  Tensor mask = ctx.keyMaskKeepsAll(keyMask) ? Tensor() : keyMask;
  if (std::optional<FusedCall> call =
          fusedCall(q, k, v, mask, heads, kvHeads, headDim, scale, causal,
                    window, softcap, "attention_lse")) {
    Tensor stats;
    if (std::optional<Tensor> out = fusedForward(*call, q, k, v, &stats)) {
      if (call->seen.defined())
        zeroUnseenRows(*out, call->seen);
      return {*out, swappedLastTwo(stats)};
    }
  }
  Tensors both =
      tiledAttentionWithLse(widened(q), widened(k), widened(v), mask, heads,
                            kvHeads, headDim, scale, causal, window, softcap);
  return {narrowed(both[0], reducedType(q)), swappedLastTwo(both[1])};
}

Tensors attention_grad(Context &ctx, const Tensor &q, const Tensor &k,
                       const Tensor &v, const Tensor &dout,
                       const Tensor &keyMask, int64_t heads, int64_t kvHeads,
                       int64_t headDim, double scale, bool causal,
                       int64_t window, double softcap, const Tensor &savedOut,
                       const Tensor &savedLse) {
  Tensor mask = ctx.keyMaskKeepsAll(keyMask) ? Tensor() : keyMask;
  // The forward's output and log-sum-exp (attention_lse), when given, stand
  // for the forward run again; the statistics in the kernels' layout.
  bool saved =
      savedAttentionGiven(q, heads, savedOut, savedLse, "attention_grad");
  Tensor stats;
  if (saved)
    stats = swappedLastTwo(savedLse);
  std::optional<FusedCall> call;
  if (dout.defined() && dout.dtype() == q.dtype() && dout.shape() == q.shape())
    call = fusedCall(q, k, v, mask, heads, kvHeads, headDim, scale, causal,
                     window, softcap, "attention_grad");
  if (call) {
    std::optional<Tensor> out;
    if (saved && savedOut.dtype() == q.dtype())
      out = savedOut;
    else
      out = fusedForward(*call, q, k, v, &stats);
    if (out) {
      Tensor upstream = dout;
      if (call->seen.defined()) {
        upstream =
            Tensor::uninitialized(dout.dtype(), dout.shape(), Device::CUDA);
        copy(upstream.raw(), Device::CUDA, dout.raw(), Device::CUDA,
             dout.bytes());
        zeroUnseenRows(upstream, call->seen);
      }
      const FusedAttentionShape &s = call->shape;
      Tensor dq = Tensor::uninitialized(s.dtype, q.shape(), Device::CUDA);
      Tensor dk = Tensor::uninitialized(s.dtype, k.shape(), Device::CUDA);
      Tensor dv = Tensor::uninitialized(s.dtype, v.shape(), Device::CUDA);
      std::string why;
      if (cudnnAttentionBackward(
              s, q.raw(), k.raw(), v.raw(),
              call->bias.defined() ? call->bias.raw() : nullptr, out->raw(),
              upstream.raw(), stats.f32(), dq.raw(), dk.raw(), dv.raw(), why))
        return {dq, dk, dv};
      fallBack(s, why);
    }
  }
  std::optional<AttentionStats> fromSaved;
  if (saved)
    fromSaved =
        AttentionStats{stats, attentionDelta(widened(dout), widened(savedOut),
                                             heads, headDim)};
  const AttentionStats *given = fromSaved ? &*fromSaved : nullptr;
  if (reducedType(q, dout) != DType::F32)
    return narrowedLike(tiledAttentionGrad(widened(q), widened(k), widened(v),
                                           widened(dout), mask, heads, kvHeads,
                                           headDim, scale, causal, window,
                                           softcap, given),
                        {&q, &k, &v});
  return tiledAttentionGrad(q, k, v, dout, mask, heads, kvHeads, headDim, scale,
                            causal, window, softcap, given);
}

} // namespace cuda
} // namespace tprt
