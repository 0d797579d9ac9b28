//===- GradientsTest.cpp - backward kernels against finite differences ----===//
//
// Each backward kernel is the VJP of its forward kernel: for a random
// cotangent R and a random direction D of each input, the derivative of
// L(x) = <forward(x), R> along D by central differences (in double, of the
// f32 kernels) must equal <VJP_x(R), D>.
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"
#include "tprt/tprt.h"

#include "gtest/gtest.h"

#include <cmath>
#include <functional>
#include <random>

using namespace tprt;
using tprt::test::ctx;
using tprt::test::randomTensor;

namespace {

double dot(const Tensor &a, const Tensor &b) {
  EXPECT_EQ(a.shape(), b.shape());
  double sum = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    sum += double(a.f32()[i]) * b.f32()[i];
  return sum;
}

/// x + step * d.
Tensor shifted(const Tensor &x, const Tensor &d, double step) {
  Tensor out(DType::F32, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i)
    out.f32()[i] = static_cast<float>(x.f32()[i] + step * d.f32()[i]);
  return out;
}

/// Checks `grad` (the VJP of `loss` at `inputs[which]`) along a random
/// direction: (L(x + hD) - L(x - hD)) / 2h = <grad, D>.
void checkDirectional(std::vector<Tensor> inputs, size_t which,
                      const std::function<double(std::vector<Tensor> &)> &loss,
                      const Tensor &grad, unsigned seed, double h = 1e-2,
                      double tol = 2e-3) {
  Tensor d = randomTensor(inputs[which].shape(), seed);
  Tensor x = inputs[which];
  inputs[which] = shifted(x, d, h);
  double plus = loss(inputs);
  inputs[which] = shifted(x, d, -h);
  double minus = loss(inputs);
  double numeric = (plus - minus) / (2 * h), analytic = dot(grad, d);
  EXPECT_NEAR(analytic, numeric, tol * std::max(1.0, std::fabs(numeric)))
      << "input " << which;
}

TEST(Gradients, Linear) {
  Tensor x = randomTensor({2, 3, 8}, 1), w = randomTensor({5, 8}, 2),
         b = randomTensor({5}, 3), r = randomTensor({2, 3, 5}, 4);
  auto loss = [&](std::vector<Tensor> &in) {
    return dot(linear_epilogue(ctx(), in[0], in[1], in[2], LinearForm::Flat,
                               LinearEpilogue::Bias),
               r);
  };
  std::vector<Tensor> inputs = {x, w, b};
  checkDirectional(inputs, 0, loss, linear_grad_input(ctx(), r, w), 5);
  checkDirectional(inputs, 1, loss, linear_grad_weight(ctx(), r, x), 6);
  checkDirectional(inputs, 2, loss, sum_leading(ctx(), r), 7);
}

TEST(Gradients, RmsNormWithOffsetAndGroups) {
  for (auto [offset, group] : {std::pair{0.0, int64_t(0)}, {1.0, 4}}) {
    Tensor x = randomTensor({2, 3, 8}, 11),
           w = randomTensor({group ? group : 8}, 12, 0.5f, 1.5f),
           r = randomTensor({2, 3, 8}, 13);
    auto loss = [&](std::vector<Tensor> &in) {
      return dot(rms_norm(ctx(), in[0], in[1], 1e-6, offset, group), r);
    };
    Tensors grads = rms_norm_grad(ctx(), x, w, r, 1e-6, offset, group);
    checkDirectional({x, w}, 0, loss, grads[0], 14);
    checkDirectional({x, w}, 1, loss, grads[1], 15);
  }
}

TEST(Gradients, RotaryTransposeIsItsVJP) {
  Tensor x = randomTensor({2, 5, 32}, 21), r = randomTensor({2, 5, 32}, 22);
  auto rope = [](const Tensor &t, bool transpose) {
    return rotary(ctx(), t, 16, 0, 10000.0, false, 0, 1, 1, 4, 8192, 32, 1,
                  true, 1.0, transpose, {}, {});
  };
  auto loss = [&](std::vector<Tensor> &in) {
    return dot(rope(in[0], false), r);
  };
  checkDirectional({x}, 0, loss, rope(r, true), 23);
  // And it undoes the rotation.
  Tensor back = rope(rope(x, false), true);
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_NEAR(back.f32()[i], x.f32()[i], 1e-5);
}

TEST(Gradients, Attention) {
  // GQA (4 heads over 2 KV heads), causal, a sliding window, soft-capping
  // and a padded key.
  Tensor q = randomTensor({2, 6, 32}, 31), k = randomTensor({2, 6, 16}, 32),
         v = randomTensor({2, 6, 16}, 33), r = randomTensor({2, 6, 32}, 34);
  Tensor mask(DType::I64, {2, 6});
  for (int64_t i = 0; i < mask.numel(); ++i)
    mask.i64()[i] = i != 7;
  for (double softcap : {0.0, 2.0}) {
    auto loss = [&](std::vector<Tensor> &in) {
      return dot(attention(ctx(), in[0], in[1], in[2], mask, 4, 2, 8, 0.5, true,
                           3, softcap),
                 r);
    };
    Tensors grads = attention_grad(ctx(), q, k, v, r, mask, 4, 2, 8, 0.5, true,
                                   3, softcap, {}, {});
    for (size_t i = 0; i < 3; ++i)
      checkDirectional({q, k, v}, i, loss, grads[i], 35 + i);
    // From the forward's output and log-sum-exp instead of the forward run
    // again.
    Tensors fwd =
        attention_lse(ctx(), q, k, v, mask, 4, 2, 8, 0.5, true, 3, softcap);
    Tensors saved = attention_grad(ctx(), q, k, v, r, mask, 4, 2, 8, 0.5, true,
                                   3, softcap, fwd[0], fwd[1]);
    for (size_t i = 0; i < 3; ++i)
      checkDirectional({q, k, v}, i, loss, saved[i], 38 + i);
  }
}

// The saved forward comes whole or not at all, of q's shape and heads.
TEST(GradientsDeathTest, AttentionFromAMismatchedSavedForwardIsFatal) {
  Tensor q = randomTensor({2, 6, 32}, 31), k = randomTensor({2, 6, 16}, 32),
         v = randomTensor({2, 6, 16}, 33), r = randomTensor({2, 6, 32}, 34);
  Tensor mask(DType::I64, {2, 6});
  for (int64_t i = 0; i < mask.numel(); ++i)
    mask.i64()[i] = 1;
  Tensors fwd = attention_lse(ctx(), q, k, v, mask, 4, 2, 8, 0.5, true, 0, 0);
  auto grad = [&](const Tensor &out, const Tensor &lse) {
    attention_grad(ctx(), q, k, v, r, mask, 4, 2, 8, 0.5, true, 0, 0, out, lse);
  };
  EXPECT_DEATH(grad(fwd[0], {}),
               "attention_grad: the forward's output f32\\[2, 6, 32\\] and "
               "log-sum-exp \\(none\\) are not q's");
  EXPECT_DEATH(grad({}, fwd[1]), "output \\(none\\) and log-sum-exp");
  // The statistics of 2 heads where q has 4.
  EXPECT_DEATH(grad(fwd[0], randomTensor({2, 6, 2}, 35)),
               "f32 \\[batch, seq_q, heads\\] of 4 heads");
  EXPECT_DEATH(grad(randomTensor({2, 5, 32}, 36), fwd[1]),
               "output f32\\[2, 5, 32\\]");
}

// attention_lse's statistics against the log-sum-exp written out here: per
// (batch, query, head) over the keys the query sees (causal, window 3, the
// padded key 7 = batch 1's key 1), of 0.5 q.k capped by 2 tanh(s / 2).
TEST(Gradients, AttentionLogSumExp) {
  Tensor q = randomTensor({2, 6, 32}, 31), k = randomTensor({2, 6, 16}, 32),
         v = randomTensor({2, 6, 16}, 33);
  Tensor mask(DType::I64, {2, 6});
  for (int64_t i = 0; i < mask.numel(); ++i)
    mask.i64()[i] = i != 7;
  for (double softcap : {0.0, 2.0}) {
    Tensors fwd =
        attention_lse(ctx(), q, k, v, mask, 4, 2, 8, 0.5, true, 3, softcap);
    Tensor out =
        attention(ctx(), q, k, v, mask, 4, 2, 8, 0.5, true, 3, softcap);
    ASSERT_EQ(fwd[0].shape(), out.shape());
    for (int64_t i = 0; i < out.numel(); ++i)
      ASSERT_EQ(fwd[0].f32()[i], out.f32()[i]) << "output element " << i;
    ASSERT_EQ(fwd[1].shape(), (std::vector<int64_t>{2, 6, 4}));
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < 6; ++i)
        for (int64_t h = 0; h < 4; ++h) {
          double sum = 0;
          for (int64_t j = std::max<int64_t>(0, i - 2); j <= i; ++j) {
            if (!mask.i64()[b * 6 + j])
              continue;
            double s = 0;
            for (int64_t d = 0; d < 8; ++d)
              s += double(q.f32()[(b * 6 + i) * 32 + h * 8 + d]) *
                   k.f32()[(b * 6 + j) * 16 + (h / 2) * 8 + d];
            s *= 0.5;
            if (softcap > 0)
              s = softcap * std::tanh(s / softcap);
            sum += std::exp(s);
          }
          float got = fwd[1].f32()[(b * 6 + i) * 4 + h];
          if (sum == 0) // batch 1's query 1 sees only its padded key
            EXPECT_TRUE(std::isinf(got) && got > 0) << b << " " << i;
          else
            EXPECT_NEAR(got, std::log(sum), 1e-5) << b << " " << i << " " << h;
        }
  }
}

