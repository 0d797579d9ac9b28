//===- Checks.h - operand rules both backends apply --------------*- C++
//-*-===//
//
// What a kernel checks of its operands and the dtype rule, whichever
// backend runs it: shapes (attention, Mamba2, axes, feature ranges), key
// masks, and the reduced-precision rule (TPRT_IN_F32). Host code only; the
// CPU and CUDA kernels include it, neither includes the other's headers.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_COMMON_CHECKS_H
#define TPRT_COMMON_CHECKS_H

#include "tprt/tprt.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>

namespace tprt {

inline void requireF32(const Tensor &t, const char *op, const char *what) {
  if (!t.defined() || t.dtype() != DType::F32)
    fatal(std::string(op) + ": " + what + " must be an f32 tensor, got " +
          (t.defined() ? t.describe() : "nothing"));
  // The CPU kernels read host memory: an op without a CUDA kernel says so
  // instead of dereferencing a device pointer.
  if (t.onGpu())
    fatal(std::string(op) + " has no CUDA kernel yet (" + what + " is " +
          t.describe() + "): run with --device cpu");
}

/// The CPU kernels compute in f32. A program compiled for bf16 or f16
/// (tpc --dtype) hands them activations of that type: such a call runs the
/// f32 kernel on widened operands and rounds its result once to the
/// activation's type (FP32 inside the op, one rounding of its output, as
/// PyTorch's reduced-precision CPU kernels do). `reducedType` is the type of
/// a reduced-precision activation, F32 for any other.
inline DType reducedType(const Tensor &x) {
  return x.defined() && (x.dtype() == DType::BF16 || x.dtype() == DType::F16)
             ? x.dtype()
             : DType::F32;
}
/// The reduced-precision type of either operand of a binary op.
inline DType reducedType(const Tensor &a, const Tensor &b) {
  DType t = reducedType(a);
  return t != DType::F32 ? t : reducedType(b);
}
inline DType reducedTypeOf(const Tensor &x) { return reducedType(x); }
inline DType reducedTypeOf(DType dtype) { return dtype; }
/// An operand as f32 (integer and absent tensors as they are).
inline Tensor widened(const Tensor &t) {
  return reducedType(t) == DType::F32 ? t : t.to(DType::F32);
}
inline Tensor narrowed(const Tensor &t, DType dtype) {
  return t.defined() && t.dtype() == DType::F32 ? t.to(dtype) : t;
}
inline Tensors narrowed(const Tensors &ts, DType dtype) {
  Tensors out;
  for (const Tensor &t : ts)
    out.push_back(narrowed(t, dtype));
  return out;
}
/// A kernel's several results each rounded to the type of the operand it
/// belongs to (a gradient is of its input's type).
inline Tensors narrowedLike(const Tensors &results,
                            std::initializer_list<const Tensor *> operands) {
  Tensors out;
  auto like = operands.begin();
  for (const Tensor &t : results) {
    DType dtype = like != operands.end() && (*like)->defined()
                      ? (*like)->dtype()
                      : DType::F32;
    out.push_back(narrowed(t, dtype == DType::I64 ? DType::F32 : dtype));
    if (like != operands.end())
      ++like;
  }
  return out;
}
/// Runs `call` (the kernel on widened operands) and rounds its result to
/// the type `dtype` (a tensor's reducedType, or a DType) when it is not f32.
#define TPRT_IN_F32(dtype, call)                                               \
  if (::tprt::DType reduced = ::tprt::reducedTypeOf(dtype);                    \
      reduced != ::tprt::DType::F32)                                           \
    return ::tprt::narrowed(call, reduced);

inline void requireSameShape(const Tensor &a, const Tensor &b, const char *op) {
  if (a.shape() != b.shape())
    fatal(std::string(op) + ": shapes differ: " + a.describe() + " vs " +
          b.describe());
}

/// x viewed as [outer, n, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
  AxisView(const Tensor &x, int64_t axis, const char *op) {
    if (axis < 0 || axis >= x.rank())
      fatal(std::string(op) + ": axis " + std::to_string(axis) + " of a rank-" +
            std::to_string(x.rank()) + " tensor");
    for (int64_t d = 0; d < x.rank(); ++d)
      (d < axis ? outer : d == axis ? n : inner) *= x.dim(d);
  }
};

