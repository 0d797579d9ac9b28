//===- nccl.cpp - collectives on NCCL (the GPU backend) -------------------===//
//
// The Communicator of tprt.h. On device pointers each call is queued on the
// rank's stream after the kernels that produce its input, and the kernels
// queued after it read its output: no synchronization in between. Host
// pointers (a norm's partial sums, the loop's loss and token counts, a
// checkpoint's gather) go through device memory and are back when the call
// returns.
//
// Communicators are non-blocking (NCCL's config.blocking = 0): a call that
// would wait for the other ranks (creation, the first collective's
// connection set-up) returns at once and is polled with a deadline, and a
// thread watches the collectives queued on the GPU (Watchdog.h). A rank
// that never joins stops every rank with a message naming the collective,
// after ncclCommAbort has released the GPU, instead of hanging: PyTorch's
// ProcessGroupNCCL watchdog, with its 10-minute default.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"
#include "Watchdog.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mpi.h>
#include <mutex>
#include <nccl.h>
#include <thread>
#include <vector>

namespace tprt {
namespace cuda {
namespace {

using Clock = std::chrono::steady_clock;

std::string ncclMessage(ncclComm_t comm, ncclResult_t status) {
  std::string message = ncclGetErrorString(status);
  if (const char *last = comm ? ncclGetLastError(comm) : nullptr; last && *last)
    message += std::string(": ") + last;
  return message;
}

void checkNccl(ncclResult_t status, const char *what) {
  if (status != ncclSuccess)
    fatal(std::string(what) + " failed: " + ncclGetErrorString(status) +
          " (NCCL_DEBUG=WARN says more)");
}

Clock::duration toDuration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(seconds));
}

std::string secondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", seconds);
  return text;
}

/// This process's NCCL communicators and the collectives queued on them,
/// polled by one thread. Never destroyed: its thread may outlive main's
/// statics when a fatal error ends the program.
class Watchdog {
public:
  static Watchdog &instance() {
    static Watchdog *watchdog = new Watchdog;
    return *watchdog;
  }

  /// Watches `comm` (for asynchronous errors, and to abort it) and, with a
  /// positive timeout, the collectives queued on the streams.
  void attach(ncclComm_t comm, double timeoutSeconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    comms_.push_back(comm);
    if (thread_.joinable())
      return;
    timeout_ = timeoutSeconds;
    check(cudaGetDevice(&device_), "cudaGetDevice");
    stop_ = false;
    thread_ = std::thread([this] { run(); });
  }

  /// Stops watching `comm`; the thread ends with the last communicator.
  void detach(ncclComm_t comm) {
    std::unique_lock<std::mutex> lock(mutex_);
    comms_.erase(std::remove(comms_.begin(), comms_.end(), comm), comms_.end());
    if (!comms_.empty() || !thread_.joinable())
      return;
    stop_ = true;
    lock.unlock();
    wake_.notify_all();
    thread_.join();
  }

  /// Records the end of the collective just queued on `on` (each stream's
  /// collectives are a queue of their own: a stream runs them in order).
  void queued(std::string what, cudaStream_t on) {
    // A collective captured into a graph runs at its replays, unwatched.
    if (timeout_ <= 0 || capturing(on))
      return;
    cudaEvent_t event;
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
          "cudaEventCreate");
    check(cudaEventRecord(event, on), "cudaEventRecord");
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<CollectiveQueue<cudaEvent_t>> &queue = queues_[on];
    if (!queue)
      queue =
          std::make_unique<CollectiveQueue<cudaEvent_t>>(toDuration(timeout_));
    queue->push(event, std::move(what), Clock::now());
  }

  /// Aborts every communicator and ends the program (all ranks); from the
  /// watchdog's thread without static destructors (the main thread may be
  /// blocked in the driver).
  [[noreturn]] void expire(const std::string &message) {
    for (ncclComm_t comm : comms_)
      ncclCommAbort(comm);
    if (std::this_thread::get_id() == thread_.get_id())
      fatalFromThread(message);
    fatal(message);
  }

