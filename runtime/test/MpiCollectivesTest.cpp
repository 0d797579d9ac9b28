//===- MpiCollectivesTest.cpp - the MPI backend on 2+ ranks ---------------===//
//
// Run under mpirun: every rank checks the collectives' results against the
// values each rank contributed. Prints "N passed, N failed" on rank 0.
//
//===----------------------------------------------------------------------===//

#include "comm/SharedMemoryAllReduce.h"
#include "tprt/Buckets.h"
#include "tprt/Train.h"
#include "tprt/tprt.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <mpi.h>
#include <string>
#include <vector>

namespace {

/// Counts a rank's checks and reports each failure.
using Check = std::function<void(bool, const char *)>;

/// The communicator's own collectives on flat buffers.
void checkCommunicator(tprt::Communicator *comm, int r, int n,
                       const Check &check) {
  std::vector<float> data(5);
  for (int i = 0; i < 5; ++i)
    data[i] = float(r + 1) * (i + 1);
  comm->allReduceSum(data.data(), 5);
  bool ok = true;
  for (int i = 0; i < 5; ++i)
    ok &= data[i] == float(n * (n + 1) / 2) * (i + 1);
  check(ok, "allReduceSum");

  std::vector<float> mine = {float(r), float(10 * r)}, all(2 * n);
  comm->allGather(mine.data(), all.data(), 2);
  ok = true;
  for (int q = 0; q < n; ++q)
    ok &= all[2 * q] == q && all[2 * q + 1] == 10 * q;
  check(ok, "allGather");

  // allGatherOthers: the other ranks' blocks in their slots; MPI leaves
  // this rank's slot as it was.
  std::vector<float> others(2 * n, -1.0f);
  comm->allGatherOthers(mine.data(), others.data(), 2);
  ok = true;
  for (int q = 0; q < n; ++q)
    ok &= q == r ? others[2 * q] == -1 && others[2 * q + 1] == -1
                 : others[2 * q] == q && others[2 * q + 1] == 10 * q;
  check(ok, "allGatherOthers");

  std::vector<float> blocks(3 * n), part(3);
  for (int i = 0; i < 3 * n; ++i)
    blocks[i] = float(i + r);
  comm->reduceScatterSum(blocks.data(), part.data(), 3);
  ok = true;
  for (int i = 0; i < 3; ++i)
    ok &= part[i] == float(n * (3 * r + i) + n * (n - 1) / 2);
  check(ok, "reduceScatterSum");
  // In place: this rank's block of the buffer itself.
  for (int i = 0; i < 3 * n; ++i)
    blocks[i] = float(i + r);
  comm->reduceScatterSum(blocks.data(), blocks.data() + 3 * r, 3);
  ok = true;
  for (int i = 0; i < 3; ++i)
    ok &= blocks[3 * r + i] == float(n * (3 * r + i) + n * (n - 1) / 2);
  check(ok, "reduceScatterSum in place");

  double value = r == 1 ? 42.5 : 0.0;
  comm->broadcast(&value, sizeof(value), 1 % n);
  check(value == (n > 1 ? 42.5 : 0.0), "broadcast");
}

// The kernels of shard.all_gather / shard.reduce_scatter on dim 1 (the
// sequence) of a [2, 2 * n, 3] tensor: element (b, s, h) of rank q's
// input is q + 100 b + 10 s + h.
void checkSequenceKernels(tprt::Communicator *comm, int r, int n,
                          const Check &check) {
  bool ok = true;
  tprt::Context ctx(r, n, "", "");
  auto value = [](int q, int b, int s, int h) {
    return float(q + 100 * b + 10 * s + h);
  };
  tprt::Tensor x = tprt::Tensor::uninitialized(tprt::DType::F32, {2, 2 * n, 3});
  for (int b = 0; b < 2; ++b)
    for (int s = 0; s < 2 * n; ++s)
      for (int h = 0; h < 3; ++h)
        x.f32()[(b * 2 * n + s) * 3 + h] = value(r, b, s, h);
  // Rank r keeps rows [2 r, 2 r + 2) of the sum over ranks.
  tprt::Tensor part = tprt::reduce_scatter_sum(ctx, x, 1);
  ok = part.shape() == std::vector<int64_t>{2, 2, 3};
  for (int b = 0; ok && b < 2; ++b)
    for (int s = 0; s < 2; ++s)
      for (int h = 0; h < 3; ++h) {
        float sum = 0;
        for (int q = 0; q < n; ++q)
          sum += value(q, b, 2 * r + s, h);
        ok &= part.f32()[(b * 2 + s) * 3 + h] == sum;
      }
  check(ok, "reduce_scatter_sum on dim 1");
  // Gathering the slices back gives the whole sum on every rank.
  tprt::Tensor full = tprt::all_gather(ctx, part, 1);
  ok = full.shape() == std::vector<int64_t>{2, 2 * n, 3};
  for (int b = 0; ok && b < 2; ++b)
    for (int s = 0; s < 2 * n; ++s)
      for (int h = 0; h < 3; ++h) {
        float sum = 0;
        for (int q = 0; q < n; ++q)
          sum += value(q, b, s, h);
        ok &= full.f32()[(b * 2 * n + s) * 3 + h] == sum;
      }
  check(ok, "all_gather on dim 1");
  // shard.all_slice: rank r's block of a replicated tensor, on dim 1 and
  // on the last dim, without communication; gathering it back is the
  // identity.
  tprt::Tensor rows = tprt::all_slice(ctx, x, 1);
  ok = rows.shape() == std::vector<int64_t>{2, 2, 3};
  for (int b = 0; ok && b < 2; ++b)
    for (int s = 0; s < 2; ++s)
      for (int h = 0; h < 3; ++h)
        ok &= rows.f32()[(b * 2 + s) * 3 + h] == value(r, b, 2 * r + s, h);
  check(ok, "all_slice on dim 1");
  tprt::Tensor wide = tprt::Tensor::uninitialized(tprt::DType::F32, {2, 3 * n});
  for (int i = 0; i < 2 * 3 * n; ++i)
    wide.f32()[i] = float(i);
  tprt::Tensor cols = tprt::all_slice(ctx, wide, 1);
  tprt::Tensor back = tprt::all_gather(ctx, cols, 1);
  ok = cols.shape() == std::vector<int64_t>{2, 3} &&
       back.shape() == wide.shape();
  for (int i = 0; ok && i < 2 * 3 * n; ++i)
    ok &= back.f32()[i] == wide.f32()[i];
  check(ok, "all_slice then all_gather on the last dim");
  // On the outermost dim the blocks go straight into place.
  tprt::Tensor stacked = tprt::all_gather(ctx, cols, 0);
  ok = stacked.shape() == std::vector<int64_t>{2 * n, 3};
  for (int q = 0; ok && q < n; ++q)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        ok &= stacked.f32()[(q * 2 + i) * 3 + j] ==
              wide.f32()[i * 3 * n + q * 3 + j];
  check(ok, "all_gather on the first dim");

  // tp.all_gather_uneven on the last dim: rank q holds q + 1 real columns
  // of a block of n, the rest padding (-1); the result is the real columns
  // of every rank one after the other, the whole [2, n (n + 1) / 2] a
  // single rank would hold.
  std::vector<int64_t> sizes, starts;
  for (int q = 0; q < n; ++q) {
    sizes.push_back(q + 1);
    starts.push_back(int64_t(q) * (q + 1) / 2);
  }
  int64_t total = int64_t(n) * (n + 1) / 2, offset = int64_t(r) * (r + 1) / 2;
  tprt::Tensor padded = tprt::Tensor::uninitialized(tprt::DType::F32, {2, n});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < n; ++j)
      padded.f32()[i * n + j] = j <= r ? float(i * total + offset + j) : -1.f;
  tprt::Tensor whole = tprt::all_gather_uneven(ctx, padded, 1, sizes);
  ok = whole.shape() == std::vector<int64_t>{2, total};
  for (int64_t i = 0; ok && i < 2 * total; ++i)
    ok &= whole.f32()[i] == float(i);
  check(ok, "all_gather_uneven on the last dim");

