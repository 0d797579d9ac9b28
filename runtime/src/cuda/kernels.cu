//===- kernels.cu - CUDA kernels of the forward tp ops --------------------===//
//
// f32 compute, the CPU kernels' arithmetic in the same order where it
// matters (RoPE tables, RMS norm's double sum of squares, soft-capping
// before the masks). Attention is one tiled kernel with an online softmax:
// a warp per query row, key/value tiles in shared memory, no [seq, seq]
// scores in global memory.
//
//===----------------------------------------------------------------------===//

#include "Elements.cuh"
#include "Map.cuh"
#include "Runtime.h"
#include "Tiling.h"
#include "common/Checks.h"
#include "common/Rotary.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

namespace tprt {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

/// Row i of `out` is row ids[i] - start of `table` when that is one of its
/// `rows`, else zeros; an id outside [0, vocab) records the smallest such i
/// in `firstBad`. `T` is the table's element, copied as is (float, or the
/// 16 bits of a bf16 / f16 program's table, whose zero is all zero bits).
template <typename T>
__global__ void embeddingKernel(const int64_t *ids, const T *table, T *out,
                                int64_t n, int64_t hidden, int64_t start,
                                int64_t rows, int64_t vocab,
                                unsigned long long *firstBad) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    int64_t id = ids[i];
    if ((id < 0 || id >= vocab) && threadIdx.x == 0)
      atomicMin(firstBad, static_cast<unsigned long long>(i));
    bool mine = id >= start && id < start + rows;
    const T *t = table + (mine ? id - start : 0) * hidden;
    T *o = out + i * hidden;
    for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x)
      o[j] = mine ? t[j] : T(0);
  }
}

Tensor embed(Context &ctx, const Tensor &ids, const Tensor &table,
             bool vocabParallel, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &sizes, const char *op) {
  requireGpu(ids, DType::I64, op, "the ids");
  if (!table.defined() || table.dtype() == DType::I64 || !table.onGpu() ||
      table.rank() != 2)
    fatal(std::string(op) +
          ": the table must be a [vocab, hidden] float tensor on the GPU, "
          "got " +
          (table.defined() ? table.describe() : "nothing"));
  int64_t hidden = table.dim(1), n = ids.numel();
  VocabRange range = vocabParallel
                         ? vocabRangeOf(ctx.tp().rank(), ctx.tp().size(),
                                        table.dim(0), starts, sizes, op)
                         : VocabRange{0, table.dim(0), table.dim(0)};
  int64_t start = range.start, rows = range.rows, vocab = range.vocab;
  std::vector<int64_t> shape = ids.shape();
  shape.push_back(hidden);
  // Rows are copied in the table's type (a bf16 program's embedding is
  // bf16), as on the CPU.
  Tensor out = Tensor::uninitialized(table.dtype(), shape, Device::CUDA);
  if (n == 0)
    return out;
  Tensor firstBad = Tensor::uninitialized(DType::I64, {1}, Device::CUDA);
  memset(firstBad.raw(), 0xff, sizeof(int64_t));
  auto *bad = static_cast<unsigned long long *>(firstBad.raw());
  if (table.dtype() == DType::F32)
    embeddingKernel<<<gridBlocks(n, 1), kThreads, 0, stream()>>>(
        ids.i64(), table.f32(), out.f32(), n, hidden, start, rows, vocab, bad);
  else
    embeddingKernel<<<gridBlocks(n, 1), kThreads, 0, stream()>>>(
        ids.i64(), static_cast<const uint16_t *>(table.raw()),
        static_cast<uint16_t *>(out.raw()), n, hidden, start, rows, vocab, bad);
  checkLaunch("embedding");
  // One small copy per embedding (once per forward pass): a bad id is an
  // error naming its position, as on the CPU. A CUDA graph's replays do
  // not check (graphs.cpp: --bench replays the ids its eager call checked).
  if (capturing(stream()))
    return out;
  unsigned long long position = 0;
  copy(&position, Device::CPU, bad, Device::CUDA, sizeof(position));
  if (position != ULLONG_MAX) {
    int64_t id = 0;
    copy(&id, Device::CPU, ids.i64() + position, Device::CUDA, sizeof(id));
    fatal("embedding: token id " + std::to_string(id) + " at position " +
          std::to_string(position) + " is outside the vocabulary [0, " +
          std::to_string(vocab) + ")");
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <Unary op> __device__ float applyUnary(float v, float p) {
  if (op == Unary::Silu)
    return v / (1.0f + expf(-v));
  if (op == Unary::Gelu)
    return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
  if (op == Unary::GeluTanh)
    return 0.5f * v *
           (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  if (op == Unary::ReluSquared)
    return v > 0 ? v * v : 0.0f;
  if (op == Unary::Scale)
    return v * p;
  return p * tanhf(v / p); // Softcap
}

template <Unary op> struct UnaryFn {
  float p;
  __device__ float operator()(float v, float) const {
    return applyUnary<op>(v, p);
  }
};

template <Binary op> struct BinaryFn {
  __device__ float operator()(float a, float b) const {
    return op == Binary::Add ? a + b : a * b;
  }
};

/// silu(p) * o, silu's and mul's arithmetic in f32 (rounded once).
struct SiluMulFn {
  __device__ float operator()(float p, float o) const {
    return applyUnary<Unary::Silu>(p, 0.0f) * o;
  }
};

/// A float type's elements as another's (Elements.cuh).
template <typename From, typename To>
__global__ void convertKernel(const From *x, To *out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = fromFloat<To>(toFloat(x[i]));
}

template <typename From, typename To>
void launchConvert(const void *x, void *out, int64_t n) {
  convertKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
      static_cast<const From *>(x), static_cast<To *>(out), n);
  checkLaunch("dtype conversion");
}

/// out[i] += bias[i % features] in f32, rounded once to out's type (the
/// bias of out's type or f32).
template <typename T, typename B>
__global__ void addBiasKernel(T *out, const B *bias, int64_t n,
                              int64_t features) {
  TPRT_GRID_STRIDE(i, n) {
    out[i] = fromFloat<T>(toFloat(out[i]) + toFloat(bias[i % features]));
  }
}

//===----------------------------------------------------------------------===//
// RMS norm and RoPE
//===----------------------------------------------------------------------===//

/// 1 / sqrt(mean + eps) of a row of `n` elements from each thread's part
/// of its sum of squares (in double, as the CPU kernel), in every thread of
/// the block: one reduction order for every RMS-norm kernel.
__device__ float inverseRms(double squares, int64_t n, float eps) {
  __shared__ double partial[kThreads / 32];
  __shared__ float inverse;
  for (int off = 16; off; off >>= 1)
    squares += __shfl_xor_sync(kFullMask, squares, off);
  if (threadIdx.x % 32 == 0)
    partial[threadIdx.x / 32] = squares;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int i = 0; i < kThreads / 32; ++i)
      total += partial[i];
    inverse = 1.0f / sqrtf(static_cast<float>(total / n) + eps);
  }
  __syncthreads();
  return inverse;
}

