//===- backward.cu - CUDA kernels of the backward ops ---------------------===//
//
// The VJPs of the forward kernels (kernels.cu), f32, as the CPU computes
// them (src/cpu/backward.cpp). Where rows of the input add into one element
// of a gradient (embedding rows of a repeated token, an attention key seen
// by many queries) the kernels add with atomics, so those sums are not in
// a fixed order; everything else is.
//
//===----------------------------------------------------------------------===//

#include "Elements.cuh"
#include "Map.cuh"
#include "Runtime.h"
#include "Tiling.h"
#include "common/Checks.h"

#include <cmath>

namespace tprt {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

__global__ void sumLeadingKernel(const float *x, float *out, int64_t rows,
                                 int64_t n) {
  TPRT_GRID_STRIDE(j, n) {
    double sum = 0;
    for (int64_t r = 0; r < rows; ++r)
      sum += x[r * n + j];
    out[j] = static_cast<float>(sum);
  }
}

/// dy's rows (of any float type, widened) added into the f32 rows of `out`
/// that the ids point to, a block per id.
template <typename T>
__global__ void embeddingGradKernel(const int64_t *ids, const T *dy, float *out,
                                    int64_t n, int64_t hidden, int64_t start,
                                    int64_t rows, int64_t paddingIdx) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    int64_t id = ids[i];
    if (id < start || id >= start + rows || id == paddingIdx)
      continue;
    for (int64_t h = threadIdx.x; h < hidden; h += blockDim.x)
      atomicAdd(out + (id - start) * hidden + h, toFloat(dy[i * hidden + h]));
  }
}

/// embeddingGradKernel over dy's type into `out`'s rows [start, start +
/// rows).
void addEmbeddingRows(const Tensor &ids, const Tensor &dy, float *out,
                      int64_t hidden, int64_t start, int64_t rows,
                      int64_t paddingIdx, const char *op) {
  int64_t n = ids.numel();
  if (n == 0 || hidden == 0)
    return;
  withFloatType(dy.dtype(), [&](auto element) {
    using T = decltype(element);
    embeddingGradKernel<T><<<gridBlocks(n, 1), kThreads, 0, stream()>>>(
        ids.i64(), static_cast<const T *>(dy.raw()), out, n, hidden, start,
        rows, paddingIdx);
  });
  checkLaunch(op);
}

/// Sums `value` over the block's threads; every thread gets the total.
__device__ double blockSum(double value, double *scratch) {
  for (int off = 16; off; off >>= 1)
    value += __shfl_xor_sync(kFullMask, value, off);
  __syncthreads(); // scratch is free
  if (threadIdx.x % 32 == 0)
    scratch[threadIdx.x / 32] = value;
  __syncthreads();
  double total = 0;
  for (int i = 0; i < int(blockDim.x / 32); ++i)
    total += scratch[i];
  return total;
}

/// One block per group: dx (of x's type), and the group's inverse RMS for
/// dweight; x and dy of any float type, read widened.
template <typename T>
__global__ void rmsNormGradKernel(const T *x, const float *w, const T *dy,
                                  T *dx, float *inv, int64_t groups,
                                  int64_t group, float eps, float offset) {
  __shared__ double scratch[kThreads / 32];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const T *row = x + g * group, *drow = dy + g * group;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x) {
      float v = toFloat(row[i]);
      sum += static_cast<double>(v) * v;
    }
    sum = blockSum(sum, scratch);
    float ri = 1.0f / sqrtf(static_cast<float>(sum / group) + eps);
    double dot = 0;
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x)
      dot += static_cast<double>(toFloat(drow[i])) * (offset + w[i]) *
             toFloat(row[i]) * ri;
    dot = blockSum(dot, scratch);
    float mean = static_cast<float>(dot / group);
    for (int64_t i = threadIdx.x; i < group; i += blockDim.x)
      dx[g * group + i] =
          fromFloat<T>(ri * (toFloat(drow[i]) * (offset + w[i]) -
                             toFloat(row[i]) * ri * mean));
    if (threadIdx.x == 0)
      inv[g] = ri;
  }
}