  // tp.reduce_scatter_uneven, its inverse on partial sums: every rank holds
  // (r + 1) times [2, total]; rank q keeps its q + 1 columns of the sum,
  // padded with zeros to n.
  tprt::Tensor partial =
      tprt::Tensor::uninitialized(tprt::DType::F32, {2, total});
  for (int64_t i = 0; i < 2 * total; ++i)
    partial.f32()[i] = float((r + 1) * i);
  tprt::Tensor scattered =
      tprt::reduce_scatter_sum_uneven(ctx, partial, 1, sizes);
  float ranksSum = float(n * (n + 1) / 2);
  ok = scattered.shape() == std::vector<int64_t>{2, n};
  for (int i = 0; ok && i < 2; ++i)
    for (int j = 0; j < n; ++j)
      ok &= scattered.f32()[i * n + j] ==
            (j <= r ? ranksSum * float(i * total + offset + j) : 0.f);
  check(ok, "reduce_scatter_sum_uneven on the last dim");

  // tp.all_slice_uneven: each rank's columns of the gathered whole, back in
  // the padded block (zeros where padding was).
  tprt::Tensor sliced = tprt::all_slice_uneven(ctx, whole, 1, starts, sizes);
  ok = sliced.shape() == std::vector<int64_t>{2, n};
  for (int i = 0; ok && i < 2; ++i)
    for (int j = 0; j < n; ++j)
      ok &= sliced.f32()[i * n + j] == (j <= r ? padded.f32()[i * n + j] : 0.f);
  check(ok, "all_slice_uneven on the last dim");