private:
  void run() {
    cudaSetDevice(device_);
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(100));
      if (stop_)
        break;
      for (ncclComm_t comm : comms_) {
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(comm, &state) == ncclSuccess &&
            state != ncclSuccess && state != ncclInProgress)
          expire("an NCCL collective failed: " + ncclMessage(comm, state) +
                 " (NCCL_DEBUG=WARN says more)");
      }
      bool failed = false;
      auto finished = [&](cudaEvent_t event) {
        cudaError_t status = cudaEventQuery(event);
        failed |= status != cudaSuccess && status != cudaErrorNotReady;
        return status == cudaSuccess;
      };
      auto release = [](cudaEvent_t event) { cudaEventDestroy(event); };
      const CollectiveQueue<cudaEvent_t>::Entry *late = nullptr;
      for (auto &[on, queue] : queues_)
        if (!late)
          late = queue->overdue(Clock::now(), finished, release);
      // A CUDA error is the main thread's to report, at its next check.
      if (failed)
        break;
      if (late)
        expire("the " + late->what + " did not finish within " +
               secondsText(timeout_) +
               " s (--collective-timeout): a rank did not join it (stopped, "
               "or stuck before it); aborting the NCCL communicators");
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<ncclComm_t> comms_;
  std::map<cudaStream_t, std::unique_ptr<CollectiveQueue<cudaEvent_t>>> queues_;
  std::thread thread_;
  double timeout_ = 0;
  int device_ = 0;
  bool stop_ = false;
};

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
      : data_(data), bytes_(bytes),
        // A captured forward's tensors are all on the device (allocations
        // in a capture are the graph's, which the query may not know).
        host_(!capturing(stream()) && onHost(data)) {
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
  NcclCommunicator(int color, std::string group, double timeoutSeconds)
      : group_(std::move(group)), timeout_(timeoutSeconds) {
    int worldRank;
    MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
    MPI_Comm members;
    if (MPI_Comm_split(MPI_COMM_WORLD, color, worldRank, &members) !=
        MPI_SUCCESS)
      fatal("MPI_Comm_split failed");
    MPI_Comm_rank(members, &rank_);
    MPI_Comm_size(members, &size_);
    ncclUniqueId id;
    if (rank_ == 0)
      checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, members);
    MPI_Comm_free(&members);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t status =
        ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
    if (status != ncclSuccess && status != ncclInProgress)
      fatal("ncclCommInitRankConfig of the " + group_ +
            " group failed: " + ncclMessage(nullptr, status));
    Watchdog::instance().attach(comm_, timeout_);
    await(status, "the creation of the " + group_ + " group's communicator",
          /*collective=*/false);
  }
  ~NcclCommunicator() override {
    waitAll();
    // The side stream's collectives end before their communicator does.
    if (sideStream_)
      cudaStreamSynchronize(sideStream_);
    for (ncclComm_t comm : {side_, comm_}) {
      if (!comm)
        continue;
      await(ncclCommFinalize(comm),
            "the end of the " + group_ + " group's communicator",
            /*collective=*/false, comm);
      Watchdog::instance().detach(comm);
      ncclCommDestroy(comm);
    }
    if (sideStream_) {
      cudaStreamDestroy(sideStream_);
      cudaEventDestroy(sideReady_);
      cudaEventDestroy(sideDone_);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allReduceSum(float *data, int64_t count) override {
    allReduce(data, count, ncclFloat, ncclSum, sizeof(float),
              "all-reduce (sum)", "f32");
  }
  void allReduceMax(float *data, int64_t count) override {
    allReduce(data, count, ncclFloat, ncclMax, sizeof(float),
              "all-reduce (max)", "f32");
  }
  void allReduceSumAsync(float *data, int64_t count) override {
    if (onHost(data))
      return allReduceSum(data, count);
    startSide();
    // After the kernels that wrote `data`, on the side stream and its own
    // communicator (two streams' NCCL kernels on one communicator could
    // wait on each other).
    check(cudaEventRecord(sideReady_, stream()), "cudaEventRecord");
    check(cudaStreamWaitEvent(sideStream_, sideReady_, 0),
          "cudaStreamWaitEvent");
    std::string what = describe("bucket all-reduce (sum)", count, "f32");
    await(ncclAllReduce(data, data, count, ncclFloat, ncclSum, side_,
                        sideStream_),
          what, /*collective=*/true, side_, sideStream_);
    sidePending_ = true;
  }
  /// On the side stream and communicator, as the buckets' are: the work
  /// queued after the start on the main stream runs beside the sum.
  void startAllReduceSum(float *data, int64_t count) override {
    waitAll();
    allReduceSumAsync(data, count);
  }
  void finishAllReduceSum() override { waitAll(); }
  const char *allReduceMethod() const override { return "NCCL"; }

  void waitAll() override {
    if (!sidePending_)
      return;
    check(cudaEventRecord(sideDone_, sideStream_), "cudaEventRecord");
    check(cudaStreamWaitEvent(stream(), sideDone_, 0), "cudaStreamWaitEvent");
    sidePending_ = false;
  }
  void allReduceSumF64(double *data, int64_t count) override {
    allReduce(data, count, ncclDouble, ncclSum, sizeof(double),
              "all-reduce (sum)", "f64");
  }
  void allGather(const float *in, float *out, int64_t count) override {
    Staged source(const_cast<float *>(in), count * sizeof(float));
    Staged target(out, count * size_ * sizeof(float), /*copyIn=*/false);
    std::string what = describe("all-gather", count, "f32");
    await(ncclAllGather(source.get(), target.get(), count, ncclFloat, comm_,
                        stream()),
          what);
    target.finish();
  }
  void reduceScatterSum(const float *in, float *out, int64_t count) override {
    Staged source(const_cast<float *>(in), count * size_ * sizeof(float));
    Staged target(out, count * sizeof(float), /*copyIn=*/false);
    std::string what = describe("reduce-scatter (sum)", count * size_, "f32");
    await(ncclReduceScatter(source.get(), target.get(), count, ncclFloat,
                            ncclSum, comm_, stream()),
          what);
    target.finish();
  }
  // Grouped per-rank broadcasts and reductions (NCCL has no v-collectives):
  // one launch, no padding.
  void allGatherUneven(const float *in, float *out,
                       const std::vector<int64_t> &counts) override {
    std::vector<int64_t> offsets = blockOffsets(counts, "allGatherUneven");
    Staged source(const_cast<float *>(in), counts[rank_] * sizeof(float));
    Staged target(out, offsets.back() * sizeof(float), /*copyIn=*/false);
    auto *gathered = static_cast<float *>(target.get());
    ncclResult_t status = ncclGroupStart();
    for (int r = 0; r < size_ && status == ncclSuccess; ++r)
      if (counts[r] > 0)
        status = ncclBroadcast(source.get(), gathered + offsets[r], counts[r],
                               ncclFloat, r, comm_, stream());
    ncclResult_t end = ncclGroupEnd();
    await(status == ncclSuccess ? end : status,
          describe("all-gather (uneven)", offsets.back(), "f32"));
    target.finish();
  }
  void reduceScatterSumUneven(const float *in, float *out,
                              const std::vector<int64_t> &counts) override {
    std::vector<int64_t> offsets =
        blockOffsets(counts, "reduceScatterSumUneven");
    Staged source(const_cast<float *>(in), offsets.back() * sizeof(float));
    Staged target(out, counts[rank_] * sizeof(float), /*copyIn=*/false);
    auto *blocks = static_cast<float *>(source.get());
    ncclResult_t status = ncclGroupStart();
    for (int r = 0; r < size_ && status == ncclSuccess; ++r)
      if (counts[r] > 0)
        status = ncclReduce(blocks + offsets[r], target.get(), counts[r],
                            ncclFloat, ncclSum, r, comm_, stream());
    ncclResult_t end = ncclGroupEnd();
    await(status == ncclSuccess ? end : status,
          describe("reduce-scatter (sum, uneven)", offsets.back(), "f32"));
    target.finish();
  }
  void broadcast(void *data, int64_t bytes, int root) override {
    Staged buffer(data, bytes);
    std::string what = describe("broadcast", bytes, "byte");
    await(ncclBroadcast(buffer.get(), buffer.get(), bytes, ncclUint8, root,
                        comm_, stream()),
          what);
    buffer.finish();
  }

private:
  std::string describe(const char *op, int64_t count, const char *type) const {
    return describeCollective(op, count, type, group_.c_str(), size_);
  }

  void allReduce(void *data, int64_t count, ncclDataType_t type, ncclRedOp_t op,
                 size_t elementBytes, const char *name, const char *typeName) {
    Staged buffer(data, count * elementBytes);
    std::string what = describe(name, count, typeName);
    await(ncclAllReduce(buffer.get(), buffer.get(), count, type, op, comm_,
                        stream()),
          what);
    buffer.finish();
  }

  /// The side stream and its communicator (a split of this one), made at
  /// the first asynchronous all-reduce, which every rank reaches at the
  /// same point of the program.
  void startSide() {
    if (side_)
      return;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t status = ncclCommSplit(comm_, 0, rank_, &side_, &config);
    if (status != ncclSuccess && status != ncclInProgress)
      Watchdog::instance().expire(
          "ncclCommSplit of the " + group_ +
          " group failed: " + ncclMessage(comm_, status));
    Watchdog::instance().attach(side_, timeout_);
    await(status, "the split of the " + group_ + " group's communicator",
          /*collective=*/false, side_);
    ncclResult_t parent = ncclSuccess;
    ncclCommGetAsyncError(comm_, &parent);
    await(parent, "the split of the " + group_ + " group's communicator",
          /*collective=*/false);
    check(cudaStreamCreateWithFlags(&sideStream_, cudaStreamNonBlocking),
          "cudaStreamCreate");
    check(cudaEventCreateWithFlags(&sideReady_, cudaEventDisableTiming),
          "cudaEventCreate");
    check(cudaEventCreateWithFlags(&sideDone_, cudaEventDisableTiming),
          "cudaEventCreate");
  }

  /// A non-blocking call's result on `comm` (default: the main one): polled
  /// until NCCL has done it (or queued it on the stream `on`, default the
  /// rank's), which the other ranks may hold up, at most the timeout. A
  /// collective's end is then handed to the watchdog.
  void await(ncclResult_t status, const std::string &what,
             bool collective = true, ncclComm_t comm = nullptr,
             cudaStream_t on = nullptr) {
    comm = comm ? comm : comm_;
    Clock::time_point start = Clock::now(),
                      deadline = start + toDuration(timeout_);
    while (status == ncclInProgress) {
      Clock::time_point now = Clock::now();
      if (timeout_ > 0 && now > deadline)
        Watchdog::instance().expire(
            what + " did not start within " + secondsText(timeout_) +
            " s (--collective-timeout): a rank did not join it; aborting the "
            "NCCL communicators");
      // Connection set-up takes milliseconds; a rank still reading its
      // weights may take minutes: spin briefly, then sleep between polls.
      if (now - start < std::chrono::milliseconds(10))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ncclCommGetAsyncError(comm, &status) != ncclSuccess)
        break;
    }
    if (status != ncclSuccess)
      Watchdog::instance().expire(what +
                                  " failed: " + ncclMessage(comm, status) +
                                  " (NCCL_DEBUG=WARN says more)");
    if (collective)
      Watchdog::instance().queued(what, on ? on : stream());
  }

  ncclComm_t comm_ = nullptr;
  /// The bucket all-reduces' communicator and stream (allReduceSumAsync),
  /// and the events that order them with the main stream.
  ncclComm_t side_ = nullptr;
  cudaStream_t sideStream_ = nullptr;
  cudaEvent_t sideReady_ = nullptr, sideDone_ = nullptr;
  bool sidePending_ = false;
  std::string group_;
  double timeout_;
  int rank_ = 0, size_ = 1;
};

} // namespace

std::unique_ptr<Communicator>
createNcclCommunicator(int color, const char *group, double timeoutSeconds) {
  return std::make_unique<NcclCommunicator>(color, group, timeoutSeconds);
}

} // namespace cuda
} // namespace tprt
