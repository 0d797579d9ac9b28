//===- Cuda.h - the CUDA backend of tprt ------------------------*- C++ -*-===//
//
// What the rest of the runtime calls when ctx.device() is Device::CUDA:
// device memory, copies, the NCCL communicators, one kernel per op of the
// forward and the training step (tprt.h's signatures), and the optimizer
// step's arithmetic on gradient buffers. Every call is queued on the rank's
// one stream, so kernels, cuBLAS and NCCL run in program order without
// synchronization; only copies to the host wait. (The replica-gradient
// buckets' all-reduces run on a side stream of their communicator, ordered
// with this one by events: nccl.cpp.)
//
// Defined only with TPRT_WITH_CUDA (CMake found nvcc).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_CUDA_H
#define TPRT_CUDA_CUDA_H

#include "tprt/tprt.h"

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
/// Waits for everything queued on this rank's GPU (a timer's end).
void synchronize();

/// An NCCL communicator over the ranks of MPI_COMM_WORLD that share
/// `color` (the `group` named in messages: "tp", "dp"); the unique id goes
/// from the group's first rank over MPI. A collective that does not finish
/// within `timeoutSeconds` (0: no limit) stops every rank (nccl.cpp).
std::unique_ptr<Communicator>
createNcclCommunicator(int color, const char *group, double timeoutSeconds);

Tensor embedding(Context &ctx, const Tensor &ids, const Tensor &table);
Tensor embedding_vocab_parallel(Context &ctx, const Tensor &ids,
                                const Tensor &table);
Tensor all_reduce_sum(Context &ctx, const Tensor &x);
/// all_reduce_sum's first half: a copy of `x` whose sum runs on the
/// communicator's side stream (Communicator::startAllReduceSum).
Tensor all_reduce_sum_start(Context &ctx, const Tensor &x);
Tensor all_gather(Context &ctx, const Tensor &x, int64_t axis);
Tensor reduce_scatter_sum(Context &ctx, const Tensor &x, int64_t axis);
Tensor all_slice(Context &ctx, const Tensor &x, int64_t axis);
Tensor feature_slice(Context &ctx, const Tensor &x, int64_t offset,
                     int64_t size);
Tensor feature_slice_grad(Context &ctx, const Tensor &dy, int64_t offset,
                          int64_t width);
Tensor linear(Context &ctx, const Tensor &x, const Tensor &w);
Tensor linear_bmm(Context &ctx, const Tensor &x, const Tensor &w);
/// out[r, :] += bias over the rows of `out`, in place.
void addBias(Tensor &out, const Tensor &bias, const char *op);
Tensor bias_add(Context &ctx, const Tensor &x, const Tensor &bias);
Tensor rms_norm(Context &ctx, const Tensor &x, const Tensor &w, double eps,
                double offset, int64_t group);
/// RoPE with the cos / sin tables the CPU kernel computes ([seq, half]
/// each, host memory).
Tensor rotary(const Tensor &x, int64_t headDim, int64_t rotaryDim,
              bool interleaved, const float *cosTable, const float *sinTable);
Tensor attention(Context &ctx, const Tensor &q, const Tensor &k,
                 const Tensor &v, const Tensor &keyMask, int64_t heads,
                 int64_t kvHeads, int64_t headDim, double scale, bool causal,
                 int64_t window, double softcap);
Tensor mamba2_mixer(Context &ctx, const Tensor &x, const Tensor &inProj,
                    const Tensor &convWeight, const Tensor &convBias,
                    const Tensor &dtBias, const Tensor &aLog, const Tensor &d,
                    const Tensor &normWeight, const Tensor &outProj,
                    const Tensor &keyMask, int64_t heads, int64_t headDim,
                    int64_t groups, int64_t state, int64_t kernel,
                    double normEps, double dtMin, bool foldedA);

/// The forward's per-row statistics for the backward: log-sum-exp of the
/// masked scores and dout . out, [batch, heads, sq].
struct AttentionStats {
  Tensor lse, delta;
};
AttentionStats attentionWithStats(const Tensor &q, const Tensor &k,
                                  const Tensor &v, const Tensor &keyMask,
                                  const Tensor &dout, int64_t heads,
                                  int64_t kvHeads, int64_t headDim,
                                  double scale, bool causal, int64_t window,
                                  double softcap, const char *op);

/// A tensor of zeros on the GPU (all-zero bits: +0 in every float type).
Tensor zeros(const std::vector<int64_t> &shape, DType dtype = DType::F32);

// The training step's kernels (backward.cu, loss.cu, blas.cpp).
Tensors cross_entropy(Context &ctx, const Tensor &logits, const Tensor &ids,
                      const Tensor &mask, bool vocabParallel);
Tensor cross_entropy_grad(Context &ctx, const Tensor &logits, const Tensor &ids,
                          const Tensor &mask, const Tensor &lse,
                          bool vocabParallel);
Tensor linear_grad_input(Context &ctx, const Tensor &dy, const Tensor &w);
Tensor linear_grad_weight(Context &ctx, const Tensor &dy, const Tensor &x);
Tensor sum_leading(Context &ctx, const Tensor &x);
Tensor embedding_grad(Context &ctx, const Tensor &ids, const Tensor &dy,
                      const Tensor &table, bool vocabParallel,
                      int64_t paddingIdx);
Tensors rms_norm_grad(Context &ctx, const Tensor &x, const Tensor &w,
                      const Tensor &dy, double eps, double offset,
                      int64_t group);
Tensors attention_grad(Context &ctx, const Tensor &q, const Tensor &k,
                       const Tensor &v, const Tensor &dout,
                       const Tensor &keyMask, int64_t heads, int64_t kvHeads,
                       int64_t headDim, double scale, bool causal,
                       int64_t window, double softcap);
enum class Activation { Silu, ReluSquared, Gelu, GeluTanh, Softcap };
/// dy * f'(x) of an activation (`parameter`: the soft cap).
Tensor activation_grad(const Tensor &x, const Tensor &dy, Activation op,
                       float parameter, const char *name);
Tensor replica_sum(Context &ctx, const Tensor &x, int64_t replicas);
void accumulate_grad(Context &ctx, const Tensor &grad, const Tensor &param,
                     const char *fqn, int64_t splitDim, bool owned);

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

Tensors mamba2_mixer_grad(Context &ctx, const Tensor &x, const Tensor &inProj,
                          const Tensor &convWeight, const Tensor &convBias,
                          const Tensor &dtBias, const Tensor &aLog,
                          const Tensor &d, const Tensor &normWeight,
                          const Tensor &outProj, const Tensor &keyMask,
                          const Tensor &dout, int64_t heads, int64_t headDim,
                          int64_t groups, int64_t state, int64_t kernel,
                          double normEps, double dtMin, bool foldedA);

/// The elementwise ops, by kind.
enum class Unary { Silu, Gelu, GeluTanh, ReluSquared, Scale, Softcap };
enum class Binary { Add, Mul };
Tensor unary(const Tensor &x, Unary op, float parameter, const char *name);
Tensor binary(const Tensor &a, const Tensor &b, Binary op, const char *name);

} // namespace cuda
} // namespace tprt

/// In a CPU kernel's entry point: the CUDA kernel instead when the context
/// runs on the GPU (a context never does without the backend).
#ifdef TPRT_WITH_CUDA
#define TPRT_ON_CUDA(ctx, call)                                                \
  if ((ctx).device() == ::tprt::Device::CUDA)                                  \
    return ::tprt::cuda::call;
#else
#define TPRT_ON_CUDA(ctx, call)
#endif

#endif // TPRT_CUDA_CUDA_H