// bf16 operands: attention_lse's output is attention's (computed in f32,
// rounded once) and its statistics the f32 call's on the same values; the
// backward from them (the bf16 output in dout . out) within bf16 rounding
// of the recomputing backward, its gradients bf16.
TEST(Gradients, AttentionLogSumExpBf16) {
  auto rounded = [](const Tensor &t) { return t.to(DType::BF16); };
  Tensor q = rounded(randomTensor({2, 6, 32}, 51)),
         k = rounded(randomTensor({2, 6, 16}, 52)),
         v = rounded(randomTensor({2, 6, 16}, 53)),
         r = rounded(randomTensor({2, 6, 32}, 54));
  Tensors fwd = attention_lse(ctx(), q, k, v, {}, 4, 2, 8, 0.5, true, 0, 0.0);
  Tensor out = attention(ctx(), q, k, v, {}, 4, 2, 8, 0.5, true, 0, 0.0);
  ASSERT_EQ(fwd[0].dtype(), DType::BF16);
  ASSERT_EQ(fwd[1].dtype(), DType::F32);
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_EQ(static_cast<uint16_t *>(fwd[0].raw())[i],
              static_cast<uint16_t *>(out.raw())[i])
        << "output element " << i;
  Tensors wide =
      attention_lse(ctx(), q.to(DType::F32), k.to(DType::F32), v.to(DType::F32),
                    {}, 4, 2, 8, 0.5, true, 0, 0.0);
  for (int64_t i = 0; i < wide[1].numel(); ++i)
    ASSERT_EQ(fwd[1].f32()[i], wide[1].f32()[i]) << "statistic " << i;
  Tensors recomputed =
      attention_grad(ctx(), q, k, v, r, {}, 4, 2, 8, 0.5, true, 0, 0.0, {}, {});
  Tensors saved = attention_grad(ctx(), q, k, v, r, {}, 4, 2, 8, 0.5, true, 0,
                                 0.0, fwd[0], fwd[1]);
  for (size_t g = 0; g < 3; ++g) {
    ASSERT_EQ(saved[g].dtype(), DType::BF16);
    Tensor a = saved[g].to(DType::F32), b = recomputed[g].to(DType::F32);
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_NEAR(a.f32()[i], b.f32()[i], 2e-2 * (1 + std::fabs(b.f32()[i])))
          << "gradient " << g << " element " << i;
  }
}

