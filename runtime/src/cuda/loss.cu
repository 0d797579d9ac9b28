//===- loss.cu - the causal-LM cross-entropy on the GPU -------------------===//
//
// tp.cross_entropy and its gradient as the CPU computes them
// (src/cpu/loss.cpp): per position the maximum, the sum of exponentials
// (FP64) and the target logit, all-reduced over the group in the
// vocabulary-parallel form. The loss is summed on the host in position
// order, as the CPU sums it. tp.linear_cross_entropy runs the same kernels
// on blocks of positions between its GEMMs.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
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

// The kernels below take `rows` rows of `vocab` logits, row r being
// position first + r of the [B, S] ids (a block of the positions for the
// fused loss, all of them otherwise), and per-row statistics indexed by r.

/// One block per row: the maximum of the row's first `valid` of `vocab`
/// logits (the rest an uneven block's padding).
__global__ void rowMaxKernel(const float *x, float *m, int64_t rows,
                             int64_t vocab, int64_t valid) {
  __shared__ float scratch[kThreads / 32];
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
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

/// One block per row: the sum of exp(x - m) in FP64 and the target logit
/// (0 when another rank's block holds it); a label outside the vocabulary
/// records its position in `firstBad`.
__global__ void rowSumKernel(const float *x, const float *m, const int64_t *ids,
                             const int64_t *mask, float *sums, float *targets,
                             int64_t first, int64_t rows, int64_t seq,
                             int64_t vocab, int64_t valid, int64_t start,
                             int64_t fullVocab, unsigned long long *firstBad) {
  __shared__ double scratch[kThreads / 32];
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
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
      int64_t label = labelAt(ids, mask, first + i, seq);
      if (label >= fullVocab || label < -1)
        atomicMin(firstBad, static_cast<unsigned long long>(first + i));
      targets[i] =
          label >= start && label < start + valid ? row[label - start] : 0.0f;
    }
  }
}

/// lse = m + log(sum); each counted position's loss lse - target (0 for
/// the others).
__global__ void lossKernel(float *m, const float *sums, const float *targets,
                           const int64_t *ids, const int64_t *mask,
                           float *losses, int64_t first, int64_t rows,
                           int64_t seq) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows;
       i += int64_t(gridDim.x) * blockDim.x) {
    m[i] += logf(sums[i]);
    losses[i] =
        labelAt(ids, mask, first + i, seq) >= 0 ? m[i] - targets[i] : 0.0f;
  }
}

/// The sum of `n` losses in position order, in FP64, rounded once: what
/// the CPU's loop gives, bit for bit. One thread: the order is the point,
/// and a step's positions are few beside its GEMMs.
__global__ void sumInOrderKernel(const float *losses, int64_t n, float *total) {
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(losses[i]);
  *total = static_cast<float>(sum);
}

/// One block per row: softmax - onehot over the first `valid` logits of a
/// counted row, zero in the padding and in rows that do not count. Every
/// element is written, and `x` may be `out` (the fused loss's block).
__global__ void crossEntropyGradKernel(const float *x, const int64_t *ids,
                                       const int64_t *mask, const float *lse,
                                       float *out, int64_t first, int64_t rows,
                                       int64_t seq, int64_t vocab,
                                       int64_t valid, int64_t start) {
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    int64_t label = labelAt(ids, mask, first + i, seq);
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      float g = 0.0f;
      if (label >= 0 && v < valid) {
        g = expf(x[i * vocab + v] - lse[i]);
        if (v == label - start)
          g -= 1.0f;
      }
      out[i * vocab + v] = g;
    }
  }
}

/// The statistics of a loss over `positions` positions (device buffers of
/// `positions` floats each) and the first position with a label outside
/// the vocabulary.
struct LossState {
  Tensor lse, sums, targets, losses, firstBad;
  LossState(int64_t batch, int64_t seq) {
    int64_t positions = batch * seq;
    lse = Tensor::uninitialized(DType::F32, {batch, seq}, Device::CUDA);
    sums = Tensor::uninitialized(DType::F32, {positions}, Device::CUDA);
    targets = Tensor::uninitialized(DType::F32, {positions}, Device::CUDA);
    losses = Tensor::uninitialized(DType::F32, {positions}, Device::CUDA);
    firstBad = Tensor::uninitialized(DType::I64, {1}, Device::CUDA);
    memset(firstBad.raw(), 0xff, sizeof(int64_t));
  }
};