/// Groups per chunk of dweight's first pass: enough threads to fill the GPU
/// (a thread per feature and chunk) with each summing a run of groups.
constexpr int64_t kWeightGradChunk = 64;

/// dweight's first pass: partial[c, i] = the sum over chunk c's groups of
/// dy * x * inv, in FP64.
template <typename T>
__global__ void
rmsNormWeightGradPartialKernel(const T *x, const T *dy, const float *inv,
                               double *partial, int64_t groups, int64_t group) {
  int64_t chunk = blockIdx.y;
  int64_t first = chunk * kWeightGradChunk;
  int64_t last =
      first + kWeightGradChunk < groups ? first + kWeightGradChunk : groups;
  TPRT_GRID_STRIDE(i, group) {
    double sum = 0;
    for (int64_t g = first; g < last; ++g)
      sum += static_cast<double>(toFloat(dy[g * group + i])) *
             toFloat(x[g * group + i]) * inv[g];
    partial[chunk * group + i] = sum;
  }
}

/// dweight's second pass: the chunks' partial sums in chunk order.
__global__ void rmsNormWeightGradKernel(const double *partial, float *dw,
                                        int64_t chunks, int64_t group) {
  TPRT_GRID_STRIDE(i, group) {
    double sum = 0;
    for (int64_t c = 0; c < chunks; ++c)
      sum += partial[c * group + i];
    dw[i] = static_cast<float>(sum);
  }
}

template <Activation op>
__device__ float activationGrad(float v, float d, float p) {
  if (op == Activation::Silu) {
    float s = 1.0f / (1.0f + expf(-v));
    return d * s * (1.0f + v * (1.0f - s));
  }
  if (op == Activation::ReluSquared)
    return v > 0 ? 2.0f * v * d : 0.0f;
  if (op == Activation::GeluTanh) {
    const float k = 0.7978845608028654f;
    float t = tanhf(k * (v + 0.044715f * v * v * v));
    return d * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * k *
                                        (1.0f + 3.0f * 0.044715f * v * v));
  }
  if (op == Activation::Gelu)
    return d * (0.5f * (1.0f + erff(v * 0.7071067811865476f)) +
                v * 0.3989422804014327f * expf(-0.5f * v * v));
  float t = tanhf(v / p); // Softcap
  return d * (1.0f - t * t);
}

/// The gradients of silu(gate) * up in one pass over elements of one float
/// type: dgate = silu'(gate) * (dy * up), dup = dy * silu(gate), each
/// element's arithmetic silu_grad's and silu's in f32, rounded once. With
/// `packed`, 16 bytes of each operand at a time (Map.cuh), the rest one by
/// one.
template <typename T>
__global__ void siluMulGradKernel(const T *gate, const T *up, const T *dy,
                                  T *dgate, T *dup, int64_t n, bool packed) {
  auto grads = [](T g, T u, T d, T &dg, T &du) {
    float gf = toFloat(g), df = toFloat(d);
    dg = fromFloat<T>(activationGrad<Activation::Silu>(gf, df * toFloat(u), 0));
    du = fromFloat<T>(df * (gf / (1.0f + expf(-gf))));
  };
  constexpr int V = Pack<T>::size;
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  int64_t packs = packed ? n / V : 0;
  for (int64_t p = first; p < packs; p += stride) {
    Pack<T> g = reinterpret_cast<const Pack<T> *>(gate)[p],
            u = reinterpret_cast<const Pack<T> *>(up)[p],
            d = reinterpret_cast<const Pack<T> *>(dy)[p], dg, du;
    for (int j = 0; j < V; ++j)
      grads(g.e[j], u.e[j], d.e[j], dg.e[j], du.e[j]);
    reinterpret_cast<Pack<T> *>(dgate)[p] = dg;
    reinterpret_cast<Pack<T> *>(dup)[p] = du;
  }
  for (int64_t i = packs * V + first; i < n; i += stride)
    grads(gate[i], up[i], dy[i], dgate[i], dup[i]);
}

