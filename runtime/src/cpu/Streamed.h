//===- Streamed.h - host kernels over a weight read in blocks ---*- C++ -*-===//
//
// The loss and the embedding gradient of a vocabulary table that is never
// whole in memory (--zero 3 holds it as data-parallel runs): the caller
// provides a block of rows at a time and takes each block's gradient.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_STREAMED_H
#define TPRT_CPU_STREAMED_H

#include "tprt/tprt.h"

#include <functional>

namespace tprt::cpu {

/// Writes rows [first, first + rows) of the table, f32, into `out`.
using ReadRows = std::function<void(int64_t first, int64_t rows, float *out)>;
/// Takes the gradient of rows [first, first + rows), f32, from `grad`.
using TakeRows =
    std::function<void(int64_t first, int64_t rows, const float *grad)>;

/// embedding (or, `vocabParallel`, its vocabulary-parallel form) of a
/// [vocab, hidden] table read `blockRows` rows at a time; f32 rows.
Tensor streamedEmbedding(Context &ctx, const Tensor &ids, int64_t vocab,
                         int64_t hidden, int64_t blockRows, bool vocabParallel,
                         const std::vector<int64_t> &starts,
                         const std::vector<int64_t> &sizes,
                         const ReadRows &read);

/// {loss sum, dx} of accumulate_linear_cross_entropy over a [vocab, hidden]
/// weight read `blockRows` rows at a time in three passes (the maxima, the
/// sums of exponentials and target logits, the gradients): per element the
/// separate ops' arithmetic. x f32 [B, S, hidden].
Tensors streamedLinearCrossEntropy(Context &ctx, const Tensor &x,
                                   const Tensor &ids, const Tensor &mask,
                                   int64_t vocab, int64_t blockRows,
                                   bool vocabParallel,
                                   const std::vector<int64_t> &starts,
                                   const std::vector<int64_t> &sizes,
                                   const ReadRows &read, const TakeRows &take);

/// accumulate_embedding_grad of a [vocab, hidden] table `blockRows` rows at
/// a time, each block's gradient given to `take`.
void streamedEmbeddingGrad(Context &ctx, const Tensor &ids, const Tensor &dy,
                           int64_t vocab, int64_t hidden, int64_t blockRows,
                           bool vocabParallel, int64_t paddingIdx,
                           const std::vector<int64_t> &starts,
                           const std::vector<int64_t> &sizes,
                           const TakeRows &take);

} // namespace tprt::cpu

#endif // TPRT_CPU_STREAMED_H