/// Positions [first, first + rows) of a loss whose logits are `logits`
/// (rows x vocab, of which `range` says this rank's entries): lse and
/// each position's loss into `state`, the statistics all-reduced over the
/// group when vocabulary-parallel.
void lossOfRows(Context &ctx, const float *logits, int64_t vocab,
                const VocabRange &range, bool vocabParallel, const Tensor &ids,
                const Tensor &mask, int64_t first, int64_t rows,
                LossState &state, const char *op) {
  int64_t seq = ids.dim(1);
  float *lse = state.lse.f32() + first, *sums = state.sums.f32() + first,
        *targets = state.targets.f32() + first;
  unsigned blocks = gridBlocks(rows, 1);
  rowMaxKernel<<<blocks, kThreads, 0, stream()>>>(logits, lse, rows, vocab,
                                                  range.rows);
  checkLaunch(op);
  if (vocabParallel)
    ctx.tp().allReduceMax(lse, rows);
  rowSumKernel<<<blocks, kThreads, 0, stream()>>>(
      logits, lse, ids.i64(), mask.i64(), sums, targets, first, rows, seq,
      vocab, range.rows, range.start, range.vocab,
      static_cast<unsigned long long *>(state.firstBad.raw()));
  checkLaunch(op);
  if (vocabParallel) {
    ctx.tp().allReduceSum(sums, rows);
    ctx.tp().allReduceSum(targets, rows);
  }
  lossKernel<<<gridBlocks(rows, kThreads), kThreads, 0, stream()>>>(
      lse, sums, targets, ids.i64(), mask.i64(), state.losses.f32() + first,
      first, rows, seq);
  checkLaunch(op);
}

