//===- Runtime.h - the CUDA backend's handles -------------------*- C++ -*-===//
//
// The stream and cuBLAS handle of this rank's GPU, and error checks, for
// the backend's own files (Cuda.h stays free of CUDA headers, so the CPU
// kernels include it without the toolkit's).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_RUNTIME_H
#define TPRT_CUDA_RUNTIME_H

#include "Cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <string>

namespace tprt {
namespace cuda {

/// The stream every kernel, cuBLAS call, copy and collective is queued on.
cudaStream_t stream();
/// Whether `s` is being captured into a CUDA graph (graphs.cpp): what
/// reads back to the host or watches an event skips it then.
bool capturing(cudaStream_t s);
/// `t` is memory a call being captured reads from a cache of its own (the
/// RoPE tables), which may drop it later: the graph keeps it alive for as
/// long as it can replay (graphs.cpp). Does nothing when not capturing.
void keepForGraph(const Tensor &t);
/// "tprt: `message`" on stderr, from rank 0 only (every rank says the
/// same).
void noteOnRank0(const std::string &message);
cublasHandle_t blas();
/// A CUDA graph was captured: peakAllocatedBytes() counts the stream-ordered
/// pool's peak so far apart from what it and the graphs' pool hold from
/// now on (graphs.cpp calls it after each capture).
void graphMemoryBegins();

/// An error naming `what` and CUDA's message.
void check(cudaError_t status, const char *what);
void check(cublasStatus_t status, const char *what);
/// After a kernel launch: a launch error names the kernel.
void checkLaunch(const char *kernel);

/// `n` floats rounded to bf16 (nearest even) in a new device buffer, for
/// the autocast GEMMs.
std::shared_ptr<unsigned char[]> toBf16(const float *data, int64_t n);

/// The operand checks of the forward kernels: defined, f32 (or i64), and on
/// the GPU.
void requireGpu(const Tensor &t, DType dtype, const char *op, const char *what);
/// `t` is an f32, bf16 or f16 tensor on the GPU (the kernels that read
/// every float type themselves).
void requireGpuFloat(const Tensor &t, const char *op, const char *what);

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_RUNTIME_H
