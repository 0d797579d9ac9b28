//===- Watchdog.h - how long a rank has waited on a collective --*- C++ -*-===//
//
// NCCL collectives run on the GPU in stream order, and one whose peer never
// joins spins there for ever, with the host blocked at its next wait. The
// backend records an event after each collective it queues and a thread
// polls them (nccl.cpp): the oldest unfinished one has been waiting since
// it was queued or since the one before it finished, whichever is later
// (the GPU may reach it long after the host queued it), and past the
// timeout the program stops, naming it. The bookkeeping is here, free of
// CUDA, so that the host tests it (runtime/test/WatchdogTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_WATCHDOG_H
#define TPRT_CUDA_WATCHDOG_H

#include <chrono>
#include <deque>
#include <string>
#include <utility>

namespace tprt {
namespace cuda {

/// Collectives in the order the stream runs them, each with an `Event`
/// (cudaEvent_t on the GPU) that says whether it has finished.
template <typename Event> class CollectiveQueue {
public:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    Event event;
    std::string what;
    /// Since when the stream has been waiting for it.
    Clock::time_point since;
  };

  /// A timeout of zero or less never expires.
  explicit CollectiveQueue(Clock::duration timeout) : timeout_(timeout) {}

  void push(Event event, std::string what, Clock::time_point now) {
    entries_.push_back({std::move(event), std::move(what), now});
  }

  /// Drops the finished collectives at the front (`finished(event)`),
  /// handing each event to `release`, and returns the oldest unfinished
  /// one when it has waited longer than the timeout, else null.
  template <typename Finished, typename Release>
  const Entry *overdue(Clock::time_point now, Finished finished,
                       Release release) {
    while (!entries_.empty() && finished(entries_.front().event)) {
      release(entries_.front().event);
      entries_.pop_front();
      // The stream reached the next one no earlier than now.
      if (!entries_.empty() && entries_.front().since < now)
        entries_.front().since = now;
    }
    if (entries_.empty() || timeout_ <= Clock::duration::zero() ||
        now - entries_.front().since <= timeout_)
      return nullptr;
    return &entries_.front();
  }

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

private:
  std::deque<Entry> entries_;
  Clock::duration timeout_;
};

/// A description of a collective for the timeout's message: "all-reduce of
/// 1024 f32 elements on the tp group (2 ranks)".
inline std::string describeCollective(const char *op, long long count,
                                      const char *type, const char *group,
                                      int ranks) {
  return std::string(op) + " of " + std::to_string(count) + " " + type +
         " elements on the " + group + " group (" + std::to_string(ranks) +
         " ranks)";
}

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_WATCHDOG_H
