//===- device.cpp - the GPU of a rank: stream, memory, copies -------------===//
//
// One GPU per rank, one stream per GPU. Memory comes from CUDA's
// stream-ordered pool (cudaMallocAsync / cudaFreeAsync) with its release
// threshold lifted, so that blocks freed by one forward pass serve the
// next without going back to the driver: the caching allocator is CUDA's.
// Large host-to-device copies (the parameters, as they are read) go
// through two pinned buffers, the host filling one while the GPU reads the
// other.
//
//===----------------------------------------------------------------------===//

#include "Cublas.h"
#include "Runtime.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mpi.h>

namespace tprt {
namespace cuda {
namespace {

/// Host-to-device copies of at least kStagedCopy bytes are staged in
/// chunks of kStageBytes.
constexpr size_t kStageBytes = size_t(32) << 20;
constexpr size_t kStagedCopy = size_t(1) << 20;

struct State {
  int device = -1;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  /// Pinned staging buffers, made at the first large copy (none when
  /// pinning failed), and the event after each one's last copy out.
  void *stage[2] = {nullptr, nullptr};
  cudaEvent_t staged[2] = {nullptr, nullptr};
  bool stagingTried = false;
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

void requireGpuFloat(const Tensor &t, const char *op, const char *what) {
  DType dtype = t.defined() ? t.dtype() : DType::F32;
  requireGpu(t,
             dtype == DType::BF16 || dtype == DType::F16 ? dtype : DType::F32,
             op, what);
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

void noteOnRank0(const std::string &message) {
  int initialized = 0, rank = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    std::fprintf(stderr, "tprt: %s\n", message.c_str());
}

bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(s, &status) == cudaSuccess &&
         status != cudaStreamCaptureStatusNone;
}
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

namespace {

/// The pinned buffers, made once; false when pinning failed (a copy then
/// goes from pageable memory, as CUDA stages it).
bool stagingReady(State &s) {
  if (!s.stagingTried) {
    s.stagingTried = true;
    for (int i = 0; i < 2; ++i)
      if (cudaHostAlloc(&s.stage[i], kStageBytes, cudaHostAllocDefault) !=
              cudaSuccess ||
          cudaEventCreateWithFlags(&s.staged[i], cudaEventDisableTiming) !=
              cudaSuccess) {
        cudaGetLastError();
        s.stage[0] = s.stage[1] = nullptr;
        break;
      }
  }
  return s.stage[0] && s.stage[1];
}

/// `bytes` from pageable host memory to the GPU through the pinned buffers
/// in turn: the host copies a chunk into one while the GPU reads the
/// other. Returns once the source is read, as a pageable copy does.
void copyStaged(char *dst, const char *src, size_t bytes, State &s) {
  for (size_t offset = 0, i = 0; offset < bytes;
       offset += kStageBytes, i ^= 1) {
    size_t n = std::min(kStageBytes, bytes - offset);
    // The GPU has finished reading this buffer's previous chunk.
    check(cudaEventSynchronize(s.staged[i]), "cudaEventSynchronize");
    std::memcpy(s.stage[i], src + offset, n);
    check(cudaMemcpyAsync(dst + offset, s.stage[i], n, cudaMemcpyHostToDevice,
                          s.stream),
          "cudaMemcpyAsync");
    check(cudaEventRecord(s.staged[i], s.stream), "cudaEventRecord");
  }
}

} // namespace

void copy(void *dst, Device dstDevice, const void *src, Device srcDevice,
          size_t bytes) {
  if (bytes == 0)
    return;
  State &s = ready();
  if (dstDevice == Device::CUDA && srcDevice == Device::CPU &&
      bytes >= kStagedCopy && stagingReady(s))
    return copyStaged(static_cast<char *>(dst), static_cast<const char *>(src),
                      bytes, s);
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

namespace {

/// The stream-ordered pool's peak before the first CUDA graph, and its use
/// when its high-water mark was reset then (graphs.cpp).
struct PeaksBeforeGraphs {
  bool graphs = false;
  uint64_t eager = 0, usedAtReset = 0;
};

PeaksBeforeGraphs &peaksBeforeGraphs() {
  static PeaksBeforeGraphs peaks;
  return peaks;
}

cudaMemPool_t defaultPool() {
  cudaMemPool_t pool;
  check(cudaDeviceGetDefaultMemPool(&pool, ready().device),
        "cudaDeviceGetDefaultMemPool");
  return pool;
}

uint64_t poolAttribute(cudaMemPool_t pool, cudaMemPoolAttr attribute) {
  uint64_t value = 0;
  check(cudaMemPoolGetAttribute(pool, attribute, &value),
        "cudaMemPoolGetAttribute");
  return value;
}

} // namespace

void graphMemoryBegins() {
  synchronize();
  cudaMemPool_t pool = defaultPool();
  PeaksBeforeGraphs &peaks = peaksBeforeGraphs();
  peaks.eager =
      std::max(peaks.eager, poolAttribute(pool, cudaMemPoolAttrUsedMemHigh));
  peaks.usedAtReset = poolAttribute(pool, cudaMemPoolAttrUsedMemCurrent);
  uint64_t zero = 0;
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero),
        "cudaMemPoolSetAttribute");
  peaks.graphs = true;
}

size_t peakAllocatedBytes() {
  synchronize();
  uint64_t high = poolAttribute(defaultPool(), cudaMemPoolAttrUsedMemHigh);
  const PeaksBeforeGraphs &peaks = peaksBeforeGraphs();
  if (!peaks.graphs)
    return static_cast<size_t>(high);
  // Since the first graph: the pool's peak (what the eager parts of each
  // step hold: parameters, gradients, optimizer state) and the graphs' own
  // pool's (their activations), counted as if both peaks met.
  uint64_t graphHigh = 0;
  check(cudaDeviceGetGraphMemAttribute(ready().device,
                                       cudaGraphMemAttrUsedMemHigh, &graphHigh),
        "cudaDeviceGetGraphMemAttribute");
  return static_cast<size_t>(
      std::max(peaks.eager, std::max(high, peaks.usedAtReset) + graphHigh));
}

} // namespace cuda
} // namespace tprt