/// The rows of the vocabulary a vocabulary-parallel kernel's table holds on
/// this rank: [start, start + rows) of `vocab`, from even blocks of `held`
/// rows or from the uneven split's `starts` and `sizes` (one per rank).
struct VocabRange {
  int64_t start = 0, rows = 0, vocab = 0;
};
inline VocabRange vocabRangeOf(int64_t rank, int64_t ranks, int64_t held,
                               const std::vector<int64_t> &starts,
                               const std::vector<int64_t> &sizes,
                               const char *op) {
  if (starts.empty() && sizes.empty())
    return {rank * held, held, held * ranks};
  if (starts.size() != static_cast<size_t>(ranks) ||
      sizes.size() != static_cast<size_t>(ranks) || sizes[rank] > held)
    fatal(std::string(op) +
          ": an uneven split needs a start and a size of "
          "at most the table's " +
          std::to_string(held) + " rows for each of " + std::to_string(ranks) +
          " ranks, got " + std::to_string(starts.size()) + " and " +
          std::to_string(sizes.size()));
  VocabRange range{starts[rank], sizes[rank], 0};
  for (size_t r = 0; r < starts.size(); ++r)
    range.vocab = std::max(range.vocab, starts[r] + sizes[r]);
  return range;
}

/// This rank's part of a vocabulary of which it holds `held` entries: all
/// of it, or its block of a vocabulary-parallel split (its range of an
/// uneven one, by `starts` and `sizes`).
inline VocabRange vocabPartOf(Context &ctx, int64_t held, bool vocabParallel,
                              const std::vector<int64_t> &starts,
                              const std::vector<int64_t> &sizes,
                              const char *op) {
  if (!vocabParallel) {
    if (!starts.empty() || !sizes.empty())
      fatal(std::string(op) + ": an uneven vocabulary needs the "
                              "vocabulary-parallel form");
    return {0, held, held};
  }
  return vocabRangeOf(ctx.tp().rank(), ctx.tp().size(), held, starts, sizes,
                      op);
}

/// The shapes and index types of a linear_cross_entropy call: x [B, S, H],
/// the weight [V, H], int64 ids and mask [B, S] (each backend checks the
/// float types and the device).
inline void requireLinearCrossEntropyShapes(const Tensor &x, const Tensor &w,
                                            const Tensor &ids,
                                            const Tensor &mask,
                                            const char *op) {
  if (x.rank() != 3 || w.rank() != 2 || w.dim(1) != x.dim(2) ||
      ids.dtype() != DType::I64 || mask.dtype() != DType::I64 ||
      ids.rank() != 2 || ids.shape() != mask.shape() ||
      ids.dim(0) != x.dim(0) || ids.dim(1) != x.dim(1))
    fatal(std::string(op) + ": x " + x.describe() + ", weight " + w.describe() +
          ", ids " + ids.describe() + " and mask " + mask.describe() +
          " are not [B, S, H], [V, H], int64 [B, S], int64 [B, S]");
}

/// Positions per block of a fused loss: as many as `blockElements` logits
/// of `columns` each hold, but at least 256 (each block reads and writes
/// the whole weight gradient once) and at most `positions`.
inline int64_t lossBlockPositions(int64_t positions, int64_t columns,
                                  int64_t blockElements) {
  constexpr int64_t kMinPositions = 256;
  return std::min(
      positions,
      std::max(kMinPositions, blockElements / std::max<int64_t>(columns, 1)));
}

/// The shared blocks of replica_sum: `rank`'s block and the number of
/// blocks, from one block number per rank (numbered from 0).
struct ReplicaBlocks {
  int64_t mine = 0, count = 0;
};
inline ReplicaBlocks replicaBlocksOf(int64_t rank, int64_t ranks,
                                     const std::vector<int64_t> &blocks) {
  ReplicaBlocks r;
  bool numbered = blocks.size() == static_cast<size_t>(ranks);
  for (int64_t block : blocks) {
    numbered &= block >= 0 && block <= r.count;
    r.count = std::max(r.count, block + 1);
  }
  if (!numbered)
    fatal("replica_sum: " + std::to_string(blocks.size()) +
          " block numbers for " + std::to_string(ranks) +
          " ranks; one per rank, numbered from 0 in order of first appearance");
  r.mine = blocks[rank];
  return r;
}

/// The ranks' element counts of an uneven collective on `x`: their sum
/// and the largest.
struct UnevenSizes {
  int64_t total = 0, largest = 0;
};
/// Checks one count of at least 1 per rank, and that `x`'s axis (`n`
/// long) is their largest (`whole` false: `x` holds padded blocks, an
/// all-gather's input) or their sum (`whole`: a reduce-scatter's input).
inline UnevenSizes requireUnevenSizes(const Tensor &x, int64_t n, int64_t ranks,
                                      const std::vector<int64_t> &sizes,
                                      bool whole, const char *op) {
  UnevenSizes counted;
  for (int64_t s : sizes) {
    if (s < 1)
      fatal(std::string(op) + ": a rank's size must be at least 1");
    counted.total += s;
    counted.largest = std::max(counted.largest, s);
  }
  if (sizes.size() != static_cast<size_t>(ranks) ||
      (whole ? counted.total : counted.largest) != n)
    fatal(std::string(op) + ": " + std::to_string(sizes.size()) +
          " sizes for " + std::to_string(ranks) + " ranks, " +
          (whole ? "whose sum" : "the largest of which") +
          " must be the axis of " + x.describe());
  return counted;
}