  // A vocabulary-parallel lookup over the same uneven rows (rank q holds
  // rows [q (q + 1) / 2, + q + 1) of a vocabulary of `total` in a block of
  // n, padded with rows a lookup must never read), completed by the sum:
  // every id's row, as one table gives it.
  tprt::Tensor table = tprt::Tensor::uninitialized(tprt::DType::F32, {n, 2});
  for (int j = 0; j < n; ++j)
    for (int h = 0; h < 2; ++h)
      table.f32()[j * 2 + h] = j <= r ? float(10 * (offset + j) + h) : 1e6f;
  tprt::Tensor ids = tprt::Tensor::uninitialized(tprt::DType::I64, {1, total});
  for (int64_t i = 0; i < total; ++i)
    ids.i64()[i] = total - 1 - i;
  tprt::Tensor looked = tprt::all_reduce_sum(
      ctx, tprt::embedding_vocab_parallel(ctx, ids, table, starts, sizes));
  ok = looked.shape() == std::vector<int64_t>{1, total, 2};
  for (int64_t i = 0; ok && i < total; ++i)
    for (int h = 0; h < 2; ++h)
      ok &= looked.f32()[i * 2 + h] == float(10 * (total - 1 - i) + h);
  check(ok, "embedding_vocab_parallel over uneven rows");

  // The vocabulary-parallel loss over the same uneven ranges, each rank's
  // padding a large logit that would dominate any softmax reading it: the
  // loss and lse of one rank's whole logits, and its gradient's columns of
  // the range (zeros in the padding).
  int64_t seq = total + 1;
  tprt::Tensor labels = tprt::Tensor::uninitialized(tprt::DType::I64, {1, seq});
  tprt::Tensor keep = tprt::Tensor::uninitialized(tprt::DType::I64, {1, seq});
  for (int64_t t = 0; t < seq; ++t) {
    labels.i64()[t] = (t * 7) % total;
    keep.i64()[t] = 1;
  }
  tprt::Tensor logits =
      tprt::Tensor::uninitialized(tprt::DType::F32, {1, seq, total});
  for (int64_t i = 0; i < seq * total; ++i)
    logits.f32()[i] = float(std::sin(0.37 * double(i)));
  tprt::Tensor block =
      tprt::Tensor::uninitialized(tprt::DType::F32, {1, seq, n});
  for (int64_t t = 0; t < seq; ++t)
    for (int j = 0; j < n; ++j)
      block.f32()[t * n + j] =
          j <= r ? logits.f32()[t * total + offset + j] : 1e3f;
  tprt::Tensors ref = tprt::cross_entropy(ctx, logits, labels, keep);
  tprt::Tensors got = tprt::cross_entropy_vocab_parallel(ctx, block, labels,
                                                         keep, starts, sizes);
  auto near = [](float a, float b) {
    return std::fabs(a - b) <= 1e-5f * std::max(1.f, std::fabs(b));
  };
  ok = near(got[0].f32()[0], ref[0].f32()[0]);
  for (int64_t t = 0; ok && t < seq; ++t)
    ok &= near(got[1].f32()[t], ref[1].f32()[t]);
  check(ok, "cross_entropy_vocab_parallel over uneven ranges");
  tprt::Tensor refGrad = tprt::cross_entropy_grad(ctx, logits, labels, keep,
                                                  ref[1], false, {}, {});
  tprt::Tensor gotGrad = tprt::cross_entropy_grad(ctx, block, labels, keep,
                                                  got[1], true, starts, sizes);
  ok = gotGrad.shape() == block.shape();
  for (int64_t t = 0; ok && t < seq; ++t)
    for (int j = 0; j < n; ++j)
      ok &= j <= r ? near(gotGrad.f32()[t * n + j],
                          refGrad.f32()[t * total + offset + j])
                   : gotGrad.f32()[t * n + j] == 0.f;
  check(ok, "cross_entropy_grad over uneven ranges");

  // The embedding's gradient over them: each rank's rows of one table's
  // gradient, zeros in the padding.
  tprt::Tensor dy =
      tprt::Tensor::uninitialized(tprt::DType::F32, {1, total, 2});
  for (int64_t i = 0; i < 2 * total; ++i)
    dy.f32()[i] = float(i % 5) - 2.f;
  tprt::Tensor wholeTable =
      tprt::Tensor::uninitialized(tprt::DType::F32, {total, 2});
  tprt::Tensor refTable =
      tprt::embedding_grad(ctx, ids, dy, wholeTable, false, -1, {}, {});
  tprt::Tensor gotTable =
      tprt::embedding_grad(ctx, ids, dy, table, true, -1, starts, sizes);
  ok = gotTable.shape() == table.shape();
  for (int j = 0; ok && j < n; ++j)
    for (int h = 0; h < 2; ++h)
      ok &= gotTable.f32()[j * 2 + h] ==
            (j <= r ? refTable.f32()[(offset + j) * 2 + h] : 0.f);
  check(ok, "embedding_grad over uneven ranges");

  // tp.replica_sum over blocks shared by groups of different sizes: ranks
  // [0, (n + 1) / 2) hold block 0, the others block 1; each gets the sum of
  // its group's (rank + 1).
  std::vector<int64_t> blocks;
  int64_t split = (n + 1) / 2, groupSum = 0;
  for (int q = 0; q < n; ++q) {
    blocks.push_back(q < split ? 0 : 1);
    if ((q < split) == (r < split))
      groupSum += q + 1;
  }
  tprt::Tensor share = tprt::Tensor::uninitialized(tprt::DType::F32, {3});
  for (int i = 0; i < 3; ++i)
    share.f32()[i] = float((r + 1) * (i + 1));
  tprt::Tensor summed = tprt::replica_sum(ctx, share, blocks);
  ok = summed.shape() == share.shape();
  for (int i = 0; ok && i < 3; ++i)
    ok &= summed.f32()[i] == float(groupSum * (i + 1));
  check(ok, "replica_sum over groups of different sizes");
}