// Across the CPU kernel's tiles (blocks of 64 queries, tiles of 128 keys):
// the backward's per-tile recomputation from each row's log-sum-exp, tiles
// skipped by the causal and window limits, and rows that see no key (the
// first 130 keys padded).
TEST(Gradients, AttentionAcrossTiles) {
  Tensor q = randomTensor({1, 300, 16}, 41), k = randomTensor({1, 300, 8}, 42),
         v = randomTensor({1, 300, 8}, 43), r = randomTensor({1, 300, 16}, 44);
  Tensor mask(DType::I64, {1, 300});
  for (int64_t i = 0; i < mask.numel(); ++i)
    mask.i64()[i] = i >= 130;
  for (auto [window, softcap] : {std::pair{int64_t(0), 0.0}, {150, 2.0}}) {
    auto loss = [&, window = window,
                 softcap = softcap](std::vector<Tensor> &in) {
      return dot(attention(ctx(), in[0], in[1], in[2], mask, 2, 1, 8, 0.5, true,
                           window, softcap),
                 r);
    };
    Tensors grads = attention_grad(ctx(), q, k, v, r, mask, 2, 1, 8, 0.5, true,
                                   window, softcap, {}, {});
    for (size_t i = 0; i < 3; ++i)
      checkDirectional({q, k, v}, i, loss, grads[i], 45 + i);
    // Queries that see no key get no gradient.
    for (int64_t x = 0; x < 130 * 16; ++x)
      ASSERT_EQ(grads[0].f32()[x], 0.0f) << "dq element " << x;
    // The same from the forward's statistics (+inf for those queries).
    Tensors fwd = attention_lse(ctx(), q, k, v, mask, 2, 1, 8, 0.5, true,
                                window, softcap);
    Tensors saved = attention_grad(ctx(), q, k, v, r, mask, 2, 1, 8, 0.5, true,
                                   window, softcap, fwd[0], fwd[1]);
    for (size_t i = 0; i < 3; ++i)
      for (int64_t x = 0; x < grads[i].numel(); ++x)
        ASSERT_NEAR(saved[i].f32()[x], grads[i].f32()[x], 1e-5)
            << "gradient " << i << " element " << x;
  }
}

