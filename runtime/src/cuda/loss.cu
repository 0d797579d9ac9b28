//===- loss.cu - the causal-LM cross-entropy on the GPU -------------------===//
//
// tp.cross_entropy and its gradient as the CPU computes them
// (src/cpu/loss.cpp): per position the maximum, the sum of exponentials
// (FP64) and the target logit, all-reduced over the group in the
// vocabulary-parallel form. The loss is summed on the host in position
// order, as the CPU sums it.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"
#include "Tiling.h"
#include "common/Checks.h"

#include <cfloat>
#include <climits>
#include <cmath>
#include <vector>

namespace tprt {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

/// The label of position i = b * seq + t: the next token when it counts,
/// else -1.
__device__ int64_t labelAt(const int64_t *ids, const int64_t *mask, int64_t i,
                           int64_t seq) {
  int64_t t = i % seq;
  if (t + 1 >= seq || mask[i + 1] == 0)
    return -1;
  return ids[i + 1];
}

/// One block per position: the maximum of the row's first `valid` of
/// `vocab` logits (the rest an uneven block's padding).
__global__ void rowMaxKernel(const float *x, float *m, int64_t positions,
                             int64_t vocab, int64_t valid) {
  __shared__ float scratch[kThreads / 32];
  for (int64_t i = blockIdx.x; i < positions; i += gridDim.x) {
    const float *row = x + i * vocab;
    float best = -INFINITY;
    for (int64_t v = threadIdx.x; v < valid; v += blockDim.x)
      best = fmaxf(best, row[v]);
    for (int off = 16; off; off >>= 1)
      best = fmaxf(best, __shfl_xor_sync(kFullMask, best, off));
    __syncthreads();
    if (threadIdx.x % 32 == 0)
      scratch[threadIdx.x / 32] = best;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kThreads / 32; ++w)
        best = fmaxf(best, scratch[w]);
      m[i] = fmaxf(best, scratch[0]);
    }
  }
}

/// One block per position: the sum of exp(x - m) in FP64 and the target
/// logit (0 when another rank's block holds it); a label outside the
/// vocabulary records its position in `firstBad`.
__global__ void rowSumKernel(const float *x, const float *m, const int64_t *ids,
                             const int64_t *mask, float *sums, float *targets,
                             int64_t positions, int64_t seq, int64_t vocab,
                             int64_t valid, int64_t start, int64_t fullVocab,
                             unsigned long long *firstBad) {
  __shared__ double scratch[kThreads / 32];
  for (int64_t i = blockIdx.x; i < positions; i += gridDim.x) {
    const float *row = x + i * vocab;
    double sum = 0;
    for (int64_t v = threadIdx.x; v < valid; v += blockDim.x)
      sum += exp(static_cast<double>(row[v] - m[i]));
    for (int off = 16; off; off >>= 1)
      sum += __shfl_xor_sync(kFullMask, sum, off);
    __syncthreads();
    if (threadIdx.x % 32 == 0)
      scratch[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
      double total = 0;
      for (int w = 0; w < kThreads / 32; ++w)
        total += scratch[w];
      sums[i] = static_cast<float>(total);
      int64_t label = labelAt(ids, mask, i, seq);
      if (label >= fullVocab || label < -1)
        atomicMin(firstBad, static_cast<unsigned long long>(i));
      targets[i] =
          label >= start && label < start + valid ? row[label - start] : 0.0f;
    }
  }
}

/// lse = m + log(sum); each counted position's loss lse - target (0 for
/// the others).
__global__ void lossKernel(float *m, const float *sums, const float *targets,
                           const int64_t *ids, const int64_t *mask,
                           float *losses, int64_t positions, int64_t seq) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       i < positions; i += int64_t(gridDim.x) * blockDim.x) {
    m[i] += logf(sums[i]);
    losses[i] = labelAt(ids, mask, i, seq) >= 0 ? m[i] - targets[i] : 0.0f;
  }
}

/// One block per counted position: softmax - onehot over the first
/// `valid` logits (rows that do not count, and the padding, stay zero).
__global__ void crossEntropyGradKernel(const float *x, const int64_t *ids,
                                       const int64_t *mask, const float *lse,
                                       float *out, int64_t positions,
                                       int64_t seq, int64_t vocab,
                                       int64_t valid, int64_t start) {
  for (int64_t i = blockIdx.x; i < positions; i += gridDim.x) {
    int64_t label = labelAt(ids, mask, i, seq);
    if (label < 0)
      continue;
    for (int64_t v = threadIdx.x; v < valid; v += blockDim.x) {
      float g = expf(x[i * vocab + v] - lse[i]);
      if (v == label - start)
        g -= 1.0f;
      out[i * vocab + v] = g;
    }
  }
}

void checkLoss(const Tensor &logits, const Tensor &ids, const Tensor &mask,
               const char *op) {
  requireGpu(logits, DType::F32, op, "the logits");
  requireGpu(ids, DType::I64, op, "the ids");
  requireGpu(mask, DType::I64, op, "the mask");
  if (logits.rank() != 3 || ids.rank() != 2 || ids.shape() != mask.shape() ||
      ids.dim(0) != logits.dim(0) || ids.dim(1) != logits.dim(1))
    fatal(std::string(op) + ": logits " + logits.describe() + ", ids " +
          ids.describe() + " and mask " + mask.describe() +
          " are not [B, S, V], int64 [B, S], int64 [B, S]");
}

} // namespace