// all_reduce_sum_consuming takes its input: the caller's tensor is left
// empty and the sum is in its storage; a tensor whose storage a view
// still shares is reduced in a copy, the view keeping its values.
void checkConsumingAllReduce(tprt::Communicator *comm, int r, int n,
                             const Check &check) {
  bool ok = true;
  tprt::Context ctx(r, n, "", "");
  auto contribution = [&](int q, int i) { return float(q + 1) * (i + 1); };
  auto filled = [&] {
    tprt::Tensor t = tprt::Tensor::uninitialized(tprt::DType::F32, {2, 3});
    for (int i = 0; i < 6; ++i)
      t.f32()[i] = contribution(r, i);
    return t;
  };
  auto isSum = [&](const tprt::Tensor &t) {
    bool same = t.shape() == std::vector<int64_t>{2, 3};
    for (int i = 0; same && i < 6; ++i) {
      float sum = 0;
      for (int q = 0; q < n; ++q)
        sum += contribution(q, i);
      same &= t.f32()[i] == sum;
    }
    return same;
  };
  tprt::Tensor sole = filled();
  const void *storage = sole.raw();
  tprt::Tensor sum = tprt::all_reduce_sum_consuming(ctx, sole);
  check(isSum(sum) && !sole.defined() && sum.raw() == storage,
        "all_reduce_sum_consuming in the input's storage");
  tprt::Tensor shared = filled();
  tprt::Tensor view = tprt::Tensor::view(shared, 0, {6});
  tprt::Tensor copied = tprt::all_reduce_sum_consuming(ctx, shared);
  ok = isSum(copied) && !shared.defined() && copied.raw() != view.raw();
  for (int i = 0; ok && i < 6; ++i)
    ok &= view.f32()[i] == contribution(r, i);
  check(ok, "all_reduce_sum_consuming of shared storage copies");
}

// tp.linear_epilogue add_once: each rank's partial product, the residual
// added on rank 0 only, so the all-reduce carries it once. x [2, 3] and
// rank q's weight block w_q [2, 3] (a row-split projection's); against
// the sum over ranks of x w_q^T, plus the residual, in double.
void checkEpilogueAddOnce(tprt::Communicator *comm, int r, int n,
                          const Check &check) {
  tprt::Context ctx(r, n, "", "");
  auto xAt = [](int i, int k) { return 0.25f * float(i + 1) - 0.5f * k; };
  auto wAt = [](int q, int j, int k) {
    return 0.125f * float(q + 1) * (j + 1) + 0.5f * k;
  };
  auto residualAt = [](int i, int j) { return 8.0f + i - 2.0f * j; };
  tprt::Tensor x = tprt::Tensor::uninitialized(tprt::DType::F32, {2, 3});
  tprt::Tensor w = tprt::Tensor::uninitialized(tprt::DType::F32, {2, 3});
  tprt::Tensor residual = tprt::Tensor::uninitialized(tprt::DType::F32, {2, 2});
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) {
      x.f32()[i * 3 + k] = xAt(i, k);
      w.f32()[i * 3 + k] = wAt(r, i, k);
    }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      residual.f32()[i * 2 + j] = residualAt(i, j);
  auto carriesResidualOnce = [&](const tprt::Tensor &sum) {
    bool same = sum.numel() == 4;
    for (int i = 0; same && i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        double want = residualAt(i, j);
        for (int q = 0; q < n; ++q)
          for (int k = 0; k < 3; ++k)
            want += double(xAt(i, k)) * wAt(q, j, k);
        same &=
            std::fabs(sum.f32()[i * 2 + j] - want) <= 1e-5 * std::fabs(want);
      }
    return same;
  };
  tprt::Tensor partial = tprt::linear_add(
      ctx, x, w, residual, tprt::LinearForm::Flat, /*once=*/true);
  check(carriesResidualOnce(tprt::all_reduce_sum_consuming(ctx, partial)),
        "linear_add once: the residual once in the sum");
  // The consuming forms take the residual on every rank (rank 0 may add
  // the product into it), in both forms.
  for (bool bmm : {false, true}) {
    tprt::Tensor taken =
        tprt::Tensor::uninitialized(tprt::DType::F32, {1, 2, 2});
    std::copy_n(residual.f32(), 4, taken.f32());
    tprt::Tensor x3 = tprt::Tensor::uninitialized(tprt::DType::F32, {1, 2, 3});
    std::copy_n(x.f32(), 6, x3.f32());
    tprt::Tensor sum = tprt::linear_add_consuming(
        ctx, x3, w, taken, bmm ? tprt::LinearForm::Bmm : tprt::LinearForm::Flat,
        /*once=*/true);
    check(!taken.defined() &&
              carriesResidualOnce(tprt::all_reduce_sum_consuming(ctx, sum)),
          bmm ? "linear_add_consuming once (bmm)"
              : "linear_add_consuming once");
  }
}

