//===- SharedMemoryAllReduce.cpp - all-reduce through one node's memory ---===//

#include "comm/SharedMemoryAllReduce.h"

#include "tprt/tprt.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <new>
#include <sched.h>

namespace tprt::comm {

/// One rank's part of the window. The sequence number sits on a cache line
/// of its own: the other ranks poll it while this rank writes its pieces.
struct SharedMemoryAllReduce::Slot {
  alignas(64) std::atomic<uint64_t> published;
  alignas(64) float piece[2][kPieceFloats];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the sequence numbers are shared between processes");

std::unique_ptr<SharedMemoryAllReduce>
SharedMemoryAllReduce::create(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size < 2)
    return nullptr;
  // Open MPI places a rank's part of the window 8-byte aligned: room to
  // align the slot.
  constexpr MPI_Aint kWindowBytes = sizeof(Slot) + alignof(Slot);
  // Ranks keep their order in `node` (key 0, ties broken by rank in comm).
  MPI_Comm node;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                          &node) != MPI_SUCCESS)
    fatal("MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed");
  int nodeSize;
  MPI_Comm_size(node, &nodeSize);
  int ok = nodeSize == size;
  MPI_Win window = MPI_WIN_NULL;
  if (ok) {
    // A failure to map the window (e.g. /dev/shm too small) falls back to
    // MPI on every rank rather than aborting.
    MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN);
    MPI_Info info;
    MPI_Info_create(&info);
    // Each rank's slot on pages of its own (its NUMA node's, first touched
    // by the rank that writes it).
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    void *base = nullptr;
    ok = MPI_Win_allocate_shared(kWindowBytes, 1, info, node, &base, &window) ==
         MPI_SUCCESS;
    MPI_Info_free(&info);
  }
  MPI_Comm_free(&node);
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
  // A window only some ranks made is left to MPI_Finalize: freeing it is
  // collective, and the ranks that failed would never join.
  if (!all)
    return nullptr;
  std::vector<Slot *> slots(size);
  for (int q = 0; q < size; ++q) {
    MPI_Aint bytes;
    int unit;
    void *base;
    MPI_Win_shared_query(window, q, &bytes, &unit, &base);
    size_t space = bytes;
    if (bytes < kWindowBytes ||
        !std::align(alignof(Slot), sizeof(Slot), base, space))
      fatal("the shared all-reduce window of rank " + std::to_string(q) +
            " is " + std::to_string(bytes) + " bytes, less than a slot");
    slots[q] = static_cast<Slot *>(base);
  }
  new (&slots[rank]->published) std::atomic<uint64_t>(0);
  MPI_Barrier(comm); // every slot's sequence number is 0 before any waits
  return std::unique_ptr<SharedMemoryAllReduce>(
      new SharedMemoryAllReduce(window, std::move(slots), rank));
}

SharedMemoryAllReduce::SharedMemoryAllReduce(MPI_Win window,
                                             std::vector<Slot *> slots,
                                             int rank)
    : window_(window), slots_(std::move(slots)), sources_(slots_.size()),
      rank_(rank) {}

SharedMemoryAllReduce::~SharedMemoryAllReduce() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Win_free(&window_);
}

/// Spins a short while, then yields: with more ranks than cores (mpirun
/// --oversubscribe) the rank being waited for needs this one's core.
static void waitFor(const std::atomic<uint64_t> &published, uint64_t value) {
  for (int spins = 0; published.load(std::memory_order_acquire) < value;)
    if (spins < 256)
      ++spins;
    else
      sched_yield();
}

/// out = ((s[0] + s[1]) + s[2]) + ..., the same order on every rank, in
/// blocks that stay in the cache between the passes.
static void sumSlots(float *__restrict out, const float *const *sources,
                     int count, int64_t n) {
  constexpr int64_t kBlock = 2048;
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t len = std::min(kBlock, n - b);
    const float *__restrict a = sources[0] + b;
    const float *__restrict c = sources[1] + b;
    float *__restrict o = out + b;
    for (int64_t i = 0; i < len; ++i)
      o[i] = a[i] + c[i];
    for (int q = 2; q < count; ++q) {
      const float *__restrict s = sources[q] + b;
      for (int64_t i = 0; i < len; ++i)
        o[i] += s[i];
    }
  }
}

void SharedMemoryAllReduce::sum(float *data, int64_t count) {
  start(data, count);
  finish();
}

void SharedMemoryAllReduce::start(float *data, int64_t count) {
  for (int64_t done = 0; done < count; done += kPieceFloats) {
    int64_t n = std::min(kPieceFloats, count - done);
    uint64_t sequence = ++sequence_;
    std::memcpy(slots_[rank_]->piece[sequence & 1], data + done,
                size_t(n) * sizeof(float));
    slots_[rank_]->published.store(sequence, std::memory_order_release);
    pendingData_ = data + done;
    pendingCount_ = n;
    if (done + n < count)
      finish();
  }
}

void SharedMemoryAllReduce::finish() {
  if (pendingCount_ == 0)
    return;
  int size = static_cast<int>(slots_.size());
  uint64_t sequence = sequence_;
  int parity = static_cast<int>(sequence & 1);
  for (int q = 0; q < size; ++q) {
    if (q != rank_)
      waitFor(slots_[q]->published, sequence);
    sources_[q] = slots_[q]->piece[parity];
  }
  sumSlots(pendingData_, sources_.data(), size, pendingCount_);
  pendingData_ = nullptr;
  pendingCount_ = 0;
}

} // namespace tprt::comm