template <Activation op> struct ActivationGradFn {
  float p;
  __device__ float operator()(float x, float dy) const {
    return activationGrad<op>(x, dy, p);
  }
};

/// attention's backward, after attentionKernel<.., true> left each query
/// row's log-sum-exp and delta = dout . out. Block (query tile, head, batch
/// row) as in the forward; lane j of warp w recomputes p and dS of key j of
/// the tile for query row w; the warp adds scale * dS K into its dq (owned:
/// written once), and the block adds its rows' dS^T Q and P^T dout into dk
/// and dv with one atomic per element and tile.
template <int dimsPerLane>
__global__ void
attentionGradKernel(const float *q, const float *k, const float *v,
                    const float *dout, const int64_t *keyMask, const float *lse,
                    const float *delta, float *dq, float *dk, float *dv,
                    int64_t sq, int64_t skv, int heads, int group, int headDim,
                    float scale, bool causal, int64_t window, float cap,
                    int64_t queryOffset) {
  extern __shared__ float shared[];
  const int tile = kAttentionKeyTile, rowsPerBlock = kAttentionRowsPerBlock;
  const int D = headDim;
  float *kTile = shared;
  float *vTile = kTile + tile * (D + 1);
  float *qRows = vTile + tile * (D + 1);
  float *doRows = qRows + rowsPerBlock * D;
  float *pRows = doRows + rowsPerBlock * D;
  float *dsRows = pRows + rowsPerBlock * tile;

  int64_t b = blockIdx.z;
  int h = blockIdx.y, kvh = h / group;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t firstRow = int64_t(blockIdx.x) * rowsPerBlock;
  int64_t row = firstRow + warp;
  bool active = row < sq;
  int64_t pos = row + queryOffset;
  int64_t qStride = int64_t(heads) * D, kvStride = int64_t(heads / group) * D;
  int64_t at = (b * sq + row) * qStride + int64_t(h) * D;
  float *myQ = qRows + warp * D, *myDo = doRows + warp * D;
  for (int d = lane; d < D; d += 32) {
    myQ[d] = active ? q[at + d] : 0.0f;
    myDo[d] = active ? dout[at + d] : 0.0f;
  }
  int64_t stat = (b * heads + h) * sq + row;
  float rowLse = active ? lse[stat] : 0.0f;
  float rowDelta = active ? delta[stat] : 0.0f;

  float acc[dimsPerLane];
  for (int t = 0; t < dimsPerLane; ++t)
    acc[t] = 0.0f;
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
      vTile[jj * (D + 1) + d] = inside ? vBase[j * kvStride + d] : 0.0f;
    }
    __syncthreads();
    int64_t j = t0 + lane;
    bool visible = active && j < skv &&
                   attentionVisible(pos, j, causal, window) &&
                   (!keyMask || keyMask[b * skv + j] != 0);
    float p = 0.0f, ds = 0.0f;
    if (visible) {
      const float *kr = kTile + lane * (D + 1), *vr = vTile + lane * (D + 1);
      float dot = 0.0f, dp = 0.0f;
      for (int d = 0; d < D; ++d) {
        dot += myQ[d] * kr[d];
        dp += myDo[d] * vr[d];
      }
      float s = dot * scale, t = 0.0f;
      if (cap > 0) {
        t = tanhf(s / cap);
        s = cap * t;
      }
      p = expf(s - rowLse);
      ds = p * (dp - rowDelta);
      if (cap > 0)
        ds *= 1.0f - t * t;
    }
    pRows[warp * tile + lane] = p;
    dsRows[warp * tile + lane] = ds;
    __syncwarp();
    for (int t = 0; t < dimsPerLane; ++t) {
      int d = lane + 32 * t;
      if (d < D) {
        float a = acc[t];
        for (int jj = 0; jj < tile; ++jj)
          a += dsRows[warp * tile + jj] * kTile[jj * (D + 1) + d];
        acc[t] = a;
      }
    }
    __syncthreads(); // every row's p and dS of this tile are there
    for (int idx = threadIdx.x; idx < tile * D; idx += blockDim.x) {
      int jj = idx / D, d = idx % D;
      int64_t key = t0 + jj;
      if (key >= skv)
        continue;
      float sk = 0.0f, sv = 0.0f;
      for (int w = 0; w < rowsPerBlock; ++w) {
        sk += dsRows[w * tile + jj] * qRows[w * D + d];
        sv += pRows[w * tile + jj] * doRows[w * D + d];
      }
      int64_t kvAt = (b * skv + key) * kvStride + int64_t(kvh) * D + d;
      if (sk != 0.0f)
        atomicAdd(dk + kvAt, sk * scale);
      if (sv != 0.0f)
        atomicAdd(dv + kvAt, sv);
    }
  }
  if (!active)
    return;
  for (int t = 0; t < dimsPerLane; ++t) {
    int d = lane + 32 * t;
    if (d < D)
      dq[at + d] = acc[t] * scale;
  }
}