/// Elements [8 o, 8 o + 8) of a row of `n` widened into `v`, the count
/// read (fewer at the end of a row whose length is not a multiple of 8).
/// `packed` (n a multiple of 8, the row 16-byte aligned): 16 bytes at a
/// time. Every element type splits a row between threads by these eights,
/// so a bf16 row's sum of squares is summed in the f32 kernel's order.
template <typename T>
__device__ int loadEight(const T *row, int64_t o, int64_t n, bool packed,
                         float (&v)[8]) {
  if (packed) {
    constexpr int V = Pack<T>::size;
    const Pack<T> *packs = reinterpret_cast<const Pack<T> *>(row + 8 * o);
    for (int q = 0; q < 8 / V; ++q) {
      Pack<T> p = packs[q];
      for (int j = 0; j < V; ++j)
        v[q * V + j] = toFloat(p.e[j]);
    }
    return 8;
  }
  int count = static_cast<int>(n - 8 * o < 8 ? n - 8 * o : 8);
  for (int j = 0; j < count; ++j)
    v[j] = toFloat(row[8 * o + j]);
  return count;
}

/// `count` values of `v` rounded into elements [8 o, 8 o + count) of a row
/// (loadEight's layout).
template <typename T>
__device__ void storeEight(T *row, int64_t o, int count, bool packed,
                           const float (&v)[8]) {
  if (packed) {
    constexpr int V = Pack<T>::size;
    Pack<T> *packs = reinterpret_cast<Pack<T> *>(row + 8 * o);
    for (int q = 0; q < 8 / V; ++q) {
      Pack<T> p;
      for (int j = 0; j < V; ++j)
        p.e[j] = fromFloat<T>(v[q * V + j]);
      packs[q] = p;
    }
    return;
  }
  for (int j = 0; j < count; ++j)
    row[8 * o + j] = fromFloat<T>(v[j]);
}

/// v[j] * inv * (offset + w[8 o + j]) for the eight at `o`.
__device__ inline void normEight(float (&v)[8], int count, float inv,
                                 const float *w, int64_t o, float offset) {
  for (int j = 0; j < count; ++j)
    v[j] = (v[j] * inv) * (offset + w[8 * o + j]);
}

/// One block per group of `group` elements: x / sqrt(mean(x^2) + eps) *
/// (offset + w), in f32 on elements of any float type, rounded once; each
/// thread takes eights of the group (loadEight).
template <typename T>
__global__ void rmsNormKernel(const T *x, const float *w, T *out,
                              int64_t groups, int64_t group, float eps,
                              float offset, bool packed) {
  int64_t eights = (group + 7) / 8;
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const T *row = x + g * group;
    double sum = 0;
    float v[8];
    for (int64_t o = threadIdx.x; o < eights; o += blockDim.x) {
      int count = loadEight(row, o, group, packed, v);
      for (int j = 0; j < count; ++j)
        sum += static_cast<double>(v[j]) * v[j];
    }
    float inv = inverseRms(sum, group, eps);
    for (int64_t o = threadIdx.x; o < eights; o += blockDim.x) {
      int count = loadEight(row, o, group, packed, v);
      normEight(v, count, inv, w, o, offset);
      storeEight(out + g * group, o, count, packed, v);
    }
    __syncthreads();
  }
}

