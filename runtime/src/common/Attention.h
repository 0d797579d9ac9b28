//===- Attention.h - which keys a query sees -------------------*- C++ -*-===//
//
// tp.attention's visibility rule (causal, sliding window; the key mask is a
// lookup) as plain functions that compile for host and device: both
// backends' kernels use them, and the host unit tests (runtime/test/
// CudaTilingTest.cpp) check them against the rule written out without a
// GPU.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_COMMON_ATTENTION_H
#define TPRT_COMMON_ATTENTION_H

#include <cstdint>

#ifdef __CUDACC__
#define TPRT_HOST_DEVICE __host__ __device__
#else
#define TPRT_HOST_DEVICE
#endif

namespace tprt {

/// Keys per tile: the GPU kernel's (one per lane of a warp), to which both
/// kernels round the first key they visit.
constexpr int kAttentionKeyTile = 32;

/// Whether the query at key position `pos` sees key `j` (the causal and
/// window masks; the key mask is a lookup).
TPRT_HOST_DEVICE inline bool attentionVisible(int64_t pos, int64_t j,
                                              bool causal, int64_t window) {
  return (!causal || j <= pos) && (window <= 0 || pos - j < window);
}

/// Keys [begin, end).
struct KeyRange {
  int64_t begin, end;
};
/// The keys [begin, end) the query at position `pos` sees among skv keys
/// (attentionVisible's keys, a contiguous range; the key mask aside): the
/// CPU kernel masks a tile's row outside it with two fills.
TPRT_HOST_DEVICE inline KeyRange
attentionVisibleKeys(int64_t pos, int64_t skv, bool causal, int64_t window) {
  int64_t end = causal ? (pos + 1 < skv ? pos + 1 : skv) : skv;
  int64_t begin = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
  if (end < begin)
    end = begin;
  return {begin, end};
}

/// Whether the query at position `pos` sees some key: one of
/// attentionVisibleKeys' keys that `maskRow` (its batch row of the key mask;
/// null: none masked) keeps. tp.attention gives a query that sees none
/// zeros; cuDNN's masked-by-bias rows are zeroed after it by this rule.
TPRT_HOST_DEVICE inline bool attentionSeesKey(int64_t pos, int64_t skv,
                                              bool causal, int64_t window,
                                              const int64_t *maskRow) {
  KeyRange range = attentionVisibleKeys(pos, skv, causal, window);
  if (!maskRow)
    return range.begin < range.end;
  for (int64_t j = range.begin; j < range.end; ++j)
    if (maskRow[j] != 0)
      return true;
  return false;
}

/// The keys [begin, end) that queries at positions [firstPos, lastPos] may
/// see, `begin` rounded down to a tile: the kernel visits only these tiles.
TPRT_HOST_DEVICE inline KeyRange attentionKeyRange(int64_t firstPos,
                                                   int64_t lastPos, int64_t skv,
                                                   bool causal,
                                                   int64_t window) {
  int64_t end = causal ? (lastPos + 1 < skv ? lastPos + 1 : skv) : skv;
  int64_t begin = 0;
  if (window > 0 && firstPos - window + 1 > 0)
    begin = firstPos - window + 1;
  begin -= begin % kAttentionKeyTile;
  if (end < begin)
    end = begin;
  return {begin, end};
}

} // namespace tprt

#endif // TPRT_COMMON_ATTENTION_H