// A bf16 parameter's gradients are reduced in FP32: rank 0 contributes
// 1 and every other rank 2^-9, whose sum a bf16 reduction would round
// back to 1 (bf16 keeps 8 significant bits), while the bucket must hold
// 1 + (n - 1) 2^-9 exactly.
void checkBf16GradientReduction(tprt::Communicator *comm, int r, int n,
                                const Check &check) {
  bool ok = true;
  tprt::Context ctx(r, n, "", "");
  tprt::TrainOptions options;
  tprt::TrainState state(options);
  ctx.setTrainState(&state);
  tprt::Tensor param(tprt::DType::BF16, {4});
  tprt::Tensor grad = tprt::Tensor::uninitialized(tprt::DType::F32, {4});
  for (int i = 0; i < 4; ++i)
    grad.f32()[i] = r == 0 ? 1.0f : 1.0f / 512;
  tprt::accumulate_grad(ctx, grad.to(tprt::DType::BF16), param, "w", -1, false);
  tprt::optimizer_boundary(ctx);
  tprt::grad_bucket_all_reduce(ctx, 0, /*mean=*/false, tprt::DType::BF16, {"w"},
                               16, "tp");
  const tprt::Tensor &sum = ctx.grads()["w"].grad;
  ok = sum.dtype() == tprt::DType::F32;
  for (int i = 0; ok && i < 4; ++i)
    ok &= sum.f32()[i] == 1.0f + float(n - 1) / 512;
  check(ok && (n == 1 || tprt::bf16ToFloat(tprt::floatToBf16(sum.f32()[0])) !=
                             sum.f32()[0]),
        "bf16 gradients reduced in FP32");
  ctx.setTrainState(nullptr);
}

// The optimizer step's factors (the mean over the ranks, 1 / label
// tokens, the clipping) stay pending on the buffer and are applied by
// the norm and the update (train/boundary.cpp): two SGD steps (lr 1, no
// momentum or decay: the parameter moves by minus the gradient) against
// the formulas in double. The second step's gradient overwrites the
// buffer, so its factors must not compound with the first's.
void checkPendingFactors(tprt::Communicator *comm, int r, int n,
                         const Check &check) {
  bool ok = true;
  tprt::Context ctx(r, n, "", "");
  tprt::TrainOptions options;
  options.lr = 1.0;
  options.momentum = 0;
  options.weightDecay = 0;
  options.maxGradNorm = 0.5;
  tprt::TrainState state(options);
  ctx.setTrainState(&state);
  tprt::Tensor param(tprt::DType::F32, {6});
  ctx.cacheParam("w", param);
  std::vector<double> want(6, 0.0);
  ok = true;
  for (int step = 1; step <= 2; ++step) {
    for (auto &entry : ctx.grads())
      entry.second.fresh = true;
    tprt::Tensor grad(tprt::DType::F32, {6});
    // Rank q's gradient: (q + 1) (i + 1) / step, as two micro-batches.
    for (int half = 0; half < 2; ++half) {
      for (int i = 0; i < 6; ++i)
        grad.f32()[i] = 0.5f * float(r + 1) * float(i + 1) / float(step);
      tprt::accumulate_grad(ctx, grad, param, "w", -1, false);
    }
    tprt::optimizer_boundary(ctx);
    tprt::grad_bucket_all_reduce(ctx, 0, /*mean=*/true, tprt::DType::F32, {"w"},
                                 24, "tp");
    state.labelTokens = 7 * step;
    tprt::normalize_grads(ctx);
    float norm = *tprt::grad_norm(ctx, /*dpSharded=*/false).f32();
    tprt::clip_grads(ctx, tprt::Tensor());
    tprt::optimizer_update(ctx, "sgd", /*dpSharded=*/false,
                           /*masterWeights=*/false);
    // The mean of the ranks' gradients over the label tokens.
    double squares = 0, g[6];
    for (int i = 0; i < 6; ++i) {
      g[i] = double(n + 1) / 2 * (i + 1) / step / (7.0 * step);
      squares += g[i] * g[i];
    }
    double wantNorm = std::sqrt(squares);
    double clip = std::min(1.0, 0.5 / (wantNorm + 1e-6));
    ok &= std::fabs(norm - wantNorm) <= 1e-6 * wantNorm;
    for (int i = 0; i < 6; ++i) {
      want[i] -= g[i] * clip;
      ok &= std::fabs(param.f32()[i] - want[i]) <= 1e-6 * std::fabs(want[i]);
    }
  }
  check(ok, "normalization, mean and clipping applied by norm and update");
  ctx.setTrainState(nullptr);
}