/// One block per row: sum = a + b (rounded to T) written out, then normed =
/// sum / sqrt(mean(sum^2) + eps) * (offset + w): rmsNormKernel's arithmetic,
/// eights and reduction on the rounded sum, so both results are the
/// separate kernels' bit for bit.
template <typename T>
__global__ void addRmsNormKernel(const T *a, const T *b, const float *w, T *sum,
                                 T *normed, int64_t rows, int64_t features,
                                 float eps, float offset, bool packed) {
  int64_t eights = (features + 7) / 8;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t at = r * features;
    double squares = 0;
    float u[8], v[8];
    for (int64_t o = threadIdx.x; o < eights; o += blockDim.x) {
      int count = loadEight(a + at, o, features, packed, u);
      loadEight(b + at, o, features, packed, v);
      // The sum rounded to T, as add writes it, is what the norm reads.
      for (int j = 0; j < count; ++j) {
        v[j] = toFloat(fromFloat<T>(u[j] + v[j]));
        squares += static_cast<double>(v[j]) * v[j];
      }
      storeEight(sum + at, o, count, packed, v);
    }
    float inv = inverseRms(squares, features, eps);
    // Each thread reads back the elements it wrote.
    for (int64_t o = threadIdx.x; o < eights; o += blockDim.x) {
      int count = loadEight(sum + at, o, features, packed, v);
      normEight(v, count, inv, w, o, offset);
      storeEight(normed + at, o, count, packed, v);
    }
    __syncthreads();
  }
}

/// Rotates the first rotaryDim features of each head of x [B, S, H * D]
/// into `out` (a copy of x): pair (i, i + half), or (2i, 2i + 1)
/// interleaved, by the angle of position p; in f32 on elements of any
/// float type, each result rounded once.
template <typename T>
__global__ void rotaryKernel(const T *x, T *out, const float *cosT,
                             const float *sinT, int64_t batch, int64_t seq,
                             int64_t heads, int64_t headDim, int64_t half,
                             bool interleaved) {
  int64_t n = batch * seq * heads * half;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int64_t i = idx % half, rest = idx / half;
    int64_t h = rest % heads, bp = rest / heads, p = bp % seq;
    int64_t base = (bp * heads + h) * headDim;
    int64_t i1 = interleaved ? 2 * i : i,
            i2 = interleaved ? 2 * i + 1 : i + half;
    float c = cosT[p * half + i], s = sinT[p * half + i];
    float x1 = toFloat(x[base + i1]), x2 = toFloat(x[base + i2]);
    out[base + i1] = fromFloat<T>(x1 * c - x2 * s);
    out[base + i2] = fromFloat<T>(x2 * c + x1 * s);
  }
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Block (query tile, head, batch row); warp w owns query row
/// tile * kAttentionRowsPerBlock + w and lane d / 32 of its output dims
/// (`dimsPerLane` of them). Per key tile the block stages K (rows padded by
/// one float against bank conflicts) and V in shared memory; lane j scores
/// key j of the tile, and the warp folds the tile into its running maximum,
/// sum and output (online softmax). With `stats` it also writes each row's
/// log-sum-exp (+inf when it sees no key), [batch, heads, sq], and, given
/// `dout` (the backward's recomputation), dout . out there instead of the
/// output.
template <int dimsPerLane, bool stats>
__global__ void
attentionKernel(const float *q, const float *k, const float *v,
                const int64_t *keyMask, float *out, const float *dout,
                float *lse, float *delta, int64_t sq, int64_t skv, int heads,
                int group, int headDim, float scale, bool causal,
                int64_t window, float cap, int64_t queryOffset) {
  extern __shared__ float shared[];
  const int tile = kAttentionKeyTile, rowsPerBlock = kAttentionRowsPerBlock;
  const int D = headDim;
  float *kTile = shared;
  float *vTile = kTile + tile * (D + 1);
  float *qRows = vTile + tile * D;
  float *pRows = qRows + rowsPerBlock * D;

  int64_t b = blockIdx.z;
  int h = blockIdx.y, kvh = h / group;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t firstRow = int64_t(blockIdx.x) * rowsPerBlock;
  int64_t row = firstRow + warp;
  bool active = row < sq;
  int64_t pos = row + queryOffset;
  int64_t qStride = int64_t(heads) * D, kvStride = int64_t(heads / group) * D;
  float *myQ = qRows + warp * D, *myP = pRows + warp * tile;
  if (active)
    for (int d = lane; d < D; d += 32)
      myQ[d] = q[(b * sq + row) * qStride + int64_t(h) * D + d];

  float acc[dimsPerLane];
  for (int t = 0; t < dimsPerLane; ++t)
    acc[t] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  int64_t lastRow =
      firstRow + rowsPerBlock - 1 < sq ? firstRow + rowsPerBlock - 1 : sq - 1;
  KeyRange range = attentionKeyRange(
      firstRow + queryOffset, lastRow + queryOffset, skv, causal, window);
  const float *kBase = k + b * skv * kvStride + int64_t(kvh) * D;
  const float *vBase = v + b * skv * kvStride + int64_t(kvh) * D;
  for (int64_t t0 = range.begin; t0 < range.end; t0 += tile) {
    __syncthreads(); // the previous tile is no longer read
    for (int idx = threadIdx.x; idx < tile * D; idx += blockDim.x) {
      int jj = idx / D, d = idx % D;
      int64_t j = t0 + jj;
      bool inside = j < skv;
      kTile[jj * (D + 1) + d] = inside ? kBase[j * kvStride + d] : 0.0f;
      vTile[jj * D + d] = inside ? vBase[j * kvStride + d] : 0.0f;
    }
    __syncthreads();
    if (!active)
      continue;
    int64_t j = t0 + lane;
    bool visible = j < skv && attentionVisible(pos, j, causal, window) &&
                   (!keyMask || keyMask[b * skv + j] != 0);
    float s = -INFINITY;
    if (visible) {
      const float *kr = kTile + lane * (D + 1);
      float dot = 0.0f;
      for (int d = 0; d < D; ++d)
        dot += myQ[d] * kr[d];
      s = dot * scale;
      if (cap > 0)
        s = cap * tanhf(s / cap);
    }
    float tileMax = s;
    for (int off = 16; off; off >>= 1)
      tileMax = fmaxf(tileMax, __shfl_xor_sync(kFullMask, tileMax, off));
    float mNew = fmaxf(m, tileMax);
    if (mNew == -INFINITY)
      continue; // nothing visible yet (the same on every lane)
    float p = visible ? expf(s - mNew) : 0.0f;
    float correction = m == -INFINITY ? 0.0f : expf(m - mNew);
    float tileSum = p;
    for (int off = 16; off; off >>= 1)
      tileSum += __shfl_xor_sync(kFullMask, tileSum, off);
    l = l * correction + tileSum;
    myP[lane] = p;
    __syncwarp();
    for (int t = 0; t < dimsPerLane; ++t) {
      int d = lane + 32 * t;
      if (d < D) {
        float a = acc[t] * correction;
        for (int jj = 0; jj < tile; ++jj)
          a += myP[jj] * vTile[jj * D + d];
        acc[t] = a;
      }
    }
    __syncwarp();
    m = mNew;
  }
  if (!active)
    return;
  // A query that sees no key gets zeros, as on the CPU.
  float inv = l > 0 ? 1.0f / l : 0.0f;
  int64_t at = (b * sq + row) * qStride + int64_t(h) * D;
  if constexpr (stats) {
    // dout is the same on every lane: the shuffles are the whole warp's.
    float dot = 0.0f;
    if (dout) {
      for (int t = 0; t < dimsPerLane; ++t) {
        int d = lane + 32 * t;
        if (d < D)
          dot += dout[at + d] * (acc[t] * inv);
      }
      for (int off = 16; off; off >>= 1)
        dot += __shfl_xor_sync(kFullMask, dot, off);
    }
    if (lane == 0) {
      int64_t stat = (b * heads + h) * sq + row;
      lse[stat] = l > 0 ? m + logf(l) : INFINITY;
      if (dout)
        delta[stat] = dot;
    }
  }
  if (out)
    for (int t = 0; t < dimsPerLane; ++t) {
      int d = lane + 32 * t;
      if (d < D)
        out[at + d] = acc[t] * inv;
    }
}