template <int dimsPerLane>
void launchAttentionGrad(dim3 grid, size_t sharedBytes, const float *q,
                         const float *k, const float *v, const float *dout,
                         const int64_t *mask, const float *lse,
                         const float *delta, float *dq, float *dk, float *dv,
                         int64_t sq, int64_t skv, int heads, int group, int D,
                         float scale, bool causal, int64_t window, float cap,
                         int64_t queryOffset) {
  check(cudaFuncSetAttribute(attentionGradKernel<dimsPerLane>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(sharedBytes)),
        "attention_grad: cudaFuncSetAttribute");
  attentionGradKernel<dimsPerLane>
      <<<grid, 32 * kAttentionRowsPerBlock, sharedBytes, stream()>>>(
          q, k, v, dout, mask, lse, delta, dq, dk, dv, sq, skv, heads, group, D,
          scale, causal, window, cap, queryOffset);
  checkLaunch("attention_grad");
}

} // namespace

Tensor zeros(const std::vector<int64_t> &shape, DType dtype) {
  Tensor t = Tensor::uninitialized(dtype, shape, Device::CUDA);
  memset(t.raw(), 0, t.bytes());
  return t;
}

Tensor sum_leading(Context &ctx, const Tensor &x) {
  requireGpu(x, DType::F32, "sum_leading", "the input");
  int64_t n = x.rank() ? x.dim(-1) : 1, rows = x.numel() / (n ? n : 1);
  Tensor out = Tensor::uninitialized(DType::F32, {n}, Device::CUDA);
  if (n == 0)
    return out;
  sumLeadingKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
      x.f32(), out.f32(), rows, n);
  checkLaunch("sum_leading");
  return out;
}

Tensor embedding_grad(Context &ctx, const Tensor &ids, const Tensor &dy,
                      const Tensor &table, bool vocabParallel,
                      int64_t paddingIdx, std::vector<int64_t> vocabStarts,
                      std::vector<int64_t> vocabSizes) {
  // Only the table's shape is read; its gradient is of its type, summed in
  // f32 (dy of any float type widened as it is read).
  requireGpu(ids, DType::I64, "embedding_grad", "the ids");
  requireGpuFloat(dy, "embedding_grad", "dy");
  if (table.rank() != 2 || dy.numel() != ids.numel() * table.dim(1))
    fatal("embedding_grad: ids " + ids.describe() + ", dy " + dy.describe() +
          " and table " + table.describe() + " do not match");
  VocabRange range = vocabPartOf(ctx, table.dim(0), vocabParallel, vocabStarts,
                                 vocabSizes, "embedding_grad");
  Tensor out = zeros(table.shape());
  addEmbeddingRows(ids, dy, out.f32(), table.dim(1), range.start, range.rows,
                   paddingIdx, "embedding_grad");
  return narrowed(out, reducedType(table));
}

