//===- nccl.cpp - collectives on NCCL (the GPU backend) -------------------===//
//
// The Communicator of tprt.h on device pointers. Each call is queued on the
// rank's stream after the kernels that produce its input, and the kernels
// queued after it read its output: no synchronization in between.
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
    checkNccl(
        ncclAllReduce(data, data, count, ncclFloat, ncclSum, comm_, stream()),
        "ncclAllReduce");
  }
  void allReduceMax(float *data, int64_t count) override {
    checkNccl(
        ncclAllReduce(data, data, count, ncclFloat, ncclMax, comm_, stream()),
        "ncclAllReduce");
  }
  void allReduceSumF64(double *data, int64_t count) override {
    checkNccl(
        ncclAllReduce(data, data, count, ncclDouble, ncclSum, comm_, stream()),
        "ncclAllReduce");
  }
  void allGather(const float *in, float *out, int64_t count) override {
    checkNccl(ncclAllGather(in, out, count, ncclFloat, comm_, stream()),
              "ncclAllGather");
  }
  void reduceScatterSum(const float *in, float *out, int64_t count) override {
    checkNccl(
        ncclReduceScatter(in, out, count, ncclFloat, ncclSum, comm_, stream()),
        "ncclReduceScatter");
  }
  void broadcast(void *data, int64_t bytes, int root) override {
    checkNccl(
        ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, stream()),
        "ncclBroadcast");
  }

private:
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 1;
};

} // namespace

std::unique_ptr<Communicator> createNcclCommunicator(int color) {
  return std::make_unique<NcclCommunicator>(color);
}

} // namespace cuda
} // namespace tprt