TEST(Gradients, Mamba2Mixer) {
  // 2 heads of 4 in 1 group of state 3, a kernel of 3, a padded position.
  int64_t heads = 2, headDim = 4, groups = 1, state = 3, kernel = 3;
  int64_t inner = heads * headDim, conv = inner + 2 * groups * state,
          proj = inner + conv + heads, hidden = 8;
  std::vector<Tensor> in = {randomTensor({2, 5, hidden}, 71),
                            randomTensor({proj, hidden}, 72, -0.5f, 0.5f),
                            randomTensor({conv, 1, kernel}, 73),
                            randomTensor({conv}, 74),
                            randomTensor({heads}, 75),
                            randomTensor({heads}, 76, -1.0f, 0.5f),
                            randomTensor({heads}, 77),
                            randomTensor({inner}, 78, 0.5f, 1.5f),
                            randomTensor({hidden, inner}, 79)};
  Tensor r = randomTensor({2, 5, hidden}, 80);
  Tensor mask(DType::I64, {2, 5});
  for (int64_t i = 0; i < 10; ++i)
    mask.i64()[i] = i != 9;
  auto loss = [&](std::vector<Tensor> &v) {
    return dot(mamba2_mixer(ctx(), v[0], v[1], v[2], v[3], v[4], v[5], v[6],
                            v[7], v[8], mask, heads, headDim, groups, state,
                            kernel, 1e-5, 0.0, false),
               r);
  };
  Tensors grads = mamba2_mixer_grad(
      ctx(), in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8],
      mask, r, heads, headDim, groups, state, kernel, 1e-5, 0.0, false);
  ASSERT_EQ(grads.size(), 9u);
  for (size_t i = 0; i < 9; ++i)
    checkDirectional(in, i, loss, grads[i], 81 + i, 1e-3, 5e-3);
}