/// What one attention call reads and writes (out, or with `dout` the
/// backward's statistics).
struct AttentionCall {
  const float *q, *k, *v;
  const int64_t *mask;
  float *out;
  const float *dout;
  float *lse, *delta;
  int64_t sq, skv;
  int heads, group, headDim;
  float scale;
  bool causal;
  int64_t window;
  float cap;
  int64_t queryOffset;
};

template <int dimsPerLane, bool stats>
void launchAttention(dim3 grid, size_t sharedBytes, const AttentionCall &c) {
  check(cudaFuncSetAttribute(attentionKernel<dimsPerLane, stats>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(sharedBytes)),
        "attention: cudaFuncSetAttribute");
  attentionKernel<dimsPerLane, stats>
      <<<grid, 32 * kAttentionRowsPerBlock, sharedBytes, stream()>>>(
          c.q, c.k, c.v, c.mask, c.out, c.dout, c.lse, c.delta, c.sq, c.skv,
          c.heads, c.group, c.headDim, c.scale, c.causal, c.window, c.cap,
          c.queryOffset);
  checkLaunch("attention");
}

/// Checks the operands (as the CPU kernel's AttentionShape) and runs the
/// forward kernel: into `out` and, when not null, `lse`; or with `dout`
/// into `lse` and `delta`.
void runAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                  const Tensor &keyMask, int64_t heads, int64_t kvHeads,
                  int64_t headDim, double scale, bool causal, int64_t window,
                  double softcap, const char *op, float *out, const float *dout,
                  float *lse, float *delta) {
  AttentionShape shape(q, k, v, keyMask, heads, kvHeads, headDim, op,
                       Device::CUDA);
  if (headDim > 256 || heads > 65535 || shape.batch > 65535)
    fatal(std::string(op) +
          ": the CUDA kernel takes head_dim <= 256, at most 65535 heads and "
          "65535 batch rows, got " +
          std::to_string(headDim) + ", " + std::to_string(heads) + " and " +
          std::to_string(shape.batch));
  int64_t batch = shape.batch, sq = shape.sq, skv = shape.skv;
  const int64_t *mask = shape.mask;
  if (batch == 0 || sq == 0 || heads == 0)
    return;
  const int64_t tile = kAttentionKeyTile, rows = kAttentionRowsPerBlock;
  size_t sharedBytes =
      (tile * (headDim + 1) + tile * headDim + rows * headDim + rows * tile) *
      sizeof(float);
  dim3 grid(static_cast<unsigned>((sq + rows - 1) / rows),
            static_cast<unsigned>(heads), static_cast<unsigned>(batch));
  AttentionCall c{q.f32(),
                  k.f32(),
                  v.f32(),
                  mask,
                  out,
                  dout,
                  lse,
                  delta,
                  sq,
                  skv,
                  static_cast<int>(heads),
                  static_cast<int>(heads / kvHeads),
                  static_cast<int>(headDim),
                  static_cast<float>(scale),
                  causal,
                  window,
                  static_cast<float>(softcap),
                  skv - sq};
  bool stats = lse != nullptr;
  if (headDim <= 64)
    stats ? launchAttention<2, true>(grid, sharedBytes, c)
          : launchAttention<2, false>(grid, sharedBytes, c);
  else if (headDim <= 128)
    stats ? launchAttention<4, true>(grid, sharedBytes, c)
          : launchAttention<4, false>(grid, sharedBytes, c);
  else
    stats ? launchAttention<8, true>(grid, sharedBytes, c)
          : launchAttention<8, false>(grid, sharedBytes, c);
}

} // namespace