// --zero 1's optimizer step (train/boundary.cpp) on a data-parallel group
// of all the ranks: a bucket of two parameters (f32 "a" of 200 elements,
// which the runs of two ranks split, and "b" of 100) reduce-scattered, the
// norm from each rank's run, clipped, an AdamW step of each rank's run,
// the parameters all-gathered; then a second step through the bound
// bucket. Against AdamW's formulas in double on the summed gradients,
// which every rank computes whole. The state saved is each rank's run.
// `microBatch` (--zero 2): two micro-batches per step, each reduced into
// the runs; on an even number of ranks, a grid of tp=2, both parameters
// tensor-parallel replicas whose replica bucket sums the runs. `stage` 3
// (--zero 3): the parameters held as the runs from the start
// (param_bucket_shard), each micro-batch reading them through a gather
// (the current values whole), the update writing the runs and nothing
// gathered after it.
void checkShardedBucket(int r, int n, const Check &check, int stage) {
  bool microBatch = stage >= 2, runs = stage == 3;
  tprt::Context ctx(r, n, "", "");
  int tp = microBatch && n % 2 == 0 ? 2 : 1, dp = n / tp;
  ctx.setGrid(tp, dp);
  std::string name = runs         ? "parameter runs"
                     : microBatch ? "micro-batch buckets"
                                  : "sharded buckets";
  tprt::TrainOptions options;
  options.maxGradNorm = 0.05;
  tprt::TrainState state(options);
  ctx.setTrainState(&state);
  const char *names[] = {"a", "b"};
  const int64_t sizes[] = {200, 100};
  tprt::Tensor params[2];
  std::vector<double> want[2], m[2], v[2];
  for (int k = 0; k < 2; ++k) {
    params[k] = tprt::Tensor(tprt::DType::F32, {sizes[k]});
    for (int64_t i = 0; i < sizes[k]; ++i)
      params[k].f32()[i] = 0.01f * float(i % 17) - 0.05f * float(k);
    want[k].assign(params[k].f32(), params[k].f32() + sizes[k]);
    m[k].assign(sizes[k], 0.0);
    v[k].assign(sizes[k], 0.0);
    ctx.cacheParam(names[k], params[k]);
    ctx.setParamLayout(names[k], {{sizes[k]}});
  }
  int64_t padded = tprt::shardedBucketElements(300, dp);
  if (runs)
    tprt::param_bucket_shard(ctx, 0, tprt::DType::F32, {"a", "b"}, padded * 4);
  // The parameters' current values, whole: gathered from the runs.
  auto whole = [&] {
    return runs ? tprt::param_bucket_gather(ctx, 0, tprt::DType::F32,
                                            {"a", "b"}, padded * 4)
                : tprt::Tensors{params[0], params[1]};
  };
  // Rank q's gradient element i of parameter k at step t.
  auto gradOf = [](int q, int k, int64_t i, int t) {
    return 0.001 * double((q + 1) * (i % 13 + 1)) * (k ? -1.0 : 1.0) / t;
  };
  bool ok = true, normOk = true, readOk = true;
  for (int t = 1; t <= 2; ++t) {
    tprt::beginTrainStep(ctx, state);
    // Micro-batches of a quarter and three quarters of the gradient.
    for (double part : microBatch ? std::vector<double>{0.25, 0.75}
                                  : std::vector<double>{1.0}) {
      tprt::Tensors read = whole();
      for (int k = 0; k < 2; ++k) {
        tprt::Tensor grad(tprt::DType::F32, {sizes[k]});
        for (int64_t i = 0; i < sizes[k]; ++i) {
          grad.f32()[i] = static_cast<float>(part * gradOf(r, k, i, t));
          readOk &= read[k].f32()[i] == static_cast<float>(want[k][i]);
        }
        tprt::accumulate_grad(ctx, grad, read[k], names[k], -1, false);
      }
      if (microBatch)
        tprt::grad_bucket_reduce_scatter(ctx, 0, tprt::DType::F32, {"a", "b"},
                                         1200, padded * 4, true, false);
    }
    tprt::optimizer_boundary(ctx);
    if (tp > 1)
      tprt::grad_bucket_all_reduce(ctx, 1, false, tprt::DType::F32, {"a", "b"},
                                   1200, "tp");
    if (!microBatch)
      tprt::grad_bucket_reduce_scatter(ctx, 0, tprt::DType::F32, {"a", "b"},
                                       1200, padded * 4, false, false);
    state.labelTokens = 3;
    tprt::normalize_grads(ctx);
    float norm = *tprt::grad_norm(ctx, /*dpSharded=*/true).f32();
    tprt::clip_grads(ctx, tprt::Tensor());
    tprt::optimizer_update(ctx, "adamw", /*dpSharded=*/true,
                           /*masterWeights=*/false);
    if (!runs)
      tprt::param_bucket_all_gather(ctx, 0, tprt::DType::F32, {"a", "b"},
                                    padded * 4);
    tprt::Tensors updated = whole();
    // The reference: the ranks' sum over 3 label tokens, clipped.
    double squares = 0;
    std::vector<double> g[2];
    for (int k = 0; k < 2; ++k)
      for (int64_t i = 0; i < sizes[k]; ++i) {
        double sum = 0;
        for (int q = 0; q < n; ++q)
          sum += gradOf(q, k, i, t);
        g[k].push_back(sum / 3);
        squares += g[k].back() * g[k].back();
      }
    double wantNorm = std::sqrt(squares);
    double clip = std::min(1.0, options.maxGradNorm / (wantNorm + 1e-6));
    normOk &= std::fabs(norm - wantNorm) <= 1e-6 * wantNorm;
    double c1 = 1 - std::pow(options.beta1, t),
           c2 = 1 - std::pow(options.beta2, t);
    for (int k = 0; k < 2; ++k)
      for (int64_t i = 0; i < sizes[k]; ++i) {
        double gi = g[k][i] * clip;
        want[k][i] *= 1 - options.lr * options.weightDecay;
        m[k][i] = options.beta1 * m[k][i] + (1 - options.beta1) * gi;
        v[k][i] = options.beta2 * v[k][i] + (1 - options.beta2) * gi * gi;
        want[k][i] -= options.lr / c1 * m[k][i] /
                      (std::sqrt(v[k][i]) / std::sqrt(c2) + options.eps);
        ok &= std::fabs(updated[k].f32()[i] - want[k][i]) <= 2e-6;
        // What the next step reads.
        want[k][i] = updated[k].f32()[i];
      }
  }
  check(readOk,
        (name + ": each micro-batch reads the current parameters").c_str());
  check(normOk, (name + ": the norm summed over the runs").c_str());
  check(ok, (name + ": each run's AdamW update, all-gathered").c_str());
  // Each rank holds the state of its run only.
  int64_t held = 0;
  for (const char *name : names)
    for (const auto &entry : state.optimizer->stateOf(name))
      if (entry.first == "exp_avg")
        held += entry.second->numel();
  int64_t d = r / tp;
  check(held == std::min<int64_t>(padded / dp,
                                  std::max<int64_t>(0, 300 - d * padded / dp)),
        (name + ": the state of this rank's run only").c_str());
  if (runs)
    check(state.gatheredHeld == 0 && state.largestGather == padded * 4 &&
              ctx.cachedParam("a")->numel() + ctx.cachedParam("b")->numel() ==
                  std::min<int64_t>(
                      padded / dp, std::max<int64_t>(0, 300 - d * padded / dp)),
          (name + ": a run of each parameter held, one gather at a time, "
                  "freed with its last view")
              .c_str());
  if (microBatch)
    check(state.microBatchHeld == 0 && state.microBatchPeak == padded * 4,
          (name + ": the whole bucket held from its first gradient to its "
                  "reduce-scatter only")
              .c_str());
  ctx.setTrainState(nullptr);
}