TEST(Gradients, Activations) {
  // Away from 0, where squared ReLU's derivative jumps.
  Tensor x = randomTensor({3, 7}, 41, 0.1f, 2.0f), r = randomTensor({3, 7}, 42);
  for (int64_t i = 0; i < x.numel(); i += 2)
    x.f32()[i] = -x.f32()[i];
  using Forward = std::function<Tensor(const Tensor &)>;
  using Backward = std::function<Tensor(const Tensor &, const Tensor &)>;
  std::vector<std::pair<Forward, Backward>> cases = {
      {[](const Tensor &t) { return silu(ctx(), t); },
       [](const Tensor &t, const Tensor &d) { return silu_grad(ctx(), t, d); }},
      {[](const Tensor &t) { return gelu(ctx(), t, false); },
       [](const Tensor &t, const Tensor &d) {
         return gelu_grad(ctx(), t, d, false);
       }},
      {[](const Tensor &t) { return gelu(ctx(), t, true); },
       [](const Tensor &t, const Tensor &d) {
         return gelu_grad(ctx(), t, d, true);
       }},
      {[](const Tensor &t) { return relu_squared(ctx(), t); },
       [](const Tensor &t, const Tensor &d) {
         return relu_squared_grad(ctx(), t, d);
       }},
      {[](const Tensor &t) { return softcap(ctx(), t, 1.5); },
       [](const Tensor &t, const Tensor &d) {
         return softcap_grad(ctx(), t, d, 1.5);
       }}};
  for (auto &[forward, backward] : cases) {
    auto loss = [&](std::vector<Tensor> &in) { return dot(forward(in[0]), r); };
    checkDirectional({x}, 0, loss, backward(x, r), 43, 1e-3);
  }
}

TEST(Gradients, EmbeddingSkipsThePaddingRow) {
  Tensor ids(DType::I64, {2, 3});
  int64_t values[] = {1, 4, 1, 0, 2, 4};
  std::copy(values, values + 6, ids.i64());
  Tensor table = randomTensor({5, 4}, 51), r = randomTensor({2, 3, 4}, 52);
  auto loss = [&](std::vector<Tensor> &in) {
    return dot(embedding(ctx(), ids, in[0]), r);
  };
  checkDirectional({table}, 0, loss,
                   embedding_grad(ctx(), ids, r, table, false, -1, {}, {}), 53);
  Tensor padded = embedding_grad(ctx(), ids, r, table, false, 0, {}, {});
  for (int64_t h = 0; h < 4; ++h) {
    EXPECT_EQ(padded.f32()[h], 0.0f); // row 0, the padding token
    // Token 1 appears twice: its row sums both.
    EXPECT_NEAR(padded.f32()[4 + h], r.f32()[h] + r.f32()[8 + h], 1e-6);
  }
}

TEST(Gradients, CrossEntropy) {
  Tensor logits = randomTensor({2, 5, 7}, 61, -3.0f, 3.0f);
  Tensor ids(DType::I64, {2, 5}), mask(DType::I64, {2, 5});
  for (int64_t i = 0; i < 10; ++i) {
    ids.i64()[i] = (i * 3) % 7;
    mask.i64()[i] = i < 8; // the last two positions of row 1 are padding
  }
  Tensors out = cross_entropy(ctx(), logits, ids, mask);
  // The loss by hand: positions t < 4 of row 0 and t < 2 of row 1 count.
  double want = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t + 1 < 5; ++t) {
      if (!mask.i64()[b * 5 + t + 1])
        continue;
      const float *row = logits.f32() + (b * 5 + t) * 7;
      double sum = 0;
      for (int64_t v = 0; v < 7; ++v)
        sum += std::exp(double(row[v]));
      want += std::log(sum) - row[ids.i64()[b * 5 + t + 1]];
    }
  EXPECT_NEAR(out[0].f32()[0], want, 1e-5 * want);
  auto loss = [&](std::vector<Tensor> &in) {
    return double(cross_entropy(ctx(), in[0], ids, mask)[0].f32()[0]);
  };
  checkDirectional(
      {logits}, 0, loss,
      cross_entropy_grad(ctx(), logits, ids, mask, out[1], false, {}, {}), 62);
}