void accumulate_embedding_grad(Context &ctx, const Tensor &ids,
                               const Tensor &dy, const Tensor &param,
                               const char *fqn, int64_t splitDim, bool owned,
                               bool vocabParallel, int64_t paddingIdx,
                               std::vector<int64_t> vocabStarts,
                               std::vector<int64_t> vocabSizes) {
  // A reduced-precision dy is widened as it is read and added in f32, as
  // on the host.
  const char *op = "accumulate_embedding_grad";
  requireGpu(ids, DType::I64, op, "the ids");
  requireGpuFloat(dy, op, "dy");
  if (param.rank() != 2)
    fatal(std::string(op) + ": the parameter '" + fqn + "' is " +
          param.describe() + ", not a table");
  if (dy.numel() != ids.numel() * param.dim(1))
    fatal(std::string(op) + ": ids " + ids.describe() + " and dy " +
          dy.describe() + " do not match the table '" + fqn + "', " +
          param.describe());
  Context::GradBuffer &buffer = ctx.gradBuffer(param, fqn);
  // The table's whole buffer zeroed by the step's first gradient; the rows
  // are then added into it where the ids point, no [vocab, hidden] tensor.
  if (buffer.takeFirst(splitDim, owned))
    memset(buffer.grad.raw(), 0, buffer.grad.bytes());
  VocabRange range = vocabPartOf(ctx, param.dim(0), vocabParallel, vocabStarts,
                                 vocabSizes, op);
  addEmbeddingRows(ids, dy, buffer.grad.f32(), param.dim(1), range.start,
                   range.rows, paddingIdx, op);
}

Tensors rms_norm_grad(Context &ctx, const Tensor &x, const Tensor &w,
                      const Tensor &dy, double eps, double offset,
                      int64_t group) {
  // x and dy of one type read natively; a mixed pair meets in f32.
  if (x.dtype() != dy.dtype())
    return narrowedLike(cuda::rms_norm_grad(ctx, widened(x), widened(w),
                                            widened(dy), eps, offset, group),
                        {&x, &w});
  requireGpuFloat(x, "rms_norm_grad", "x");
  DType dtype = x.dtype();
  requireGpu(dy, dtype, "rms_norm_grad", "dy");
  Tensor wf = widened(w);
  requireGpu(wf, DType::F32, "rms_norm_grad", "the weight");
  int64_t features = x.rank() ? x.dim(-1) : 0;
  if (group == 0)
    group = features;
  if (x.shape() != dy.shape() || group <= 0 || features % group != 0 ||
      wf.numel() != group)
    fatal("rms_norm_grad: input " + x.describe() + ", dy " + dy.describe() +
          ", weight " + w.describe() + " and group " + std::to_string(group) +
          " do not match");
  int64_t groups = x.numel() / group;
  Tensor dx = Tensor::uninitialized(dtype, x.shape(), Device::CUDA);
  Tensor dw = zeros(wf.shape());
  if (groups == 0)
    return {dx, narrowed(dw, reducedType(w))};
  Tensor inv = Tensor::uninitialized(DType::F32, {groups}, Device::CUDA);
  int64_t chunks = (groups + kWeightGradChunk - 1) / kWeightGradChunk;
  std::shared_ptr<unsigned char[]> partial =
      allocate(chunks * group * sizeof(double));
  auto launch = [&](auto element) {
    using T = decltype(element);
    const T *xs = static_cast<const T *>(x.raw());
    const T *dys = static_cast<const T *>(dy.raw());
    rmsNormGradKernel<T><<<gridBlocks(groups, 1), kThreads, 0, stream()>>>(
        xs, wf.f32(), dys, static_cast<T *>(dx.raw()), inv.f32(), groups, group,
        static_cast<float>(eps), static_cast<float>(offset));
    checkLaunch("rms_norm_grad");
    dim3 grid(gridBlocks(group, kThreads), static_cast<unsigned>(chunks));
    rmsNormWeightGradPartialKernel<T><<<grid, kThreads, 0, stream()>>>(
        xs, dys, inv.f32(), reinterpret_cast<double *>(partial.get()), groups,
        group);
    checkLaunch("rms_norm_grad: weight");
  };
  withFloatType(dtype, launch);
  rmsNormWeightGradKernel<<<gridBlocks(group, kThreads), kThreads, 0,
                            stream()>>>(
      reinterpret_cast<const double *>(partial.get()), dw.f32(), chunks, group);
  checkLaunch("rms_norm_grad: weight");
  // The weight's gradient is of the weight's type.
  return {dx, narrowed(dw, reducedType(w))};
}