/// This rank's range of an uneven slice of `x` along an axis `n` long:
/// checked; its start, size and the block (the largest size).
struct UnevenRange {
  int64_t start = 0, size = 0, extent = 0;
};
inline UnevenRange requireUnevenRange(const Tensor &x, int64_t n, int64_t rank,
                                      int64_t ranks,
                                      const std::vector<int64_t> &starts,
                                      const std::vector<int64_t> &sizes,
                                      const char *op) {
  UnevenRange range;
  bool ok = starts.size() == static_cast<size_t>(ranks) &&
            sizes.size() == static_cast<size_t>(ranks);
  for (size_t r = 0; ok && r < sizes.size(); ++r) {
    ok = starts[r] >= 0 && sizes[r] >= 1 && starts[r] + sizes[r] <= n;
    range.extent = std::max(range.extent, sizes[r]);
  }
  if (!ok)
    fatal(std::string(op) + ": no range of " + std::to_string(ranks) +
          " ranks fits the axis of " + x.describe());
  range.start = starts[rank];
  range.size = sizes[rank];
  return range;
}

/// Features [offset, offset + size) of `x`'s rows (tp.feature_slice and
/// its gradient): the number of rows; a range past the row is fatal.
inline int64_t requireFeatureRange(const Tensor &x, int64_t offset,
                                   int64_t size, int64_t width,
                                   const char *op) {
  if (x.rank() < 1 || offset < 0 || size < 0 || offset > width - size)
    fatal(std::string(op) + ": features [" + std::to_string(offset) + ", " +
          std::to_string(offset + size) + ") of rows of " +
          std::to_string(width) + " (" + x.describe() + ")");
  int64_t rows = 1;
  for (int d = 0; d + 1 < x.rank(); ++d)
    rows *= x.dim(d);
  return rows;
}

/// What a reduce-scatter's indivisible dimension usually means.
constexpr const char *kSequenceHint =
    " (with sequence parallelism the sequence length must be a multiple of "
    "tp)";

/// Dimension `axis` of `x` splits into one block per rank; `hint` ends the
/// message when it does not.
inline void requireSplittable(const Tensor &x, const AxisView &v, int64_t axis,
                              int64_t ranks, const char *op,
                              const char *hint = "") {
  if (v.n % ranks)
    fatal(std::string(op) + ": dimension " + std::to_string(axis) + " of " +
          x.describe() + " is not divisible by " + std::to_string(ranks) +
          " ranks" + hint);
}

/// A key mask's elements after checking it is int64 [batch, seq] on
/// `device` (`seqName` names the sequence in the message); null when it is
/// undefined (no mask).
inline const int64_t *checkedKeyMask(const Tensor &keyMask, int64_t batch,
                                     int64_t seq, Device device, const char *op,
                                     const char *seqName) {
  if (!keyMask.defined())
    return nullptr;
  if (keyMask.dtype() != DType::I64 || keyMask.device() != device ||
      keyMask.rank() != 2 || keyMask.dim(0) != batch || keyMask.dim(1) != seq)
    fatal(std::string(op) + ": key mask " + keyMask.describe() +
          " is not int64 [batch, " + seqName + "]");
  return keyMask.i64();
}

/// attention_grad's saved forward (attention_lse's output and log-sum-exp),
/// which stands for the forward the backward would otherwise run again:
/// both or neither, the output of q's shape, the log-sum-exp f32
/// [batch, seq_q, heads]. Whether they are given; types and devices of the
/// output are the backend's to check.
inline bool savedAttentionGiven(const Tensor &q, int64_t heads,
                                const Tensor &out, const Tensor &lse,
                                const char *op) {
  if (!out.defined() && !lse.defined())
    return false;
  if (!out.defined() || out.shape() != q.shape() || !lse.defined() ||
      lse.dtype() != DType::F32 ||
      lse.shape() != std::vector<int64_t>{q.rank() == 3 ? q.dim(0) : -1,
                                          q.rank() == 3 ? q.dim(1) : -1, heads})
    fatal(std::string(op) + ": the forward's output " +
          (out.defined() ? out.describe() : "(none)") + " and log-sum-exp " +
          (lse.defined() ? lse.describe() : "(none)") + " are not q's " +
          q.describe() + " and f32 [batch, seq_q, heads] of " +
          std::to_string(heads) + " heads");
  return true;
}