Tensors crossEntropy(Context &ctx, const Tensor &logits, const Tensor &ids,
                     const Tensor &mask, bool vocabParallel,
                     const std::vector<int64_t> &starts,
                     const std::vector<int64_t> &sizes) {
  // As transformers' loss upcasts the logits: loss and lse in f32.
  if (reducedType(logits) != DType::F32)
    return crossEntropy(ctx, widened(logits), ids, mask, vocabParallel, starts,
                        sizes);
  const char *op =
      vocabParallel ? "cross_entropy_vocab_parallel" : "cross_entropy";
  checkLoss(logits, ids, mask, op);
  int64_t batch = logits.dim(0), seq = logits.dim(1), vocab = logits.dim(2),
          positions = batch * seq;
  VocabRange range = vocabPartOf(ctx, vocab, vocabParallel, starts, sizes, op);
  int64_t start = range.start;
  Tensor lse = Tensor::uninitialized(DType::F32, {batch, seq}, Device::CUDA);
  Tensor total = Tensor::uninitialized(DType::F32, {}, Device::CUDA);
  if (positions == 0) {
    float zero = 0;
    copy(total.raw(), Device::CUDA, &zero, Device::CPU, sizeof(zero));
    return {total, lse};
  }
  Tensor sums = Tensor::uninitialized(DType::F32, {positions}, Device::CUDA);
  Tensor targets = Tensor::uninitialized(DType::F32, {positions}, Device::CUDA);
  Tensor firstBad = Tensor::uninitialized(DType::I64, {1}, Device::CUDA);
  memset(firstBad.raw(), 0xff, sizeof(int64_t));
  unsigned blocks = gridBlocks(positions, 1);
  rowMaxKernel<<<blocks, kThreads, 0, stream()>>>(logits.f32(), lse.f32(),
                                                  positions, vocab, range.rows);
  checkLaunch(op);
  if (vocabParallel)
    ctx.tp().allReduceMax(lse.f32(), positions);
  rowSumKernel<<<blocks, kThreads, 0, stream()>>>(
      logits.f32(), lse.f32(), ids.i64(), mask.i64(), sums.f32(), targets.f32(),
      positions, seq, vocab, range.rows, start, range.vocab,
      static_cast<unsigned long long *>(firstBad.raw()));
  checkLaunch(op);
  unsigned long long bad = 0;
  copy(&bad, Device::CPU, firstBad.raw(), Device::CUDA, sizeof(bad));
  if (bad != ULLONG_MAX) {
    int64_t label = 0;
    copy(&label, Device::CPU, ids.i64() + bad + 1, Device::CUDA, sizeof(label));
    fatal(std::string(op) + ": label " + std::to_string(label) + " at row " +
          std::to_string(bad / seq) + ", position " +
          std::to_string(bad % seq + 1) + " is outside the vocabulary [0, " +
          std::to_string(range.vocab) + ")");
  }
  if (vocabParallel) {
    ctx.tp().allReduceSum(sums.f32(), positions);
    ctx.tp().allReduceSum(targets.f32(), positions);
  }
  Tensor losses = Tensor::uninitialized(DType::F32, {positions}, Device::CUDA);
  lossKernel<<<gridBlocks(positions, kThreads), kThreads, 0, stream()>>>(
      lse.f32(), sums.f32(), targets.f32(), ids.i64(), mask.i64(), losses.f32(),
      positions, seq);
  checkLaunch(op);
  std::vector<float> host(positions);
  copy(host.data(), Device::CPU, losses.raw(), Device::CUDA,
       positions * sizeof(float));
  double loss = 0;
  for (float l : host)
    loss += static_cast<double>(l);
  float value = static_cast<float>(loss);
  copy(total.raw(), Device::CUDA, &value, Device::CPU, sizeof(value));
  return {total, lse};
}

Tensor cross_entropy_grad(Context &ctx, const Tensor &logits, const Tensor &ids,
                          const Tensor &mask, const Tensor &lse,
                          bool vocabParallel, std::vector<int64_t> vocabStarts,
                          std::vector<int64_t> vocabSizes) {
  TPRT_IN_F32(logits,
              cuda::cross_entropy_grad(ctx, widened(logits), ids, mask, lse,
                                       vocabParallel, vocabStarts, vocabSizes))
  checkLoss(logits, ids, mask, "cross_entropy_grad");
  requireGpu(lse, DType::F32, "cross_entropy_grad", "lse");
  if (lse.shape() != ids.shape())
    fatal("cross_entropy_grad: lse " + lse.describe() + " is not [B, S]");
  int64_t seq = logits.dim(1), vocab = logits.dim(2),
          positions = logits.dim(0) * seq;
  VocabRange range = vocabPartOf(ctx, vocab, vocabParallel, vocabStarts,
                                 vocabSizes, "cross_entropy_grad");
  Tensor out = zeros(logits.shape());
  if (positions == 0 || vocab == 0)
    return out;
  crossEntropyGradKernel<<<gridBlocks(positions, 1), kThreads, 0, stream()>>>(
      logits.f32(), ids.i64(), mask.i64(), lse.f32(), out.f32(), positions, seq,
      vocab, range.rows, range.start);
  checkLaunch("cross_entropy_grad");
  return out;
}

Tensors cross_entropy(Context &ctx, const Tensor &logits, const Tensor &ids,
                      const Tensor &mask) {
  return crossEntropy(ctx, logits, ids, mask, /*vocabParallel=*/false);
}

Tensors cross_entropy_vocab_parallel(Context &ctx, const Tensor &logits,
                                     const Tensor &ids, const Tensor &mask,
                                     std::vector<int64_t> vocabStarts,
                                     std::vector<int64_t> vocabSizes) {
  return crossEntropy(ctx, logits, ids, mask, /*vocabParallel=*/true,
                      vocabStarts, vocabSizes);
}

} // namespace cuda
} // namespace tprt
