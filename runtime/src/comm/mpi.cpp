//===- mpi.cpp - collectives on MPI (the CPU backend) ---------------------===//

#include "comm/SharedMemoryAllReduce.h"
#include "tprt/tprt.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <mpi.h>
#include <utility>

namespace tprt {
namespace {

/// MPI counts are int: larger buffers go in chunks.
constexpr int64_t kChunk = INT_MAX / 2;
/// The point-to-point messages of allGatherOthers (the only ones on a
/// communicator; each pair's are matched in order).
constexpr int kAllGatherTag = 1;

/// TPRT_ALLREDUCE: how allReduceSum moves the data. `auto` (the default)
/// and `shm` sum through shared memory when every rank is on one node
/// (`shm` stops where they are not), `mpi` calls MPI_Allreduce.
enum class AllReduceChoice { Auto, SharedMemory, Mpi };

AllReduceChoice allReduceChoice() {
  const char *env = std::getenv("TPRT_ALLREDUCE");
  if (!env || !*env || !std::strcmp(env, "auto"))
    return AllReduceChoice::Auto;
  if (!std::strcmp(env, "shm"))
    return AllReduceChoice::SharedMemory;
  if (!std::strcmp(env, "mpi"))
    return AllReduceChoice::Mpi;
  fatal(std::string("TPRT_ALLREDUCE=") + env +
        " is not one of auto, shm or mpi");
}

class MpiCommunicator : public Communicator {
public:
  explicit MpiCommunicator(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    shared_.reset(); // its window before the communicator
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allReduceSum(float *data, int64_t count) override {
    finishAllReduceSum();
    if (chooseSharedMemory())
      return shared_->sum(data, count);
    allReduce(data, count, MPI_SUM);
  }

  /// Shared memory: every piece but the last summed, the last published
  /// (the ranks that arrive first go on instead of waiting). MPI:
  /// MPI_Iallreduce, progressed by the MPI calls around it.
  void startAllReduceSum(float *data, int64_t count) override {
    finishAllReduceSum();
    if (chooseSharedMemory()) {
      shared_->start(data, count);
      pending_ = Pending::SharedMemory;
    } else if (count <= kChunk) {
      check(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count),
                           MPI_FLOAT, MPI_SUM, comm_, &request_),
            "MPI_Iallreduce");
      pending_ = Pending::Mpi;
    } else {
      allReduce(data, count, MPI_SUM);
    }
  }