// Blocks of uneven sizes (issue 42's splits that the ranks do not divide):
// rank r holds 3 + r elements, the last of several ranks none. The gather
// puts rank q's element i (100 q + i) at the sum of the counts before q;
// the reduce-scatter gives rank r the sum over the ranks q of (q + 1)(j + 1)
// for element j of its block, against those formulas.
void checkUnevenCollectives(tprt::Communicator *comm, int r, int n,
                            const Check &check) {
  std::vector<int64_t> counts;
  for (int q = 0; q < n; ++q)
    counts.push_back(n > 1 && q == n - 1 ? 0 : 3 + q);
  std::vector<int64_t> offsets = {0};
  for (int64_t c : counts)
    offsets.push_back(offsets.back() + c);
  std::vector<float> mine(counts[r] + 1), all(offsets.back() + 1, -1.0f);
  for (int64_t i = 0; i < counts[r]; ++i)
    mine[i] = float(100 * r + i);
  comm->allGatherUneven(mine.data(), all.data(), counts);
  bool gathered = all[offsets.back()] == -1.0f;
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < counts[q]; ++i)
      gathered &= all[offsets[q] + i] == float(100 * q + i);
  check(gathered, "all-gather of uneven blocks");

  std::vector<float> blocks(offsets.back()), sums(counts[r] + 1, -1.0f);
  for (int64_t j = 0; j < offsets.back(); ++j)
    blocks[j] = float((r + 1) * (j + 1));
  comm->reduceScatterSumUneven(blocks.data(), sums.data(), counts);
  bool reduced = sums[counts[r]] == -1.0f;
  for (int64_t i = 0; i < counts[r]; ++i)
    reduced &= sums[i] == float(n * (n + 1) / 2 * (offsets[r] + i + 1));
  check(reduced, "reduce-scatter (sum) of uneven blocks");
}

