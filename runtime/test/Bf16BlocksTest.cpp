//===- Bf16BlocksTest.cpp - bf16 kernels without widened copies -----------===//
//
// The kernels of a bf16 program read and write bf16 a block at a time
// instead of widening whole tensors. Their contract is unchanged: the f32
// kernel on the widened operands, each result rounded once. So each one
// must give, bit for bit, what that composition gives, at sizes of several
// blocks with a partial last one (the f32 kernels are checked against
// references of their own in KernelsTest and GradientsTest).
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"
#include "tprt/tprt.h"

#include "gtest/gtest.h"

#include <cstring>
#include <omp.h>

using namespace tprt;
using tprt::test::ctx;
using tprt::test::randomTensor;

namespace {

Tensor bf16(const Tensor &t) { return t.to(DType::BF16); }
Tensor f32(const Tensor &t) { return t.to(DType::F32); }

void expectSameBits(const Tensor &got, const Tensor &want, const char *what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  int64_t differ = 0, first = -1;
  const auto *a = static_cast<const unsigned char *>(got.raw()),
             *b = static_cast<const unsigned char *>(want.raw());
  size_t size = dtypeSize(got.dtype());
  for (int64_t i = 0; i < got.numel(); ++i)
    if (std::memcmp(a + i * size, b + i * size, size)) {
      first = first < 0 ? i : first;
      ++differ;
    }
  EXPECT_EQ(differ, 0) << what << ": first at element " << first;
}

// 301 rows of 160 features: 48160 elements, three blocks of the elementwise
// loops and a partial fourth; row blocks of the row-wise kernels that do
// not divide the rows.
constexpr int64_t kBatch = 7, kSeq = 43, kFeatures = 160;

TEST(Bf16Blocks, ElementwiseKernels) {
  Tensor x = bf16(randomTensor({kBatch, kSeq, kFeatures}, 1, -6.0f, 6.0f));
  Tensor y = bf16(randomTensor({kBatch, kSeq, kFeatures}, 2));
  Tensor xf = f32(x), yf = f32(y);
  expectSameBits(silu(ctx(), x), bf16(silu(ctx(), xf)), "silu");
  expectSameBits(gelu(ctx(), x, false), bf16(gelu(ctx(), xf, false)), "gelu");
  expectSameBits(gelu(ctx(), x, true), bf16(gelu(ctx(), xf, true)),
                 "gelu tanh");
  expectSameBits(silu_grad(ctx(), x, y), bf16(silu_grad(ctx(), xf, yf)),
                 "silu_grad");
  expectSameBits(add(ctx(), x, y), bf16(add(ctx(), xf, yf)), "add");
  expectSameBits(mul(ctx(), x, y), bf16(mul(ctx(), xf, yf)), "mul");
  // x + bias over rows, each sum in f32 rounded once, written out here.
  Tensor bias = bf16(randomTensor({kFeatures}, 3)), sum = f32(x);
  Tensor biasF = f32(bias);
  for (int64_t i = 0; i < sum.numel(); ++i)
    sum.f32()[i] += biasF.f32()[i % kFeatures];
  expectSameBits(bias_add(ctx(), x, bias, -1), bf16(sum), "bias_add");
}

TEST(Bf16Blocks, RowKernels) {
  Tensor x = bf16(randomTensor({kBatch, kSeq, kFeatures}, 3, -3.0f, 3.0f));
  Tensor dy = bf16(randomTensor({kBatch, kSeq, kFeatures}, 4));
  Tensor xf = f32(x), dyf = f32(dy);
  Tensor w = randomTensor({kFeatures}, 5), wg = randomTensor({32}, 6);
  for (Tensor weight : {w, bf16(w)})
    expectSameBits(rms_norm(ctx(), x, weight, 1e-6, 0, 0),
                   bf16(rms_norm(ctx(), xf, f32(weight), 1e-6, 0, 0)),
                   "rms_norm");
  // Gemma's offset, per-head groups of 32.
  expectSameBits(rms_norm(ctx(), x, wg, 1e-6, 1.0, 32),
                 bf16(rms_norm(ctx(), xf, wg, 1e-6, 1.0, 32)),
                 "grouped rms_norm");
  // The weight's gradient in its own type, whatever the input's.
  for (Tensor weight : {wg, bf16(wg)}) {
    Tensors got = rms_norm_grad(ctx(), x, weight, dy, 1e-6, 1.0, 32);
    Tensors want = rms_norm_grad(ctx(), xf, f32(weight), dyf, 1e-6, 1.0, 32);
    expectSameBits(got[0], bf16(want[0]), "rms_norm_grad dx");
    expectSameBits(got[1], want[1].to(weight.dtype()), "rms_norm_grad dw");
  }
  // Two heads of 64, half of each rotated, and its transpose.
  for (bool transpose : {false, true}) {
    Tensor q = bf16(randomTensor({kBatch, kSeq, 128}, 7));
    auto rotate = [&](const Tensor &t) {
      return rotary(ctx(), t, 64, 32, 10000.0, false, 0, 1.0, 1.0, 4.0, 8192,
                    32.0, 1.0, true, 1.0, transpose, {}, {});
    };
    expectSameBits(rotate(q), bf16(rotate(f32(q))), "rotary");
  }
}

TEST(Bf16Blocks, RmsNormWeightGradientIsTheSameOnAnyThreadCount) {
  // Its rows are summed in blocks fixed by the shape, then the blocks in
  // order: one thread or two, the same bits.
  Tensor x = randomTensor({kBatch, kSeq, kFeatures}, 8);
  Tensor dy = randomTensor({kBatch, kSeq, kFeatures}, 9);
  Tensor w = randomTensor({kFeatures}, 10);
  int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Tensors one = rms_norm_grad(ctx(), x, w, dy, 1e-6, 0, 0);
  omp_set_num_threads(2);
  Tensors two = rms_norm_grad(ctx(), x, w, dy, 1e-6, 0, 0);
  omp_set_num_threads(threads);
  expectSameBits(two[0], one[0], "dx");
  expectSameBits(two[1], one[1], "dw");
  // Against the sum over rows in double.
  for (int64_t i = 0; i < kFeatures; ++i) {
    double want = 0;
    for (int64_t r = 0; r < kBatch * kSeq; ++r) {
      const float *row = x.f32() + r * kFeatures;
      double ss = 0;
      for (int64_t j = 0; j < kFeatures; ++j)
        ss += double(row[j]) * row[j];
      want += dy.f32()[r * kFeatures + i] * row[i] /
              std::sqrt(ss / kFeatures + 1e-6);
    }
    EXPECT_NEAR(one[1].f32()[i], want, 1e-4 * std::max(1.0, std::fabs(want)))
        << i;
  }
}

TEST(Bf16Blocks, CrossEntropy) {
  // 2 x 37 positions of 129 logits: row blocks end inside a batch row.
  const int64_t batch = 2, seq = 37, vocab = 129;
  Tensor logits = bf16(randomTensor({batch, seq, vocab}, 11, -8.0f, 8.0f));
  Tensor ids(DType::I64, {batch, seq}), mask(DType::I64, {batch, seq});
  for (int64_t i = 0; i < batch * seq; ++i) {
    ids.i64()[i] = (i * 13 + 5) % vocab;
    mask.i64()[i] = i % 7 != 3;
  }
  Tensor wide = f32(logits);
  Tensors got = cross_entropy(ctx(), logits, ids, mask);
  Tensors want = cross_entropy(ctx(), wide, ids, mask);
  expectSameBits(got[0], want[0], "cross_entropy loss");
  expectSameBits(got[1], want[1], "cross_entropy lse");
  Tensor lse = want[1];
  expectSameBits(
      cross_entropy_grad(ctx(), logits, ids, mask, lse, false, {}, {}),
      bf16(cross_entropy_grad(ctx(), wide, ids, mask, lse, false, {}, {})),
      "cross_entropy_grad");
}

TEST(Bf16Blocks, GradientsAccumulateInF32) {
  // A bf16 micro-batch gradient is summed into its FP32 buffer as read.
  Tensor param = bf16(randomTensor({301, 160}, 12));
  Tensor g1 = bf16(randomTensor({301, 160}, 13)),
         g2 = bf16(randomTensor({301, 160}, 14));
  Context &c = ctx();
  c.grads().erase("bf16.w");
  accumulate_grad(c, g1, param, "bf16.w", -1, true);
  accumulate_grad(c, g2, param, "bf16.w", -1, true);
  const Tensor &sum = c.grads()["bf16.w"].grad;
  ASSERT_EQ(sum.dtype(), DType::F32);
  Tensor a = f32(g1), b = f32(g2);
  for (int64_t i = 0; i < sum.numel(); ++i)
    ASSERT_EQ(sum.f32()[i], a.f32()[i] + b.f32()[i]) << i;
  c.grads().erase("bf16.w");
}

TEST(Bf16Blocks, EmbeddingGradientIsOfTheTablesType) {
  Tensor table = bf16(randomTensor({50, 160}, 15));
  Tensor ids(DType::I64, {2, 3});
  for (int64_t i = 0; i < 6; ++i)
    ids.i64()[i] = (i * 17) % 50;
  ids.i64()[5] = ids.i64()[0]; // a repeated token adds into one row
  Tensor dy = bf16(randomTensor({2, 3, 160}, 16));
  expectSameBits(
      embedding_grad(ctx(), ids, dy, table, false, -1, {}, {}),
      bf16(embedding_grad(ctx(), ids, f32(dy), f32(table), false, -1, {}, {})),
      "embedding_grad");
}

} // namespace