  void finishAllReduceSum() override {
    Pending pending = std::exchange(pending_, Pending::None);
    if (pending == Pending::SharedMemory)
      shared_->finish();
    else if (pending == Pending::Mpi)
      check(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
  }

  /// Decided at the first allReduceSum (MPI's until then).
  const char *allReduceMethod() const override {
    return shared_ ? "shared memory" : "MPI_Allreduce";
  }

  void allReduceMax(float *data, int64_t count) override {
    finishAllReduceSum();
    allReduce(data, count, MPI_MAX);
  }

  void allReduceSumF64(double *data, int64_t count) override {
    finishAllReduceSum();
    for (int64_t done = 0; done < count; done += kChunk) {
      int n = static_cast<int>(std::min(kChunk, count - done));
      check(MPI_Allreduce(MPI_IN_PLACE, data + done, n, MPI_DOUBLE, MPI_SUM,
                          comm_),
            "MPI_Allreduce");
    }
  }

  void allReduce(float *data, int64_t count, MPI_Op op) {
    for (int64_t done = 0; done < count; done += kChunk) {
      int n = static_cast<int>(std::min(kChunk, count - done));
      check(MPI_Allreduce(MPI_IN_PLACE, data + done, n, MPI_FLOAT, op, comm_),
            "MPI_Allreduce");
    }
  }

  void allGather(const float *in, float *out, int64_t count) override {
    finishAllReduceSum();
    if (count > kChunk)
      fatal("allGather: blocks over 2^30 elements are not supported");
    check(MPI_Allgather(in, static_cast<int>(count), MPI_FLOAT, out,
                        static_cast<int>(count), MPI_FLOAT, comm_),
          "MPI_Allgather");
  }

  /// Pairwise exchanges (step s: to rank + s, from rank - s), each received
  /// straight into its slot: MPI_Allgather would also copy `in` into this
  /// rank's slot, a pass the caller does not need.
  void allGatherOthers(const float *in, float *out, int64_t count) override {
    finishAllReduceSum();
    if (count > kChunk)
      fatal("allGather: blocks over 2^30 elements are not supported");
    int n = static_cast<int>(count);
    for (int step = 1; step < size_; ++step) {
      int to = (rank_ + step) % size_, from = (rank_ - step + size_) % size_;
      check(MPI_Sendrecv(in, n, MPI_FLOAT, to, kAllGatherTag,
                         out + from * count, n, MPI_FLOAT, from, kAllGatherTag,
                         comm_, MPI_STATUS_IGNORE),
            "MPI_Sendrecv");
    }
  }

  void reduceScatterSum(const float *in, float *out, int64_t count) override {
    finishAllReduceSum();
    if (count > kChunk)
      fatal("reduceScatter: blocks over 2^30 elements are not supported");
    if (out != in + rank_ * count) {
      check(MPI_Reduce_scatter_block(in, out, static_cast<int>(count),
                                     MPI_FLOAT, MPI_SUM, comm_),
            "MPI_Reduce_scatter_block");
      return;
    }
    // In place: MPI leaves this rank's block at the start of the buffer.
    float *buffer = const_cast<float *>(in);
    check(MPI_Reduce_scatter_block(MPI_IN_PLACE, buffer,
                                   static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                                   comm_),
          "MPI_Reduce_scatter_block");
    if (rank_ != 0)
      std::memmove(out, buffer, static_cast<size_t>(count) * sizeof(float));
  }

  void allGatherUneven(const float *in, float *out,
                       const std::vector<int64_t> &counts) override {
    finishAllReduceSum();
    std::vector<int> sizes, displacements;
    intBlocks(counts, "allGatherUneven", sizes, displacements);
    check(MPI_Allgatherv(in, sizes[rank_], MPI_FLOAT, out, sizes.data(),
                         displacements.data(), MPI_FLOAT, comm_),
          "MPI_Allgatherv");
  }

  void reduceScatterSumUneven(const float *in, float *out,
                              const std::vector<int64_t> &counts) override {
    finishAllReduceSum();
    std::vector<int> sizes, displacements;
    intBlocks(counts, "reduceScatterSumUneven", sizes, displacements);
    check(MPI_Reduce_scatter(in, out, sizes.data(), MPI_FLOAT, MPI_SUM, comm_),
          "MPI_Reduce_scatter");
  }

  void broadcast(void *data, int64_t bytes, int root) override {
    finishAllReduceSum();
    auto *p = static_cast<char *>(data);
    for (int64_t done = 0; done < bytes; done += kChunk) {
      int n = static_cast<int>(std::min(kChunk, bytes - done));
      check(MPI_Bcast(p + done, n, MPI_BYTE, root, comm_), "MPI_Bcast");
    }
  }

private:
  /// `counts` and their offsets as MPI's int counts and displacements; a
  /// total over 2^31 elements is an error.
  void intBlocks(const std::vector<int64_t> &counts, const char *what,
                 std::vector<int> &sizes, std::vector<int> &displacements) {
    std::vector<int64_t> offsets = blockOffsets(counts, what);
    if (offsets.back() > INT_MAX)
      fatal(std::string(what) + ": " + std::to_string(offsets.back()) +
            " elements in all; MPI counts them in int");
    for (int r = 0; r < size_; ++r) {
      sizes.push_back(static_cast<int>(counts[r]));
      displacements.push_back(static_cast<int>(offsets[r]));
    }
  }

  /// Whether allReduceSum sums through shared memory: decided (collective:
  /// every rank gets here at its first all-reduce) once.
  bool chooseSharedMemory() {
    if (!sharedChosen_) {
      sharedChosen_ = true;
      AllReduceChoice choice = allReduceChoice();
      if (choice != AllReduceChoice::Mpi)
        shared_ = comm::SharedMemoryAllReduce::create(comm_);
      if (!shared_ && choice == AllReduceChoice::SharedMemory && size_ > 1)
        fatal("TPRT_ALLREDUCE=shm: the ranks do not share one node's memory "
              "(or the shared window could not be made)");
    }
    return shared_ != nullptr;
  }

  static void check(int status, const char *what) {
    if (status != MPI_SUCCESS)
      fatal(std::string(what) + " failed with MPI error " +
            std::to_string(status));
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  /// Made at the first allReduceSum; null where MPI_Allreduce sums.
  std::unique_ptr<comm::SharedMemoryAllReduce> shared_;
  bool sharedChosen_ = false;
  /// The all-reduce startAllReduceSum began (one at a time).
  enum class Pending { None, SharedMemory, Mpi } pending_ = Pending::None;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

} // namespace

std::unique_ptr<Communicator> createMpiCommunicator(int color) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm comm;
  if (MPI_Comm_split(MPI_COMM_WORLD, color, rank, &comm) != MPI_SUCCESS)
    fatal("MPI_Comm_split failed");
  return std::make_unique<MpiCommunicator>(comm);
}

} // namespace tprt