Tensor activation_grad(const Tensor &x, const Tensor &dy, Activation op,
                       float parameter, const char *name) {
  if (x.dtype() != dy.dtype())
    TPRT_IN_F32(
        reducedType(x, dy),
        cuda::activation_grad(widened(x), widened(dy), op, parameter, name))
  switch (op) {
  case Activation::Silu:
    return mapOnGpu(x, dy, ActivationGradFn<Activation::Silu>{parameter}, name);
  case Activation::ReluSquared:
    return mapOnGpu(x, dy, ActivationGradFn<Activation::ReluSquared>{parameter},
                    name);
  case Activation::Gelu:
    return mapOnGpu(x, dy, ActivationGradFn<Activation::Gelu>{parameter}, name);
  case Activation::GeluTanh:
    return mapOnGpu(x, dy, ActivationGradFn<Activation::GeluTanh>{parameter},
                    name);
  case Activation::Softcap:
    return mapOnGpu(x, dy, ActivationGradFn<Activation::Softcap>{parameter},
                    name);
  }
  fatal(std::string(name) + ": unknown activation");
}

Tensors tiledAttentionGrad(const Tensor &q, const Tensor &k, const Tensor &v,
                           const Tensor &dout, const Tensor &keyMask,
                           int64_t heads, int64_t kvHeads, int64_t headDim,
                           double scale, bool causal, int64_t window,
                           double softcap, const AttentionStats *saved) {
  requireGpu(dout, DType::F32, "attention_grad", "dout");
  if (dout.shape() != q.shape())
    fatal("attention_grad: dout " + dout.describe() + " is not shaped like q " +
          q.describe());
  // Without the forward's: the forward again, keeping each row's
  // log-sum-exp and dout . out.
  AttentionStats stats =
      saved ? *saved
            : attentionWithStats(q, k, v, keyMask, dout, heads, kvHeads,
                                 headDim, scale, causal, window, softcap,
                                 "attention_grad");
  int64_t batch = q.dim(0), sq = q.dim(1), skv = k.dim(1);
  Tensor dq = Tensor::uninitialized(DType::F32, q.shape(), Device::CUDA);
  Tensor dk = zeros(k.shape()), dv = zeros(v.shape());
  if (batch == 0 || sq == 0 || heads == 0)
    return {dq, dk, dv};
  const int64_t tile = kAttentionKeyTile, rows = kAttentionRowsPerBlock;
  size_t sharedBytes =
      (2 * tile * (headDim + 1) + 2 * rows * headDim + 2 * rows * tile) *
      sizeof(float);
  dim3 grid(static_cast<unsigned>((sq + rows - 1) / rows),
            static_cast<unsigned>(heads), static_cast<unsigned>(batch));
  int group = static_cast<int>(heads / kvHeads), d = static_cast<int>(headDim),
      h = static_cast<int>(heads);
  float fscale = static_cast<float>(scale), cap = static_cast<float>(softcap);
  const int64_t *mask = keyMask.defined() ? keyMask.i64() : nullptr;
  int64_t offset = skv - sq;
  if (headDim <= 64)
    launchAttentionGrad<2>(grid, sharedBytes, q.f32(), k.f32(), v.f32(),
                           dout.f32(), mask, stats.lse.f32(), stats.delta.f32(),
                           dq.f32(), dk.f32(), dv.f32(), sq, skv, h, group, d,
                           fscale, causal, window, cap, offset);
  else if (headDim <= 128)
    launchAttentionGrad<4>(grid, sharedBytes, q.f32(), k.f32(), v.f32(),
                           dout.f32(), mask, stats.lse.f32(), stats.delta.f32(),
                           dq.f32(), dk.f32(), dv.f32(), sq, skv, h, group, d,
                           fscale, causal, window, cap, offset);
  else
    launchAttentionGrad<8>(grid, sharedBytes, q.f32(), k.f32(), v.f32(),
                           dout.f32(), mask, stats.lse.f32(), stats.delta.f32(),
                           dq.f32(), dk.f32(), dv.f32(), sq, skv, h, group, d,
                           fscale, causal, window, cap, offset);
  return {dq, dk, dv};
}