Tensor embedding(Context &ctx, const Tensor &ids, const Tensor &table,
                 int64_t) {
  return embed(ctx, ids, table, /*vocabParallel=*/false, {}, {}, "embedding");
}

Tensor embedding_vocab_parallel(Context &ctx, const Tensor &ids,
                                const Tensor &table,
                                std::vector<int64_t> starts,
                                std::vector<int64_t> sizes) {
  return embed(ctx, ids, table, /*vocabParallel=*/true, starts, sizes,
               "embedding_vocab_parallel");
}

Tensor unary(const Tensor &x, Unary op, float parameter, const char *name) {
  switch (op) {
  case Unary::Silu:
    return mapOnGpu(x, Tensor(), UnaryFn<Unary::Silu>{parameter}, name);
  case Unary::Gelu:
    return mapOnGpu(x, Tensor(), UnaryFn<Unary::Gelu>{parameter}, name);
  case Unary::GeluTanh:
    return mapOnGpu(x, Tensor(), UnaryFn<Unary::GeluTanh>{parameter}, name);
  case Unary::ReluSquared:
    return mapOnGpu(x, Tensor(), UnaryFn<Unary::ReluSquared>{parameter}, name);
  case Unary::Scale:
    return mapOnGpu(x, Tensor(), UnaryFn<Unary::Scale>{parameter}, name);
  case Unary::Softcap:
    return mapOnGpu(x, Tensor(), UnaryFn<Unary::Softcap>{parameter}, name);
  }
  fatal(std::string(name) + ": unknown unary op");
}

void siluMulInPlace(Tensor &out, const Tensor &other) {
  mapOnGpuInto(out, other, out, SiluMulFn{},
               "linear_epilogue (SiLU and product)");
}

Tensor binary(const Tensor &a, const Tensor &b, Binary op, const char *name) {
  // Operands of two types meet in f32, rounded once to the reduced one.
  if (a.dtype() != b.dtype())
    TPRT_IN_F32(reducedType(a, b),
                cuda::binary(widened(a), widened(b), op, name))
  return op == Binary::Add ? mapOnGpu(a, b, BinaryFn<Binary::Add>{}, name)
                           : mapOnGpu(a, b, BinaryFn<Binary::Mul>{}, name);
}

Tensor convert(const Tensor &x, DType dtype) {
  auto isFloat = [](DType t) {
    return t == DType::F32 || t == DType::BF16 || t == DType::F16;
  };
  if (!x.onGpu() || !isFloat(x.dtype()) || !isFloat(dtype) ||
      (x.dtype() != DType::F32 && dtype != DType::F32))
    fatal("converting " + x.describe() + " to " + dtypeName(dtype) +
          " on the GPU is not supported (f32 <-> bf16 or f16)");
  if (x.dtype() == dtype)
    return x;
  Tensor out = Tensor::uninitialized(dtype, x.shape(), Device::CUDA);
  int64_t n = x.numel();
  if (n == 0)
    return out;
  if (dtype == DType::BF16)
    launchConvert<float, __nv_bfloat16>(x.raw(), out.raw(), n);
  else if (dtype == DType::F16)
    launchConvert<float, __half>(x.raw(), out.raw(), n);
  else if (x.dtype() == DType::BF16)
    launchConvert<__nv_bfloat16, float>(x.raw(), out.raw(), n);
  else
    launchConvert<__half, float>(x.raw(), out.raw(), n);
  return out;
}

