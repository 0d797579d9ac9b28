//===- SharedMemoryAllReduce.h - all-reduce through one node's memory -----===//
//
// The activations' all-reduces of a tensor-parallel forward (two per layer)
// are 0.25 to 1 MiB, the replica-gradient buckets up to 256 MiB. Open
// MPI's MPI_Allreduce exchanges them as point-to-point messages through
// its shared-memory transport, then sums what it received. Like
// the CPU backends of DeepSpeed and vLLM, ranks that share a node instead
// publish their contribution in a window of MPI-3 shared memory and every
// rank sums all of them itself, which is cheaper for both sizes (the
// measurements are in docs/runtime.md).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_COMM_SHAREDMEMORYALLREDUCE_H
#define TPRT_COMM_SHAREDMEMORYALLREDUCE_H

#include <cstdint>
#include <memory>
#include <mpi.h>
#include <vector>

namespace tprt::comm {

/// In-place sum over the ranks of `comm` through a shared window: each
/// rank copies its contribution (in pieces of at most kPieceFloats) into
/// its slot, publishes the piece's sequence number, waits for every other
/// rank's, and sums the slots in rank order, so every rank gets the same
/// bits. Two slots per rank alternate: a rank rewrites a slot only after
/// every rank has published the next piece, i.e. finished reading it.
class SharedMemoryAllReduce {
public:
  /// 1 MiB: the forward's largest activation all-reduce (batch 4) in one
  /// piece, 2 MiB of /dev/shm per rank, and a tp=8 sum's eight pieces in
  /// the cache. 256 MiB buckets run no slower than in larger pieces
  /// (bench/gradsync).
  static constexpr int64_t kPieceFloats = int64_t(1) << 18;

  /// Collective over `comm`. Null on every rank unless all of them share
  /// one node and the window could be made on each (they agree).
  static std::unique_ptr<SharedMemoryAllReduce> create(MPI_Comm comm);
  ~SharedMemoryAllReduce();

  /// Collective: every rank passes the same count, in the same order of
  /// calls as the communicator's other collectives.
  void sum(float *data, int64_t count);
  /// sum in two halves: start sums every piece but the last and publishes
  /// that one; finish waits for the other ranks' last piece and sums it.
  /// Between them the rank works on while the others catch up; nothing
  /// reads or writes `data`, and no other sum or start comes first.
  void start(float *data, int64_t count);
  void finish();

private:
  struct Slot;
  SharedMemoryAllReduce(MPI_Win window, std::vector<Slot *> slots, int rank);

  MPI_Win window_;
  std::vector<Slot *> slots_;
  /// The pieces a sum reads (kept: no allocation per all-reduce).
  std::vector<const float *> sources_;
  int rank_;
  uint64_t sequence_ = 0;
  /// The piece start published and finish sums (count 0: none).
  float *pendingData_ = nullptr;
  int64_t pendingCount_ = 0;
};

} // namespace tprt::comm

#endif // TPRT_COMM_SHAREDMEMORYALLREDUCE_H
