//===- Cuda.h - the CUDA backend of tprt ------------------------*- C++ -*-===//
//
// What the rest of the runtime calls when ctx.device() is Device::CUDA:
// device memory, copies, the NCCL communicators, the kernels the table's
// calls share (each call's cuda::Name is declared in ops/Backends.h), and
// the optimizer step's arithmetic on gradient buffers. Every call is queued on
// the rank's one stream, so kernels, cuBLAS and NCCL run in program order
// without synchronization; only copies to the host wait. (The replica-gradient
// buckets' all-reduces run on a side stream of their communicator, ordered
// with this one by events: nccl.cpp.)
//
// Defined only with TPRT_WITH_CUDA (CMake found nvcc).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_CUDA_H
#define TPRT_CUDA_CUDA_H

#include "ops/Backends.h"

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace tprt {
namespace cuda {

/// Takes the GPU of this rank (local rank r of the node takes GPU r; an
/// error when the node's ranks outnumber its GPUs: NCCL needs one GPU per
/// rank) and makes its stream and cuBLAS handle. Collective over
/// MPI_COMM_WORLD.
void initialize();

/// Device memory from CUDA's stream-ordered pool (cudaMallocAsync), which
/// keeps freed blocks for reuse; `bytes` may be 0.
std::shared_ptr<unsigned char[]> allocate(size_t bytes);
/// Copies between host and device memory (either way, or device to
/// device); a copy to the host returns when the data is there.
void copy(void *dst, Device dstDevice, const void *src, Device srcDevice,
          size_t bytes);
void memset(void *dst, int value, size_t bytes);
/// A GPU tensor's f32 <-> bf16 / f16 conversion, on the GPU (Tensor::to):
/// widening is exact, narrowing rounds to nearest even, as on the host.
Tensor convert(const Tensor &x, DType dtype);
/// `n` elements of `x` (of type `from`) into `out` (of type `to`), on the
/// GPU: f32 to bf16 or f16 and back.
void convertInto(const void *x, DType from, void *out, DType to, int64_t n);
/// Waits for everything queued on this rank's GPU (a timer's end).
void synchronize();
/// The most bytes the rank's allocations from the stream-ordered pool held
/// at once since the backend started (after the queued work finishes):
/// what PyTorch's torch.cuda.max_memory_allocated() counts. Once a CUDA
/// graph is captured: the larger of the pool's peak before it and, since,
/// the pool's peak plus the graphs' pool's (as if both met).
size_t peakAllocatedBytes();

/// An NCCL communicator over the ranks of MPI_COMM_WORLD that share
/// `color` (the `group` named in messages: "tp", "dp"); the unique id goes
/// from the group's first rank over MPI. A collective that does not finish
/// within `timeoutSeconds` (0: no limit) stops every rank (nccl.cpp).
std::unique_ptr<Communicator>
createNcclCommunicator(int color, const char *group, double timeoutSeconds);

// The table's calls (tprt/Calls.def) are declared in ops/Backends.h; these
// are what they share.

/// out[r, :] += bias over the rows of `out`, in place: `out` of any float
/// type, the bias of its type or f32, each sum in f32 rounded once.
void addBias(Tensor &out, const Tensor &bias, const char *op);
/// RoPE with the cos / sin tables common/Rotary.h makes ([seq, half]
/// each, host memory).
Tensor rotaryWithTables(const Tensor &x, int64_t headDim, int64_t rotaryDim,
                        bool interleaved, const float *cosTable,
                        const float *sinTable);

/// tp.attention and its gradient in the tiled kernels, on f32 operands
/// (attention.cu chooses between them and cuDNN).
Tensor tiledAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                      const Tensor &keyMask, int64_t heads, int64_t kvHeads,
                      int64_t headDim, double scale, bool causal,
                      int64_t window, double softcap);
/// The forward's per-row statistics for the backward: log-sum-exp of the
/// masked scores and dout . out, [batch, heads, sq].
struct AttentionStats {
  Tensor lse, delta;
};
/// {dq, dk, dv} on f32 operands, from `saved` statistics when given, else
/// from the forward run again.
Tensors tiledAttentionGrad(const Tensor &q, const Tensor &k, const Tensor &v,
                           const Tensor &dout, const Tensor &keyMask,
                           int64_t heads, int64_t kvHeads, int64_t headDim,
                           double scale, bool causal, int64_t window,
                           double softcap,
                           const AttentionStats *saved = nullptr);
/// {out, lse}: the tiled forward on f32 operands, keeping each row's
/// log-sum-exp [batch, heads, sq] (+inf where a row sees no key).
Tensors tiledAttentionWithLse(const Tensor &q, const Tensor &k, const Tensor &v,
                              const Tensor &keyMask, int64_t heads,
                              int64_t kvHeads, int64_t headDim, double scale,
                              bool causal, int64_t window, double softcap);
/// dout . out per (batch, head, row), [batch, heads, sq]: the backward's
/// delta from the forward's saved output (any one float type).
Tensor attentionDelta(const Tensor &dout, const Tensor &out, int64_t heads,
                      int64_t headDim);
AttentionStats attentionWithStats(const Tensor &q, const Tensor &k,
                                  const Tensor &v, const Tensor &keyMask,
                                  const Tensor &dout, int64_t heads,
                                  int64_t kvHeads, int64_t headDim,
                                  double scale, bool causal, int64_t window,
                                  double softcap, const char *op);

/// A tensor of zeros on the GPU (all-zero bits: +0 in every float type).
Tensor zeros(const std::vector<int64_t> &shape, DType dtype = DType::F32);

// The training step's shared kernels (backward.cu, loss.cu).
/// cross_entropy and its vocabulary-parallel form (over an uneven split's
/// ranges when `starts` and `sizes` are given).
Tensors crossEntropy(Context &ctx, const Tensor &logits, const Tensor &ids,
                     const Tensor &mask, bool vocabParallel,
                     const std::vector<int64_t> &starts = {},
                     const std::vector<int64_t> &sizes = {});
enum class Activation { Silu, ReluSquared, Gelu, GeluTanh, Softcap };
/// dy * f'(x) of an activation (`parameter`: the soft cap).
Tensor activation_grad(const Tensor &x, const Tensor &dy, Activation op,
                       float parameter, const char *name);

// The optimizer step's arithmetic on gradient buffers (optimizer.cu).
/// Packs `runs` (counts[r] floats each, on the GPU) one after the other
/// into `bucket` (`toBucket`), or unpacks them from it, in one launch: a
/// bucket of thousands of gradients is one kernel, not a copy per gradient.
void packRuns(const std::vector<float *> &runs,
              const std::vector<int64_t> &counts, float *bucket, bool toBucket);
/// data[i] *= factor.
void scaleInPlace(float *data, int64_t n, float factor);
/// acc[i] += x[i].
void addInPlace(float *acc, const float *x, int64_t n);
/// {the sum of squares (FP64), the largest magnitude (NaN when an element
/// is)} of `n` elements, in one pass.
std::pair<double, double> normParts(const float *data, int64_t n);
/// torch.optim.AdamW's and SGD's element updates (Optimizer::step) of an
/// f32 or bf16 parameter on the GPU (bf16: updated in f32, rounded once).
void adamwUpdate(Tensor &param, const float *g, float *m, float *v, float decay,
                 float beta1, float beta2, float stepSize, float root2,
                 float eps);
void sgdUpdate(Tensor &param, const float *g, float *momentumBuffer,
               float weightDecay, float momentum, float lr, bool first);

/// The elementwise ops, by kind.
enum class Unary { Silu, Gelu, GeluTanh, ReluSquared, Scale, Softcap };
enum class Binary { Add, Mul };
Tensor unary(const Tensor &x, Unary op, float parameter, const char *name);
Tensor binary(const Tensor &a, const Tensor &b, Binary op, const char *name);
/// out = silu(out) * other in place, both of one float type and shape on
/// the GPU, in f32 and rounded once (linear_epilogue's SiluMul on its
/// product).
void siluMulInPlace(Tensor &out, const Tensor &other);

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_CUDA_H