TEST(Gradients, CrossEntropyAcrossRowBlocks) {
  // 2 x 19 positions: blocks of the vectorized exponentials end inside a
  // row of the batch and the last one is partial. Each position's loss term
  // and gradient row against softmax - onehot computed here in double.
  const int64_t batch = 2, seq = 19, vocab = 33;
  Tensor logits = randomTensor({batch, seq, vocab}, 63, -8.0f, 8.0f);
  Tensor ids(DType::I64, {batch, seq}), mask(DType::I64, {batch, seq});
  for (int64_t i = 0; i < batch * seq; ++i) {
    ids.i64()[i] = (i * 7 + 3) % vocab;
    mask.i64()[i] = i % 5 != 4;
  }
  Tensors out = cross_entropy(ctx(), logits, ids, mask);
  Tensor grad =
      cross_entropy_grad(ctx(), logits, ids, mask, out[1], false, {}, {});
  double want = 0;
  for (int64_t p = 0; p < batch * seq; ++p) {
    const float *row = logits.f32() + p * vocab;
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v)
      sum += std::exp(double(row[v]));
    EXPECT_NEAR(out[1].f32()[p], std::log(sum), 1e-5) << p;
    bool counts = (p % seq) + 1 < seq && mask.i64()[p + 1];
    int64_t label = counts ? ids.i64()[p + 1] : -1;
    if (counts)
      want += std::log(sum) - row[label];
    for (int64_t v = 0; v < vocab; ++v) {
      double g = counts ? std::exp(double(row[v])) / sum - (v == label) : 0;
      ASSERT_NEAR(grad.f32()[p * vocab + v], g, 1e-6) << p << ", " << v;
    }
  }
  EXPECT_NEAR(out[0].f32()[0], want, 1e-5 * want);
}

TEST(Gradients, LinearCrossEntropyAcrossPositionBlocks) {
  // tp.linear_cross_entropy over 3 x 200 positions and a vocabulary of
  // 4096: blocks of 256 positions (4 MiB of logits), the last one partial
  // and ending inside a row. The loss, dx = dlogits W and dW = dlogits^T x
  // against the logits, softmax and products computed here in double.
  const int64_t batch = 3, seq = 200, hidden = 16, vocab = 4096;
  const int64_t positions = batch * seq;
  Tensor x = randomTensor({batch, seq, hidden}, 91, -1.0f, 1.0f);
  Tensor w = randomTensor({vocab, hidden}, 92, -1.0f, 1.0f);
  Tensor ids(DType::I64, {batch, seq}), mask(DType::I64, {batch, seq});
  for (int64_t i = 0; i < positions; ++i) {
    ids.i64()[i] = (i * 977 + 5) % vocab;
    mask.i64()[i] = i % 7 != 6;
  }
  Tensors out = linear_cross_entropy(ctx(), x, w, ids, mask);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].shape(), x.shape());
  EXPECT_EQ(out[2].shape(), w.shape());
  double want = 0;
  std::vector<double> dx(positions * hidden, 0.0), dw(vocab * hidden, 0.0);
  std::vector<double> logits(vocab);
  for (int64_t p = 0; p < positions; ++p) {
    bool counts = (p % seq) + 1 < seq && mask.i64()[p + 1];
    if (!counts)
      continue;
    int64_t label = ids.i64()[p + 1];
    double max = -INFINITY, sum = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      double acc = 0;
      for (int64_t k = 0; k < hidden; ++k)
        acc += double(x.f32()[p * hidden + k]) * w.f32()[v * hidden + k];
      logits[v] = acc;
      max = std::max(max, acc);
    }
    for (int64_t v = 0; v < vocab; ++v)
      sum += std::exp(logits[v] - max);
    double lse = max + std::log(sum);
    want += lse - logits[label];
    for (int64_t v = 0; v < vocab; ++v) {
      double g = std::exp(logits[v] - lse) - (v == label);
      for (int64_t k = 0; k < hidden; ++k) {
        dx[p * hidden + k] += g * w.f32()[v * hidden + k];
        dw[v * hidden + k] += g * x.f32()[p * hidden + k];
      }
    }
  }
  EXPECT_NEAR(out[0].f32()[0], want, 1e-5 * want);
  for (int64_t i = 0; i < positions * hidden; ++i)
    ASSERT_NEAR(out[1].f32()[i], dx[i], 1e-4) << "dx " << i;
  for (int64_t i = 0; i < vocab * hidden; ++i)
    ASSERT_NEAR(out[2].f32()[i], dw[i], 1e-4) << "dw " << i;
}

