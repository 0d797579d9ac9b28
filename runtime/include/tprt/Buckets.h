//===- Buckets.h - packing replica gradients into buckets -------*- C++ -*-===//
//
// Header-only and dependency-free: the compiler (tp-replica-grad-sync) plans
// the buckets of a program with this function, and bench/gradsync plans
// its synthetic gradient sets with the same one.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_BUCKETS_H
#define TPRT_BUCKETS_H

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace tprt {

/// Greedy buckets over gradients of `bytes` each, in the order given: a
/// gradient that would take the open bucket past `limit` starts the next
/// one, so a gradient larger than `limit` is a bucket of its own. Returns
/// [begin, end) index ranges.
inline std::vector<std::pair<size_t, size_t>>
planBuckets(const std::vector<int64_t> &bytes, int64_t limit) {
  std::vector<std::pair<size_t, size_t>> buckets;
  size_t begin = 0;
  int64_t filled = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i > begin && filled + bytes[i] > limit) {
      buckets.push_back({begin, i});
      begin = i;
      filled = 0;
    }
    filled += bytes[i];
  }
  if (begin < bytes.size())
    buckets.push_back({begin, bytes.size()});
  return buckets;
}

/// The elements of a bucket of `elements` gradients sharded over `shards`
/// data-parallel ranks (--zero): padded at the end to a multiple of
/// lcm(shards, 128), as Megatron-LM's distributed optimizer pads its
/// buckets, so that every rank owns an equal, 128-element aligned run
/// (rank r: [r * padded / shards, (r + 1) * padded / shards)).
inline int64_t shardedBucketElements(int64_t elements, int64_t shards) {
  int64_t multiple = std::lcm(shards, int64_t{128});
  return (elements + multiple - 1) / multiple * multiple;
}

} // namespace tprt

#endif // TPRT_BUCKETS_H
