//===- nccl.cpp - collectives on NCCL (the GPU backend) -------------------===//
//
// The Communicator of tprt.h. On device pointers each call is queued on the
// rank's stream after the kernels that produce its input, and the kernels
// queued after it read its output: no synchronization in between. Host
// pointers (a norm's partial sums, the loop's loss and token counts, a
// checkpoint's gather) go through device memory and are back when the call
// returns.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"

#include <mpi.h>
#include <nccl.h>

namespace tprt {
namespace cuda {
namespace {

void checkNccl(ncclResult_t status, const char *what) {
  if (status != ncclSuccess)
    fatal(std::string(what) + " failed: " + ncclGetErrorString(status) +
          " (NCCL_DEBUG=WARN says more)");
}

bool onHost(const void *p) {
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return attributes.type != cudaMemoryTypeDevice &&
         attributes.type != cudaMemoryTypeManaged;
}

/// `bytes` of `data` where NCCL can read and write them: the data itself
/// on the device, else a device copy written back by finish().
class Staged {
public:
  Staged(void *data, size_t bytes, bool copyIn = true)
      : data_(data), bytes_(bytes), host_(onHost(data)) {
    if (!host_)
      return;
    buffer_ = allocate(bytes);
    if (copyIn)
      copy(buffer_.get(), Device::CUDA, data, Device::CPU, bytes);
  }
  void *get() const { return host_ ? buffer_.get() : data_; }
  void finish() {
    if (host_)
      copy(data_, Device::CPU, buffer_.get(), Device::CUDA, bytes_);
  }

private:
  void *data_;
  size_t bytes_;
  bool host_;
  std::shared_ptr<unsigned char[]> buffer_;
};

class NcclCommunicator : public Communicator {
public:
  explicit NcclCommunicator(int color) {
    int worldRank;
    MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
    MPI_Comm group;
    if (MPI_Comm_split(MPI_COMM_WORLD, color, worldRank, &group) != MPI_SUCCESS)
      fatal("MPI_Comm_split failed");
    MPI_Comm_rank(group, &rank_);
    MPI_Comm_size(group, &size_);
    ncclUniqueId id;
    if (rank_ == 0)
      checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group);
    MPI_Comm_free(&group);
    checkNccl(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
  }
  ~NcclCommunicator() override { ncclCommDestroy(comm_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allReduceSum(float *data, int64_t count) override {
    allReduce(data, count, ncclFloat, ncclSum, sizeof(float));
  }
  void allReduceMax(float *data, int64_t count) override {
    allReduce(data, count, ncclFloat, ncclMax, sizeof(float));
  }
  void allReduceSumF64(double *data, int64_t count) override {
    allReduce(data, count, ncclDouble, ncclSum, sizeof(double));
  }
  void allGather(const float *in, float *out, int64_t count) override {
    Staged source(const_cast<float *>(in), count * sizeof(float));
    Staged target(out, count * size_ * sizeof(float), /*copyIn=*/false);
    checkNccl(ncclAllGather(source.get(), target.get(), count, ncclFloat, comm_,
                            stream()),
              "ncclAllGather");
    target.finish();
  }
  void reduceScatterSum(const float *in, float *out, int64_t count) override {
    Staged source(const_cast<float *>(in), count * size_ * sizeof(float));
    Staged target(out, count * sizeof(float), /*copyIn=*/false);
    checkNccl(ncclReduceScatter(source.get(), target.get(), count, ncclFloat,
                                ncclSum, comm_, stream()),
              "ncclReduceScatter");
    target.finish();
  }
  void broadcast(void *data, int64_t bytes, int root) override {
    Staged buffer(data, bytes);
    checkNccl(ncclBroadcast(buffer.get(), buffer.get(), bytes, ncclUint8, root,
                            comm_, stream()),
              "ncclBroadcast");
    buffer.finish();
  }

private:
  void allReduce(void *data, int64_t count, ncclDataType_t type, ncclRedOp_t op,
                 size_t elementBytes) {
    Staged buffer(data, count * elementBytes);
    checkNccl(ncclAllReduce(buffer.get(), buffer.get(), count, type, op, comm_,
                            stream()),
              "ncclAllReduce");
    buffer.finish();
  }

  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
};

} // namespace

std::unique_ptr<Communicator> createNcclCommunicator(int color) {
  return std::make_unique<NcclCommunicator>(color);
}

} // namespace cuda
} // namespace tprt