/// The loss's sum over the positions, in position order as the CPU sums
/// it, after the check that every label is in the vocabulary. The check
/// reads back to the host, so a CUDA graph capture skips it (the training
/// loop checked its data's ids against the vocabulary before the first
/// step).
Tensor lossTotal(const LossState &state, const Tensor &ids, int64_t vocab,
                 const char *op) {
  int64_t seq = ids.dim(1), positions = ids.numel();
  if (!capturing(stream())) {
    unsigned long long bad = 0;
    copy(&bad, Device::CPU, state.firstBad.raw(), Device::CUDA, sizeof(bad));
    if (bad != ULLONG_MAX) {
      int64_t label = 0;
      copy(&label, Device::CPU, ids.i64() + bad + 1, Device::CUDA,
           sizeof(label));
      fatal(std::string(op) + ": label " + std::to_string(label) + " at row " +
            std::to_string(bad / seq) + ", position " +
            std::to_string(bad % seq + 1) + " is outside the vocabulary [0, " +
            std::to_string(vocab) + ")");
    }
  }
  Tensor total = Tensor::uninitialized(DType::F32, {}, Device::CUDA);
  sumInOrderKernel<<<1, 1, 0, stream()>>>(state.losses.f32(), positions,
                                          total.f32());
  checkLaunch(op);
  return total;
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

/// Logits per block of the fused loss: 32 Mi floats (128 MiB; at least
/// 256 positions, lossBlockPositions), so that the block's three GEMMs stay
/// large.
constexpr int64_t kLossBlockElements = int64_t(1) << 25;

/// tp.linear_cross_entropy in f32 (bf16 autocast's products as linear's)
/// or in bf16 (a bf16 program's x and w): per block of positions the logits
/// (one GEMM), the loss's statistics as cross_entropy computes them, the
/// logits' gradient in place, then the block's rows of dx (a GEMM) and its
/// share of dw (a GEMM adding into dw, beta 1 after the first block). With
/// `dwInto`, dw goes into that [V, H] f32 buffer (added to it unless
/// `overwrite`) and is not returned. The [B, S, V] logits are never held;
/// only dw's sum over positions is grouped by block. In bf16 each block's
/// logits and their gradient are rounded to bf16 as the separate calls
/// round them (the statistics read the logits widened), dx is bf16, and dw
/// is summed in f32 (rounded to bf16 once when returned).
Tensors linearCrossEntropy(Context &ctx, const Tensor &x, const Tensor &w,
                           const Tensor &ids, const Tensor &mask,
                           bool vocabParallel,
                           const std::vector<int64_t> &starts,
                           const std::vector<int64_t> &sizes,
                           float *dwInto = nullptr, bool overwrite = false) {
  const char *op = vocabParallel ? "linear_cross_entropy_vocab_parallel"
                                 : "linear_cross_entropy";
  DType type = x.dtype();
  bool program16 = type == DType::BF16;
  if (!program16)
    requireGpu(x, DType::F32, op, "x");
  requireGpu(x, type, op, "x");
  requireGpu(w, type, op, "the weight");
  requireGpu(ids, DType::I64, op, "the ids");
  requireGpu(mask, DType::I64, op, "the mask");
  requireLinearCrossEntropyShapes(x, w, ids, mask, op);
  int64_t batch = x.dim(0), seq = x.dim(1), hidden = x.dim(2), vocab = w.dim(0),
          positions = batch * seq;
  VocabRange range = vocabPartOf(ctx, vocab, vocabParallel, starts, sizes, op);
  LossState state(batch, seq);
  bool products = positions > 0 && vocab > 0 && hidden > 0;
  Tensor dx = products ? Tensor::uninitialized(type, x.shape(), Device::CUDA)
                       : zeros(x.shape(), type);
  Tensor dw;
  float *dwOut = dwInto;
  if (!dwInto) {
    dw = Tensor::uninitialized(DType::F32, w.shape(), Device::CUDA);
    dwOut = dw.f32();
  }
  if (!products && (!dwInto || overwrite))
    memset(dwOut, 0, w.numel() * sizeof(float));
  // Under bf16 autocast the products read bf16 copies of x and w, made
  // once (linear's GEMM would round them for each block).
  bool autocast = !program16 && ctx.autocast() == DType::BF16;
  DType operands = autocast || program16 ? DType::BF16 : DType::F32;
  size_t elementBytes = operands == DType::BF16 ? 2 : sizeof(float);
  std::shared_ptr<unsigned char[]> x16, w16;
  const void *xData = x.raw(), *wData = w.raw();
  if (autocast && products) {
    x16 = toBf16(x.f32(), x.numel());
    w16 = toBf16(w.f32(), w.numel());
    xData = x16.get();
    wData = w16.get();
  }
  int64_t blockRows = lossBlockPositions(positions, vocab, kLossBlockElements);
  Tensor block, block16;
  if (positions > 0)
    block = Tensor::uninitialized(DType::F32, {blockRows, vocab}, Device::CUDA);
  if (positions > 0 && program16)
    block16 = Tensor::uninitialized(type, {blockRows, vocab}, Device::CUDA);
  for (int64_t first = 0; first < positions; first += blockRows) {
    int64_t rows = std::min(blockRows, positions - first);
    float *logits = block.f32();
    const void *xRows =
        static_cast<const char *>(xData) + first * hidden * elementBytes;
    // logits [rows, V] = x w^T: column-major w(T) x(N), as linear (a bf16
    // program's rounded to bf16 as linear's result, then read widened).
    if (products && program16) {
      gemm(ctx, op, operands, type, vocab, rows, hidden,
           {wData, w.numel(), CUBLAS_OP_T, hidden, 0},
           {xRows, rows * hidden, CUBLAS_OP_N, hidden, 0}, block16.raw(), 0, 1);
      convertInto(block16.raw(), type, logits, DType::F32, rows * vocab);
    } else if (products)
      gemm(ctx, op, operands, DType::F32, vocab, rows, hidden,
           {wData, w.numel(), CUBLAS_OP_T, hidden, 0},
           {xRows, rows * hidden, CUBLAS_OP_N, hidden, 0}, logits, 0, 1);
    else if (vocab > 0)
      memset(logits, 0, rows * vocab * sizeof(float));
    lossOfRows(ctx, logits, vocab, range, vocabParallel, ids, mask, first, rows,
               state, op);
    crossEntropyGradKernel<<<gridBlocks(rows, 1), kThreads, 0, stream()>>>(
        logits, ids.i64(), mask.i64(), state.lse.f32() + first, logits, first,
        rows, seq, vocab, range.rows, range.start);
    checkLaunch(op);
    if (!products)
      continue;
    std::shared_ptr<unsigned char[]> grad16;
    const void *grad = logits;
    if (autocast) {
      grad16 = toBf16(logits, rows * vocab);
      grad = grad16.get();
    } else if (program16) {
      // The logits' gradient is of the logits' type.
      convertInto(logits, DType::F32, block16.raw(), type, rows * vocab);
      grad = block16.raw();
    }
    // dx's rows [rows, H] = dlogits w: column-major w(N) dlogits(N), as
    // linear_grad_input.
    gemm(ctx, op, operands, type, hidden, rows, vocab,
         {wData, w.numel(), CUBLAS_OP_N, hidden, 0},
         {grad, rows * vocab, CUBLAS_OP_N, vocab, 0},
         static_cast<char *>(dx.raw()) + first * hidden * dtypeSize(type), 0,
         1);
    // dw [V, H] (+)= dlogits^T x: column-major x(N) dlogits(T), as
    // linear_grad_weight.
    bool add = first > 0 || (dwInto && !overwrite);
    gemm(ctx, op, operands, DType::F32, hidden, vocab, rows,
         {xRows, rows * hidden, CUBLAS_OP_N, hidden, 0},
         {grad, rows * vocab, CUBLAS_OP_T, vocab, 0}, dwOut, 0, 1,
         add ? 1.0f : 0.0f);
  }
  Tensor total = lossTotal(state, ids, range.vocab, op);
  if (dwInto)
    return {total, dx};
  return {total, dx, narrowed(dw, program16 ? type : DType::F32)};
}

/// Whether the fused loss takes x and w: both f32, or both bf16.
bool fusedLossTakes(const Tensor &x, const Tensor &w) {
  return x.defined() && w.defined() && x.dtype() == w.dtype() &&
         (x.dtype() == DType::F32 || x.dtype() == DType::BF16);
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
  int64_t batch = logits.dim(0), seq = logits.dim(1), vocab = logits.dim(2);
  VocabRange range = vocabPartOf(ctx, vocab, vocabParallel, starts, sizes, op);
  LossState state(batch, seq);
  if (batch * seq > 0)
    lossOfRows(ctx, logits.f32(), vocab, range, vocabParallel, ids, mask, 0,
               batch * seq, state, op);
  return {lossTotal(state, ids, range.vocab, op), state.lse};
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
  if (positions == 0 || vocab == 0)
    return zeros(logits.shape());
  // The kernel writes every element (zeros where nothing counts).
  Tensor out = Tensor::uninitialized(DType::F32, logits.shape(), Device::CUDA);
  crossEntropyGradKernel<<<gridBlocks(positions, 1), kThreads, 0, stream()>>>(
      logits.f32(), ids.i64(), mask.i64(), lse.f32(), out.f32(), 0, positions,
      seq, vocab, range.rows, range.start);
  checkLaunch("cross_entropy_grad");
  return out;
}

Tensors linear_cross_entropy(Context &ctx, const Tensor &x, const Tensor &w,
                             const Tensor &ids, const Tensor &mask) {
  if (!fusedLossTakes(x, w))
    return composed::linear_cross_entropy(ctx, x, w, ids, mask);
  return linearCrossEntropy(ctx, x, w, ids, mask, false, {}, {});
}

Tensors linear_cross_entropy_vocab_parallel(Context &ctx, const Tensor &x,
                                            const Tensor &w, const Tensor &ids,
                                            const Tensor &mask,
                                            std::vector<int64_t> vocabStarts,
                                            std::vector<int64_t> vocabSizes) {
  if (!fusedLossTakes(x, w))
    return composed::linear_cross_entropy_vocab_parallel(
        ctx, x, w, ids, mask, std::move(vocabStarts), std::move(vocabSizes));
  return linearCrossEntropy(ctx, x, w, ids, mask, true, vocabStarts,
                            vocabSizes);
}

Tensors accumulate_linear_cross_entropy(Context &ctx, const Tensor &x,
                                        const Tensor &w, const Tensor &ids,
                                        const Tensor &mask, const char *fqn,
                                        int64_t splitDim, bool owned,
                                        bool vocabParallel,
                                        std::vector<int64_t> vocabStarts,
                                        std::vector<int64_t> vocabSizes) {
  if (!fusedLossTakes(x, w))
    return composed::accumulate_linear_cross_entropy(
        ctx, x, w, ids, mask, fqn, splitDim, owned, vocabParallel,
        std::move(vocabStarts), std::move(vocabSizes));
  Context::GradBuffer &buffer = ctx.gradBuffer(w, fqn);
  bool first = buffer.takeFirst(splitDim, owned);
  return linearCrossEntropy(ctx, x, w, ids, mask, vocabParallel, vocabStarts,
                            vocabSizes, buffer.grad.f32(), first);
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