TEST(Gradients, SiluGradAcrossBlocks) {
  // More elements than one block of the vector loop, with a tail.
  const int64_t n = 40003;
  Tensor x = randomTensor({n}, 71, -12.0f, 12.0f), dy = randomTensor({n}, 72);
  Tensor grad = silu_grad(ctx(), x, dy);
  for (int64_t i = 0; i < n; ++i) {
    double v = x.f32()[i], s = 1 / (1 + std::exp(-v));
    double want = dy.f32()[i] * s * (1 + v * (1 - s));
    ASSERT_NEAR(grad.f32()[i], want, 2e-6 * std::max(1.0, std::fabs(want)))
        << i;
  }
}

TEST(Gradients, SiluMulGradIsTheVJPOfSiluTimesUp) {
  // L = <silu(gate) * up, R>: the fused op's two gradients along random
  // directions, against the forward kernels by central differences.
  Tensor gate = randomTensor({2, 3, 8}, 81, -4.0f, 4.0f),
         up = randomTensor({2, 3, 8}, 82), r = randomTensor({2, 3, 8}, 83);
  auto loss = [&](std::vector<Tensor> &in) {
    return dot(mul(ctx(), silu(ctx(), in[0]), in[1]), r);
  };
  Tensors grads = silu_mul_grad(ctx(), gate, up, r);
  ASSERT_EQ(grads.size(), 2u);
  checkDirectional({gate, up}, 0, loss, grads[0], 84);
  checkDirectional({gate, up}, 1, loss, grads[1], 85);
}

TEST(Gradients, SiluMulGradAcrossBlocksAndInBf16) {
  // More elements than one block, with a tail: each element against the
  // formula in double; in bf16, the f32 result of the same bf16 inputs
  // rounded once.
  const int64_t n = 40003;
  Tensor gate = randomTensor({n}, 86, -12.0f, 12.0f),
         up = randomTensor({n}, 87), dy = randomTensor({n}, 88);
  Tensors grads = silu_mul_grad(ctx(), gate, up, dy);
  for (int64_t i = 0; i < n; ++i) {
    double g = gate.f32()[i], s = 1 / (1 + std::exp(-g));
    double wantUp = dy.f32()[i] * g * s;
    double wantGate = dy.f32()[i] * up.f32()[i] * s * (1 + g * (1 - s));
    ASSERT_NEAR(grads[1].f32()[i], wantUp,
                2e-6 * std::max(1.0, std::fabs(wantUp)))
        << i;
    ASSERT_NEAR(grads[0].f32()[i], wantGate,
                2e-6 * std::max(1.0, std::fabs(wantGate)))
        << i;
  }
  Tensor g16 = gate.to(DType::BF16), u16 = up.to(DType::BF16),
         d16 = dy.to(DType::BF16);
  Tensors half = silu_mul_grad(ctx(), g16, u16, d16);
  Tensors full = silu_mul_grad(ctx(), g16.to(DType::F32), u16.to(DType::F32),
                               d16.to(DType::F32));
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(half[k].dtype(), DType::BF16);
    Tensor want = full[k].to(DType::BF16);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(static_cast<const uint16_t *>(half[k].raw())[i],
                static_cast<const uint16_t *>(want.raw())[i])
          << k << ", " << i;
  }
}

} // namespace
