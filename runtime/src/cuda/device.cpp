//===- device.cpp - the GPU of a rank: stream, memory, copies -------------===//
//
// One GPU per rank, one stream per GPU. Memory comes from CUDA's
// stream-ordered pool (cudaMallocAsync / cudaFreeAsync) with its release
// threshold lifted, so that blocks freed by one forward pass serve the
// next without going back to the driver: the caching allocator is CUDA's.
//
//===----------------------------------------------------------------------===//

#include "Cublas.h"
#include "Runtime.h"

#include <cstdint>
#include <mpi.h>

namespace tprt {
namespace cuda {
namespace {

struct State {
  int device = -1;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
};

State &state() {
  static State s;
  return s;
}

State &ready() {
  State &s = state();
  if (s.device < 0)
    fatal("the CUDA backend is used before --device cuda chose a GPU");
  return s;
}

} // namespace

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    fatal(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
          cudaGetErrorString(status) + ")");
}

void check(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fatal(std::string(what) + ": " + cublas().statusName(status) + " (" +
          cublas().statusString(status) + ")");
}

void checkLaunch(const char *kernel) { check(cudaGetLastError(), kernel); }

void requireGpu(const Tensor &t, DType dtype, const char *op,
                const char *what) {
  if (!t.defined() || t.dtype() != dtype || !t.onGpu())
    fatal(std::string(op) + ": " + what + " must be a " + dtypeName(dtype) +
          " tensor on the GPU, got " +
          (t.defined() ? t.describe() : "nothing"));
}

void initialize() {
  State &s = state();
  if (s.device >= 0)
    return;
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0)
    fatal(std::string("--device cuda: no CUDA GPU is visible (") +
          (status != cudaSuccess ? cudaGetErrorString(status) : "no devices") +
          ")");
  // The ranks of this node, in order: local rank r takes GPU r.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                      &node);
  int localRank = 0, localSize = 1;
  MPI_Comm_rank(node, &localRank);
  MPI_Comm_size(node, &localSize);
  MPI_Comm_free(&node);
  if (localSize > count)
    fatal("--device cuda: " + std::to_string(localSize) +
          " ranks on this node but " + std::to_string(count) +
          " GPU(s): NCCL needs a GPU of its own for each rank");
  s.device = localRank;
  check(cudaSetDevice(s.device), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking),
        "cudaStreamCreate");
  check(cublas().create(&s.blas), "cublasCreate");
  check(cublas().setStream(s.blas, s.stream), "cublasSetStream");
  // FP32 products stay FP32 (no TF32): the forward matches the CPU backend
  // within f32 rounding.
  check(cublas().setMathMode(s.blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  cudaMemPool_t pool;
  check(cudaDeviceGetDefaultMemPool(&pool, s.device),
        "cudaDeviceGetDefaultMemPool");
  uint64_t keep = UINT64_MAX;
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
        "cudaMemPoolSetAttribute");
}

cudaStream_t stream() { return ready().stream; }
cublasHandle_t blas() { return ready().blas; }

std::shared_ptr<unsigned char[]> allocate(size_t bytes) {
  cudaStream_t s = stream();
  void *data = nullptr;
  // At least one byte, so that an empty tensor is still defined.
  cudaError_t status = cudaMallocAsync(&data, bytes ? bytes : 1, s);
  if (status != cudaSuccess) {
    size_t freeBytes = 0, total = 0;
    cudaGetLastError();
    cudaMemGetInfo(&freeBytes, &total);
    fatal("cannot allocate " + std::to_string(bytes) + " bytes on the GPU (" +
          std::to_string(freeBytes) + " of " + std::to_string(total) +
          " free): " + cudaGetErrorString(status));
  }
  // Freed in stream order: work queued before the last handle went away
  // still reads the block.
  return std::shared_ptr<unsigned char[]>(
      static_cast<unsigned char *>(data),
      [s](unsigned char *p) { cudaFreeAsync(p, s); });
}

void copy(void *dst, Device dstDevice, const void *src, Device srcDevice,
          size_t bytes) {
  if (bytes == 0)
    return;
  cudaMemcpyKind kind =
      dstDevice == Device::CUDA
          ? (srcDevice == Device::CUDA ? cudaMemcpyDeviceToDevice
                                       : cudaMemcpyHostToDevice)
          : cudaMemcpyDeviceToHost;
  // From pageable host memory the call returns once the source is staged;
  // to the host the caller reads the data next: wait for it.
  check(cudaMemcpyAsync(dst, src, bytes, kind, stream()), "cudaMemcpyAsync");
  if (dstDevice == Device::CPU)
    check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
}

void memset(void *dst, int value, size_t bytes) {
  check(cudaMemsetAsync(dst, value, bytes, stream()), "cudaMemsetAsync");
}

void synchronize() {
  check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
}

} // namespace cuda
} // namespace tprt