// The shared-memory all-reduce (every rank of an mpirun on one machine
// shares it): counts across its pieces and not a multiple of a vector,
// calls enough to reuse both slots of each rank, each call's sums exact
// in float (integers below 2^24) against the hand-derived sum.
void checkSharedMemoryAllReduce(tprt::Communicator *comm, int r, int n,
                                const Check &check) {
  bool ok = true;
  using tprt::comm::SharedMemoryAllReduce;
  std::unique_ptr<SharedMemoryAllReduce> shared =
      SharedMemoryAllReduce::create(MPI_COMM_WORLD);
  check(n == 1 ? !shared : shared != nullptr,
        "shared-memory all-reduce made on one node");
  const int64_t counts[] = {1,
                            5,
                            2049,
                            SharedMemoryAllReduce::kPieceFloats,
                            2 * SharedMemoryAllReduce::kPieceFloats + 3,
                            7};
  for (int call = 0; shared && call < 6; ++call) {
    int64_t count = counts[call];
    std::vector<float> data(count);
    for (int64_t i = 0; i < count; ++i)
      data[i] = float((r + 1) * (i % 1000) + call);
    shared->sum(data.data(), count);
    ok = true;
    for (int64_t i = 0; i < count; ++i)
      ok &= data[i] == float(n * (n + 1) / 2 * (i % 1000) + n * call);
    check(ok, "shared-memory all-reduce sums");
  }
  // Many calls in a row, no barrier between: a rank that rewrote a slot
  // another still reads would change that rank's sum.
  ok = true;
  for (int call = 0; shared && call < 2000; ++call) {
    int64_t count = 1 + (call * 37) % 4099;
    std::vector<float> data(count);
    for (int64_t i = 0; i < count; ++i)
      data[i] = float((r + 1) * (call % 101) + i % 7);
    shared->sum(data.data(), count);
    for (int64_t i = 0; i < count; ++i)
      ok &= data[i] == float(n * (n + 1) / 2 * (call % 101) + n * (i % 7));
  }
  check(ok, "shared-memory all-reduce: 2000 calls in a row");
  // Inexact sums: every rank gets the same bits (the slots are summed in
  // rank order everywhere), as MPI_Allreduce's ranks do.
  if (shared) {
    std::vector<float> data(3000), first(3000);
    for (int i = 0; i < 3000; ++i)
      data[i] = 0.1f * float(r + 1) * std::sin(0.01f * float(i));
    shared->sum(data.data(), 3000);
    first = data;
    MPI_Bcast(first.data(), 3000, MPI_FLOAT, 0, MPI_COMM_WORLD);
    check(first == data, "shared-memory all-reduce: one result everywhere");
  }
}

// An all-reduce in two halves (TPRT_ALLREDUCE picks shared memory or
// MPI_Iallreduce): the rank writes other memory between them; a
// collective in between, or another start, completes the sum in flight
// first. One piece and several; sums against the hand-derived ones.
void checkSplitAllReduce(tprt::Communicator *comm, int r, int n,
                         const Check &check) {
  auto fill = [&](std::vector<float> &v, int salt) {
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = float((r + 1) * int(i % 997) + salt);
  };
  auto summed = [&](const std::vector<float> &v, int salt) {
    bool same = true;
    for (size_t i = 0; i < v.size(); ++i)
      same &= v[i] == float(n * (n + 1) / 2 * int(i % 997) + n * salt);
    return same;
  };
  int64_t piece = tprt::comm::SharedMemoryAllReduce::kPieceFloats;
  std::vector<float> a(2049), b(2 * piece + 5), c(7), local(4096);
  fill(a, 1);
  comm->startAllReduceSum(a.data(), int64_t(a.size()));
  for (size_t i = 0; i < local.size(); ++i)
    local[i] = float(i) * float(r); // work while the sum is in flight
  comm->finishAllReduceSum();
  check(summed(a, 1), "startAllReduceSum, finishAllReduceSum");

  fill(b, 2);
  comm->startAllReduceSum(b.data(), int64_t(b.size()));
  std::vector<float> block = {float(r)}, gathered(n);
  comm->allGather(block.data(), gathered.data(), 1);
  bool gatheredOk = true;
  for (int q = 0; q < n; ++q)
    gatheredOk &= gathered[q] == float(q);
  check(summed(b, 2) && gatheredOk,
        "a collective completes the all-reduce in flight first");
  comm->finishAllReduceSum(); // nothing left in flight

  fill(a, 3);
  fill(c, 4);
  comm->startAllReduceSum(a.data(), int64_t(a.size()));
  comm->startAllReduceSum(c.data(), int64_t(c.size()));
  comm->finishAllReduceSum();
  check(summed(a, 3) && summed(c, 4),
        "a second start completes the first all-reduce");
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  std::unique_ptr<tprt::Communicator> comm = tprt::createMpiCommunicator(0);
  int r = comm->rank(), n = comm->size();
  int failures = 0, checks = 0;
  auto check = [&](bool ok, const char *what) {
    ++checks;
    if (!ok) {
      ++failures;
      std::fprintf(stderr, "rank %d: %s failed\n", r, what);
    }
  };

  checkCommunicator(comm.get(), r, n, check);
  checkSequenceKernels(comm.get(), r, n, check);
  checkConsumingAllReduce(comm.get(), r, n, check);
  checkEpilogueAddOnce(comm.get(), r, n, check);
  checkBf16GradientReduction(comm.get(), r, n, check);
  checkPendingFactors(comm.get(), r, n, check);
  for (int stage = 1; stage <= 3; ++stage)
    checkShardedBucket(r, n, check, stage);
  checkUnevenCollectives(comm.get(), r, n, check);
  checkSharedMemoryAllReduce(comm.get(), r, n, check);
  checkSplitAllReduce(comm.get(), r, n, check);

  int total = 0;
  MPI_Reduce(&failures, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  comm.reset();
  if (r == 0)
    std::printf("mpi collectives on %d ranks: %d passed, %d failed\n", n,
                checks * n - total, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