Tensor replica_sum(Context &ctx, const Tensor &x, std::vector<int64_t> blocks) {
  requireGpu(x, DType::F32, "replica_sum", "the input");
  int64_t n = x.numel();
  ReplicaBlocks b = replicaBlocksOf(ctx.tp().rank(), ctx.tp().size(), blocks);
  // Each block's slot of one all-reduce: the ranks sharing it add into it.
  Tensor slots = zeros({b.count, n});
  copy(slots.f32() + b.mine * n, Device::CUDA, x.raw(), Device::CUDA,
       x.bytes());
  ctx.tp().allReduceSum(slots.f32(), slots.numel());
  Tensor out = Tensor::uninitialized(DType::F32, x.shape(), Device::CUDA);
  copy(out.raw(), Device::CUDA, slots.f32() + b.mine * n, Device::CUDA,
       x.bytes());
  return out;
}

Tensors silu_mul_grad(Context &ctx, const Tensor &gate, const Tensor &up,
                      const Tensor &dy) {
  // Operands of mixed types as the separate calls (each rounds its result).
  for (const Tensor *t : {&up, &dy})
    if (!gate.defined() || !t->defined() || t->dtype() != gate.dtype())
      return composed::silu_mul_grad(ctx, gate, up, dy);
  requireGpuFloat(gate, "silu_mul_grad", "the gate");
  DType dtype = gate.dtype();
  requireGpu(up, dtype, "silu_mul_grad", "the up projection");
  requireGpu(dy, dtype, "silu_mul_grad", "dy");
  requireSameShape(gate, up, "silu_mul_grad");
  requireSameShape(gate, dy, "silu_mul_grad");
  Tensor dgate = Tensor::uninitialized(dtype, gate.shape(), Device::CUDA);
  Tensor dup = Tensor::uninitialized(dtype, gate.shape(), Device::CUDA);
  int64_t n = gate.numel();
  if (n == 0)
    return {dgate, dup};
  bool packed = packAligned(gate.raw()) && packAligned(up.raw()) &&
                packAligned(dy.raw()) && packAligned(dgate.raw()) &&
                packAligned(dup.raw());
  withFloatType(dtype, [&](auto element) {
    using T = decltype(element);
    int64_t work = packed ? n / Pack<T>::size + 1 : n;
    siluMulGradKernel<T>
        <<<gridBlocks(work, kMapThreads), kMapThreads, 0, stream()>>>(
            static_cast<const T *>(gate.raw()),
            static_cast<const T *>(up.raw()), static_cast<const T *>(dy.raw()),
            static_cast<T *>(dgate.raw()), static_cast<T *>(dup.raw()), n,
            packed);
  });
  checkLaunch("silu_mul_grad");
  return {dgate, dup};
}

Tensor silu_grad(Context &, const Tensor &x, const Tensor &dy) {
  return activation_grad(x, dy, Activation::Silu, 0, "silu_grad");
}

Tensor relu_squared_grad(Context &, const Tensor &x, const Tensor &dy) {
  return activation_grad(x, dy, Activation::ReluSquared, 0,
                         "relu_squared_grad");
}

Tensor gelu_grad(Context &, const Tensor &x, const Tensor &dy,
                 bool tanhApproximation) {
  return activation_grad(
      x, dy, tanhApproximation ? Activation::GeluTanh : Activation::Gelu, 0,
      "gelu_grad");
}

Tensor softcap_grad(Context &, const Tensor &x, const Tensor &dy, double cap) {
  return activation_grad(x, dy, Activation::Softcap, static_cast<float>(cap),
                         "softcap_grad");
}

} // namespace cuda
} // namespace tprt