void convertInto(const void *x, DType from, void *out, DType to, int64_t n) {
  if (n == 0)
    return;
  if (from == DType::F32 && to == DType::BF16)
    launchConvert<float, __nv_bfloat16>(x, out, n);
  else if (from == DType::BF16 && to == DType::F32)
    launchConvert<__nv_bfloat16, float>(x, out, n);
  else if (from == DType::F32 && to == DType::F16)
    launchConvert<float, __half>(x, out, n);
  else if (from == DType::F16 && to == DType::F32)
    launchConvert<__half, float>(x, out, n);
  else
    fatal(std::string("converting ") + dtypeName(from) + " to " +
          dtypeName(to) + " on the GPU is not supported (f32 <-> bf16 or f16)");
}

std::shared_ptr<unsigned char[]> toBf16(const float *data, int64_t n) {
  std::shared_ptr<unsigned char[]> out = allocate(n * sizeof(__nv_bfloat16));
  if (n > 0)
    launchConvert<float, __nv_bfloat16>(data, out.get(), n);
  return out;
}

void addBias(Tensor &out, const Tensor &bias, const char *op) {
  requireGpuFloat(out, op, "the product");
  DType dtype = out.dtype();
  // The bias of the product's type, or f32.
  requireGpu(bias, reducedType(bias) == dtype ? dtype : DType::F32, op,
             "the bias");
  int64_t features = out.rank() ? out.dim(-1) : 0;
  if (bias.rank() != 1 || bias.dim(0) != features)
    fatal(std::string(op) + ": bias " + bias.describe() + " does not match " +
          out.describe());
  int64_t n = out.numel();
  if (n == 0)
    return;
  withFloatType(dtype, [&](auto element) {
    using T = decltype(element);
    auto launch = [&](auto biasElement) {
      using B = decltype(biasElement);
      addBiasKernel<T, B><<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
          static_cast<T *>(out.raw()), static_cast<const B *>(bias.raw()), n,
          features);
    };
    if (bias.dtype() == DType::F32)
      launch(float());
    else
      launch(element);
  });
  checkLaunch(op);
}

Tensor bias_add(Context &ctx, const Tensor &x, const Tensor &bias, int64_t) {
  requireGpuFloat(x, "bias_add", "the input");
  // A bias of another reduced type than x's meets it in f32.
  if (reducedType(bias) != DType::F32 && bias.dtype() != x.dtype())
    TPRT_IN_F32(x, cuda::bias_add(ctx, widened(x), widened(bias), -1))
  Tensor out = Tensor::uninitialized(x.dtype(), x.shape(), Device::CUDA);
  copy(out.raw(), Device::CUDA, x.raw(), Device::CUDA, x.bytes());
  addBias(out, bias, "bias_add");
  return out;
}

namespace {

/// The cos and sin tables on the GPU, [2, n]: each of the last few table
/// pairs this thread copied is kept (every layer's call reuses them; a
/// model may alternate two, as Gemma3's local and global layers do), and
/// a CUDA graph capture copies nothing from the host: tables it has not
/// seen end the capture (before anything here changes). A captured graph
/// keeps the tables it read, dropped here or not.
const Tensor &deviceTables(const float *cosTable, const float *sinTable,
                           int64_t n) {
  struct Copied {
    std::vector<float> cos, sin;
    Tensor tables;
  };
  constexpr size_t kKept = 4;
  static thread_local std::vector<Copied> copied;
  for (const Copied &c : copied)
    if (int64_t(c.cos.size()) == n &&
        std::equal(cosTable, cosTable + n, c.cos.begin()) &&
        std::equal(sinTable, sinTable + n, c.sin.begin())) {
      keepForGraph(c.tables);
      return c.tables;
    }
  if (capturing(stream()))
    fatal("rotary: RoPE tables the calls before did not use (copying them "
          "to the GPU cannot be captured)");
  if (copied.size() == kKept)
    copied.erase(copied.begin());
  Copied c{std::vector<float>(cosTable, cosTable + n),
           std::vector<float>(sinTable, sinTable + n),
           Tensor::uninitialized(DType::F32, {2, n}, Device::CUDA)};
  copy(c.tables.f32(), Device::CUDA, cosTable, Device::CPU, n * sizeof(float));
  copy(c.tables.f32() + n, Device::CUDA, sinTable, Device::CPU,
       n * sizeof(float));
  copied.push_back(std::move(c));
  return copied.back().tables;
}

/// rms_norm of x (any float type, on the GPU) with an f32 weight.
Tensor rmsNormOf(const Tensor &x, const Tensor &w, double eps, double offset,
                 int64_t group) {
  requireGpuFloat(x, "rms_norm", "the input");
  DType dtype = x.dtype();
  requireGpu(w, DType::F32, "rms_norm", "the weight");
  int64_t features = x.rank() ? x.dim(-1) : 0;
  if (group == 0)
    group = features;
  if (group <= 0 || features % group != 0 || w.numel() != group)
    fatal("rms_norm: input " + x.describe() + ", weight " + w.describe() +
          " and group " + std::to_string(group) + " do not match");
  Tensor out = Tensor::uninitialized(dtype, x.shape(), Device::CUDA);
  int64_t groups = x.numel() / group;
  if (groups == 0)
    return out;
  bool packed =
      group % 8 == 0 && packAligned(x.raw()) && packAligned(out.raw());
  auto launch = [&](auto element) {
    using T = decltype(element);
    rmsNormKernel<T><<<gridBlocks(groups, 1), kThreads, 0, stream()>>>(
        static_cast<const T *>(x.raw()), w.f32(), static_cast<T *>(out.raw()),
        groups, group, static_cast<float>(eps), static_cast<float>(offset),
        packed);
  };
  withFloatType(dtype, launch);
  checkLaunch("rms_norm");
  return out;
}

} // namespace