/// The shapes of an attention call (forward or backward), checked: q
/// [B, Sq, heads * headDim], k and v [B, Skv, kvHeads * headDim], the key
/// mask int64 [B, Skv] or undefined, all on `device`, q, k and v of
/// `dtype`. Queries are the last
/// Sq positions of the keys (Sq == Skv without a cache).
struct AttentionShape {
  int64_t batch, sq, skv, group, queryOffset;
  const int64_t *mask = nullptr;

  AttentionShape(const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor &keyMask, int64_t heads, int64_t kvHeads,
                 int64_t headDim, const char *op, Device device = Device::CPU,
                 DType dtype = DType::F32) {
    for (auto [t, what] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}})
      if (!t->defined() || t->dtype() != dtype || t->device() != device)
        fatal(std::string(op) + ": " + what + " must be a tensor of " +
              dtypeName(dtype) + " on " + deviceName(device) + ", got " +
              (t->defined() ? t->describe() : "nothing"));
    if (q.rank() != 3 || k.rank() != 3 || v.rank() != 3 ||
        q.dim(2) != heads * headDim || k.dim(2) != kvHeads * headDim ||
        v.shape() != k.shape() || k.dim(0) != q.dim(0) || kvHeads <= 0 ||
        heads % kvHeads != 0)
      fatal(std::string(op) + ": q " + q.describe() + ", k " + k.describe() +
            ", v " + v.describe() + " do not match " + std::to_string(heads) +
            " heads, " + std::to_string(kvHeads) + " KV heads of " +
            std::to_string(headDim));
    batch = q.dim(0);
    sq = q.dim(1);
    skv = k.dim(1);
    group = heads / kvHeads;
    queryOffset = skv - sq;
    mask = checkedKeyMask(keyMask, batch, skv, device, op, "seq_kv");
    // A mask that hides no key is none: the kernels skip its test per
    // score (a training batch without padding).
    if (mask && device == Device::CPU &&
        std::all_of(mask, mask + batch * skv, [](int64_t m) { return m != 0; }))
      mask = nullptr;
  }
};

/// The sizes of a mamba2_mixer call (forward, or backward with `dout`),
/// checked: x [batch, seq, hidden] and the parameters of `heads` heads of
/// `headDim` in `groups` groups of state `state` and a convolution of
/// `kernel`, all f32 on `device`; the key mask int64 [batch, seq] or
/// undefined; dout, when defined, x's shape.
struct Mamba2Shape {
  int64_t batch = 0, seq = 0, hidden = 0, heads, headDim, groups, state, kernel,
          inner, conv, proj, tokens = 0, groupSize = 0;
  const int64_t *mask = nullptr;

  Mamba2Shape(const char *op, const Tensor &x, const Tensor &inProj,
              const Tensor &convWeight, const Tensor &convBias,
              const Tensor &dtBias, const Tensor &aLog, const Tensor &d,
              const Tensor &normWeight, const Tensor &outProj,
              const Tensor &keyMask, const Tensor &dout, int64_t heads,
              int64_t headDim, int64_t groups, int64_t state, int64_t kernel,
              Device device = Device::CPU)
      : heads(heads), headDim(headDim), groups(groups), state(state),
        kernel(kernel), inner(heads * headDim),
        conv(inner + 2 * groups * state), proj(inner + conv + heads) {
    for (const Tensor *t : {&x, &inProj, &convWeight, &convBias, &dtBias, &aLog,
                            &d, &normWeight, &outProj})
      if (!t->defined() || t->dtype() != DType::F32 || t->device() != device)
        fatal(std::string(op) + ": an operand must be an f32 tensor on " +
              deviceName(device) + ", got " +
              (t->defined() ? t->describe() : "nothing"));
    if (x.rank() != 3 || inProj.rank() != 2 || outProj.rank() != 2 ||
        inProj.dim(0) != proj || convWeight.numel() != conv * kernel ||
        convBias.numel() != conv || dtBias.numel() != heads ||
        aLog.numel() != heads || d.numel() != heads ||
        normWeight.numel() != inner || outProj.dim(1) != inner || groups <= 0 ||
        heads % groups != 0 ||
        (dout.defined() &&
         (dout.shape() != x.shape() || dout.dtype() != DType::F32 ||
          dout.device() != device)))
      fatal(std::string(op) + ": parameters do not match " +
            std::to_string(heads) + " heads of " + std::to_string(headDim) +
            ", " + std::to_string(groups) + " groups of state " +
            std::to_string(state));
    batch = x.dim(0);
    seq = x.dim(1);
    hidden = x.dim(2);
    tokens = batch * seq;
    groupSize = inner / groups;
    mask = checkedKeyMask(keyMask, batch, seq, device, op, "seq");
  }
  /// Whether token `token` (batch row * seq + position) is not padding
  /// (host masks only).
  bool kept(int64_t token) const { return !mask || mask[token] != 0; }
};

} // namespace tprt

#endif // TPRT_COMMON_CHECKS_H
