//===- GraphCache.h - which calls to capture and replay ---------*- C++ -*-===//
//
// The bookkeeping of CUDA graphs (cuda/graphs.cpp), apart from CUDA so that
// the host tests check it: per key (the call's input shapes and types) the
// first call runs eagerly (first-use work, such as parameter uploads and
// cuDNN's plans, stays out of the graph), the second is captured, and the
// later ones replay. A capture that fails leaves the key eager for good, its
// reason said once (the graph of a key that fails later is dropped). At most
// `maxGraphs` keys replay graphs: a key warmed up after that many were
// captured is refused once and runs eagerly from then on.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_COMMON_GRAPHCACHE_H
#define TPRT_COMMON_GRAPHCACHE_H

#include <map>
#include <set>
#include <string>
#include <utility>

namespace tprt {

template <typename Graph> class GraphCache {
public:
  /// WarmUp: the key's first call, run eagerly (the next is captured).
  /// Refuse: run eagerly, now and later, since `maxGraphs` keys replay
  /// graphs already (said by the caller: returned once per key).
  enum class Action { WarmUp, Capture, Replay, RunEagerly, Refuse };

  explicit GraphCache(size_t maxGraphs = 8) : maxGraphs_(maxGraphs) {}

  size_t maxGraphs() const { return maxGraphs_; }

  /// What to do with a call of `key` now.
  Action next(const std::string &key) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      entries_[key].state = State::WarmingUp;
      return Action::WarmUp;
    }
    switch (it->second.state) {
    case State::WarmingUp:
      if (capturedCount() < maxGraphs_)
        return Action::Capture;
      it->second.state = State::Failed;
      return Action::Refuse;
    case State::Captured:
      return Action::Replay;
    case State::Failed:
      return Action::RunEagerly;
    }
    return Action::RunEagerly;
  }

  /// `key`'s capture succeeded: later calls replay `graph`.
  void captured(const std::string &key, Graph graph) {
    Entry &e = entries_[key];
    e.state = State::Captured;
    e.graph = std::move(graph);
  }

  /// `key`'s capture failed for `why`: later calls run eagerly. True the
  /// first time a capture failed for this reason (then say it).
  bool failed(const std::string &key, const std::string &why) {
    Entry &e = entries_[key];
    e.state = State::Failed;
    e.graph = Graph{};
    return said_.insert(why).second;
  }

  /// The captured call of a key next() said to replay.
  Graph &replay(const std::string &key) { return entries_.at(key).graph; }

  size_t capturedCount() const {
    size_t n = 0;
    for (const auto &[key, e] : entries_)
      n += e.state == State::Captured;
    return n;
  }

private:
  enum class State { WarmingUp, Captured, Failed };
  struct Entry {
    State state = State::WarmingUp;
    Graph graph{};
  };
  size_t maxGraphs_;
  std::map<std::string, Entry> entries_;
  std::set<std::string> said_;
};

} // namespace tprt

#endif // TPRT_COMMON_GRAPHCACHE_H