Tensor rms_norm(Context &ctx, const Tensor &x, const Tensor &w, double eps,
                double offset, int64_t group, int64_t) {
  return rmsNormOf(x, widened(w), eps, offset, group);
}

Tensors add_rms_norm(Context &ctx, const Tensor &a, const Tensor &b,
                     const Tensor &w, double eps, double offset) {
  requireSameShape(a, b, "add_rms_norm");
  if (a.dtype() != b.dtype())
    return composed::add_rms_norm(ctx, a, b, w, eps, offset);
  requireGpuFloat(a, "add_rms_norm", "the first addend");
  requireGpu(b, a.dtype(), "add_rms_norm", "the second addend");
  Tensor wf = widened(w);
  requireGpu(wf, DType::F32, "add_rms_norm", "the weight");
  int64_t features = a.rank() ? a.dim(-1) : 0;
  if (features == 0 || wf.numel() != features)
    fatal("add_rms_norm: input " + a.describe() + " and weight " +
          w.describe() + " do not match");
  Tensor sum = Tensor::uninitialized(a.dtype(), a.shape(), Device::CUDA);
  Tensor normed = Tensor::uninitialized(a.dtype(), a.shape(), Device::CUDA);
  int64_t rows = a.numel() / features;
  if (rows == 0)
    return {sum, normed};
  bool packed = features % 8 == 0 && packAligned(a.raw()) &&
                packAligned(b.raw()) && packAligned(sum.raw()) &&
                packAligned(normed.raw());
  withFloatType(a.dtype(), [&](auto element) {
    using T = decltype(element);
    addRmsNormKernel<T><<<gridBlocks(rows, 1), kThreads, 0, stream()>>>(
        static_cast<const T *>(a.raw()), static_cast<const T *>(b.raw()),
        wf.f32(), static_cast<T *>(sum.raw()), static_cast<T *>(normed.raw()),
        rows, features, static_cast<float>(eps), static_cast<float>(offset),
        packed);
  });
  checkLaunch("add_rms_norm");
  return {sum, normed};
}

Tensor rotaryWithTables(const Tensor &x, int64_t headDim, int64_t rotaryDim,
                        bool interleaved, const float *cosTable,
                        const float *sinTable) {
  requireGpuFloat(x, "rotary", "the input");
  DType dtype = x.dtype();
  int64_t batch = x.dim(0), seq = x.dim(1), heads = x.dim(2) / headDim,
          half = rotaryDim / 2;
  Tensor out = Tensor::uninitialized(dtype, x.shape(), Device::CUDA);
  copy(out.raw(), Device::CUDA, x.raw(), Device::CUDA, x.bytes());
  int64_t n = batch * seq * heads * half;
  if (n == 0)
    return out;
  const Tensor &tables = deviceTables(cosTable, sinTable, seq * half);
  auto launch = [&](auto element) {
    using T = decltype(element);
    rotaryKernel<T><<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
        static_cast<const T *>(x.raw()), static_cast<T *>(out.raw()),
        tables.f32(), tables.f32() + seq * half, batch, seq, heads, headDim,
        half, interleaved);
  };
  withFloatType(dtype, launch);
  checkLaunch("rotary");
  return out;
}

Tensor tiledAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                      const Tensor &keyMask, int64_t heads, int64_t kvHeads,
                      int64_t headDim, double scale, bool causal,
                      int64_t window, double softcap) {
  requireGpu(q, DType::F32, "attention", "q");
  Tensor out = Tensor::uninitialized(DType::F32, q.shape(), Device::CUDA);
  runAttention(q, k, v, keyMask, heads, kvHeads, headDim, scale, causal, window,
               softcap, "attention", out.f32(), nullptr, nullptr, nullptr);
  return out;
}

AttentionStats attentionWithStats(const Tensor &q, const Tensor &k,
                                  const Tensor &v, const Tensor &keyMask,
                                  const Tensor &dout, int64_t heads,
                                  int64_t kvHeads, int64_t headDim,
                                  double scale, bool causal, int64_t window,
                                  double softcap, const char *op) {
  requireGpu(q, DType::F32, op, "q");
  requireGpu(dout, DType::F32, op, "dout");
  int64_t batch = q.rank() == 3 ? q.dim(0) : 0;
  int64_t sq = q.rank() == 3 ? q.dim(1) : 0;
  AttentionStats stats{
      Tensor::uninitialized(DType::F32, {batch, heads, sq}, Device::CUDA),
      Tensor::uninitialized(DType::F32, {batch, heads, sq}, Device::CUDA)};
  runAttention(q, k, v, keyMask, heads, kvHeads, headDim, scale, causal, window,
               softcap, op, nullptr, dout.f32(), stats.lse.f32(),
               stats.delta.f32());
  return stats;
}

Tensors tiledAttentionWithLse(const Tensor &q, const Tensor &k,
                              const Tensor &v, const Tensor &keyMask,
                              int64_t heads, int64_t kvHeads, int64_t headDim,
                              double scale, bool causal, int64_t window,
                              double softcap) {
  requireGpu(q, DType::F32, "attention_lse", "q");
  int64_t batch = q.rank() == 3 ? q.dim(0) : 0;
  int64_t sq = q.rank() == 3 ? q.dim(1) : 0;
  Tensor out = Tensor::uninitialized(DType::F32, q.shape(), Device::CUDA);
  Tensor lse =
      Tensor::uninitialized(DType::F32, {batch, heads, sq}, Device::CUDA);
  runAttention(q, k, v, keyMask, heads, kvHeads, headDim, scale, causal, window,
               softcap, "attention_lse", out.f32(), nullptr, lse.f32(),
               nullptr);
  return {out, lse};
}

namespace {

/// delta[b, h, i] = dout[b, i, h, :] . out[b, i, h, :], one warp a row.
template <typename T>
__global__ void attentionDeltaKernel(const T *dout, const T *out, float *delta,
                                     int64_t batch, int64_t sq, int64_t heads,
                                     int64_t headDim) {
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  // Every lane of a warp takes the same rows: the shuffles are the warp's.
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       row < batch * heads * sq; row += warps) {
    int64_t b = row / (heads * sq), h = row / sq % heads, i = row % sq;
    int64_t at = ((b * sq + i) * heads + h) * headDim;
    float dot = 0.0f;
    for (int64_t d = lane; d < headDim; d += 32)
      dot += toFloat(dout[at + d]) * toFloat(out[at + d]);
    for (int off = 16; off; off >>= 1)
      dot += __shfl_xor_sync(kFullMask, dot, off);
    if (lane == 0)
      delta[row] = dot;
  }
}

} // namespace

Tensor attentionDelta(const Tensor &dout, const Tensor &out, int64_t heads,
                      int64_t headDim) {
  requireGpuFloat(out, "attention_grad", "the forward's output");
  requireGpu(dout, out.dtype(), "attention_grad", "dout");
  if (out.shape() != dout.shape() || out.rank() != 3 ||
      out.dim(2) != heads * headDim)
    fatal("attention_grad: the forward's output " + out.describe() +
          " and dout " + dout.describe() + " are not [batch, seq, " +
          std::to_string(heads) + " x " + std::to_string(headDim) + "]");
  int64_t batch = out.dim(0), sq = out.dim(1);
  Tensor delta =
      Tensor::uninitialized(DType::F32, {batch, heads, sq}, Device::CUDA);
  int64_t threads = batch * heads * sq * 32;
  if (threads == 0)
    return delta;
  auto launch = [&](auto element) {
    using T = decltype(element);
    attentionDeltaKernel<T><<<gridBlocks(threads, kThreads), kThreads, 0,
                              stream()>>>(static_cast<const T *>(dout.raw()),
                                          static_cast<const T *>(out.raw()),
                                          delta.f32(), batch, sq, heads,
                                          headDim);
  };
  withFloatType(out.dtype(), launch);
  checkLaunch("attention_grad: dout . out");
  return delta;
}

Tensor rotary(Context &ctx, const Tensor &x, int64_t headDim, int64_t rotaryDim,
              double theta, bool interleaved, int64_t ropeType, double factor,
              double lowFreqFactor, double highFreqFactor,
              int64_t originalMaxPositions, double betaFast, double betaSlow,
              bool truncate, double attentionFactor, bool transpose,
              std::vector<double> shortFactor, std::vector<double> longFactor,
              int64_t) {
  if (!x.defined())
    requireF32(x, "rotary", "the input");
  RotaryPlan plan = planRotary(
      ctx, x, headDim, rotaryDim, theta, ropeType, factor, lowFreqFactor,
      highFreqFactor, originalMaxPositions, betaFast, betaSlow, truncate,
      attentionFactor, transpose, shortFactor, longFactor);
  return rotaryWithTables(x, headDim, plan.rotaryDim, interleaved,
                          plan.tables->cosT.data(), plan.tables->sinT.data());
}

Tensor silu(Context &, const Tensor &x, int64_t) {
  return unary(x, Unary::Silu, 0, "silu");
}

Tensor gelu(Context &, const Tensor &x, bool tanhApproximation, int64_t) {
  return unary(x, tanhApproximation ? Unary::GeluTanh : Unary::Gelu, 0, "gelu");
}

Tensor relu_squared(Context &, const Tensor &x, int64_t) {
  return unary(x, Unary::ReluSquared, 0, "relu_squared");
}

Tensor scale(Context &, const Tensor &x, double factor, int64_t) {
  return unary(x, Unary::Scale, static_cast<float>(factor), "scale");
}

Tensor softcap(Context &, const Tensor &x, double cap, int64_t) {
  return unary(x, Unary::Softcap, static_cast<float>(cap), "softcap");
}

Tensor add(Context &, const Tensor &a, const Tensor &b, int64_t) {
  return binary(a, b, Binary::Add, "add");
}

Tensor mul(Context &, const Tensor &a, const Tensor &b, int64_t) {
  return binary(a, b, Binary::Mul, "mul");
}

} // namespace cuda
} // namespace tprt
