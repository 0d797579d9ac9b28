//===- KernelsTest.cpp - tprt kernels against naive references ------------===//

#include "TestTensors.h"
#include "cpu/Gemm.h"
#include "cpu/Mkl.h"
#include "tprt/Rope.h"
#include "tprt/tprt.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <unistd.h>

using namespace tprt;
using tprt::test::ctx;
using tprt::test::randomTensor;

namespace {

void expectClose(const Tensor &got, const std::vector<double> &want,
                 double tol = 1e-5) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.f32()[i], want[i], tol * std::max(1.0, std::fabs(want[i])))
        << "at element " << i;
}

/// x W^T and x W^T + b in double, over the flattened leading dimensions.
std::pair<std::vector<double>, std::vector<double>>
naiveLinear(const Tensor &x, const Tensor &w, const Tensor &b) {
  int64_t in = w.dim(1), out = w.dim(0), rows = x.numel() / in;
  std::vector<double> y(rows * out), yBias(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < in; ++k)
        acc += double(x.f32()[r * in + k]) * w.f32()[o * in + k];
      y[r * out + o] = acc;
      yBias[r * out + o] = acc + b.f32()[o];
    }
  return {y, yBias};
}

TEST(Kernels, LinearMatchesNaive) {
  for (auto [rows, in, out] : {std::tuple{1, 3, 5}, {6, 16, 7}, {2, 1, 1}}) {
    Tensor x = randomTensor({rows, 1, in}, 1), w = randomTensor({out, in}, 2),
           b = randomTensor({out}, 3);
    auto [want, wantBias] = naiveLinear(x, w, b);
    Tensor y = linear(ctx(), x, w, LinearForm::Flat);
    EXPECT_EQ(y.shape(), (std::vector<int64_t>{rows, 1, out}));
    expectClose(y, want);
    expectClose(
        linear_epilogue(ctx(), x, w, b, LinearForm::Flat, LinearEpilogue::Bias),
        wantBias);
  }
}

/// dx = dy w and dw = dy^T x of a linear over every row, in double.
std::pair<std::vector<double>, std::vector<double>>
naiveLinearGrads(const Tensor &dy, const Tensor &x, const Tensor &w) {
  int64_t out = w.dim(0), in = w.dim(1), rows = in ? x.numel() / in : 0;
  std::vector<double> dx(rows * in, 0.0), dw(out * in, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out; ++j)
      for (int64_t k = 0; k < in; ++k) {
        dx[r * in + k] += double(dy.f32()[r * out + j]) * w.f32()[j * in + k];
        dw[j * in + k] += double(dy.f32()[r * out + j]) * x.f32()[r * in + k];
      }
  return {dx, dw};
}

// A linear's gradients overwrite an uninitialized output when there are
// rows to sum over; over no rows (an empty batch) they are zeros. Each
// output is made just after a same-sized buffer of NaNs is freed, which
// glibc's malloc hands back: an element the product skipped stays NaN.
TEST(Kernels, LinearGradientsOverwriteTheirOutput) {
  int64_t in = 24, out = 40;
  Tensor w = randomTensor({out, in}, 7);
  for (int64_t rows : {0, 5}) {
    Tensor dy = randomTensor({1, rows, out}, 8),
           x = randomTensor({1, rows, in}, 9);
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{1, rows, in}, std::vector<int64_t>{out, in}}) {
      Tensor poison = Tensor::uninitialized(DType::F32, shape);
      std::fill_n(poison.f32(), poison.numel(),
                  std::numeric_limits<float>::quiet_NaN());
    }
    auto [wantDx, wantDw] = naiveLinearGrads(dy, x, w);
    expectClose(linear_grad_input(ctx(), dy, w), wantDx);
    expectClose(linear_grad_weight(ctx(), dy, x), wantDw);
  }
}

// The backward's products where a dimension is one (a LoRA factor of rank
// one, a single row): dy^T of one output feature is a [1, rows] row, which
// BLAS reads row-major, whatever its strides say. Against double sums,
// under each TPRT_GEMM library (the tprt-unittests-* tests).
TEST(Kernels, LinearGradientsWithDimensionsOfOne) {
  for (auto [rows, in, out] : {std::tuple<int64_t, int64_t, int64_t>{5, 24, 1},
                               {5, 1, 24},
                               {1, 24, 40},
                               {1, 1, 1}}) {
    Tensor w = randomTensor({out, in}, 17), dy = randomTensor({rows, out}, 18),
           x = randomTensor({rows, in}, 19);
    auto [wantDx, wantDw] = naiveLinearGrads(dy, x, w);
    expectClose(linear_grad_input(ctx(), dy, w), wantDx);
    expectClose(linear_grad_weight(ctx(), dy, x), wantDw);
    Context &c = ctx();
    c.grads().erase("one.w");
    accumulate_linear_grad_weight(c, dy, x, w, "one.w", -1, false);
    expectClose(c.grads()["one.w"].grad, wantDw);
  }
}

// accumulate_linear_grad_weight: the product adds dy^T x into the FP32
// buffer itself. The step's first micro-batch overwrites the buffer (NaN
// before it here), the next ones add; a micro-batch of no rows adds
// nothing, or zeros the buffer when it is the first. Against the double
// sum of the products, and the separate ops within f32 rounding.
TEST(Kernels, WeightGradientAccumulatesIntoItsBuffer) {
  int64_t in = 24, out = 40;
  Tensor w = randomTensor({out, in}, 70);
  for (std::vector<int64_t> rows :
       {std::vector<int64_t>{5, 3}, std::vector<int64_t>{0, 7}}) {
    Context &c = ctx();
    for (const char *fqn : {"fused.w", "separate.w"}) {
      c.grads().erase(fqn);
      Context::GradBuffer &buffer = c.grads()[fqn];
      buffer.grad = Tensor::uninitialized(DType::F32, {out, in});
      std::fill_n(buffer.grad.f32(), buffer.grad.numel(),
                  std::numeric_limits<float>::quiet_NaN());
    }
    std::vector<double> want(out * in, 0.0);
    for (size_t k = 0; k < rows.size(); ++k) {
      int64_t r = rows[k];
      Tensor dy = randomTensor({1, r, out}, 71 + k),
             x = randomTensor({1, r, in}, 81 + k);
      accumulate_linear_grad_weight(c, dy, x, w, "fused.w", -1, false);
      accumulate_grad(c, linear_grad_weight(c, dy, x), w, "separate.w", -1,
                      false);
      for (int64_t i = 0; i < out * in; ++i)
        for (int64_t j = 0; j < r; ++j)
          want[i] +=
              double(dy.f32()[j * out + i / in]) * x.f32()[j * in + i % in];
    }
    const Tensor &fused = c.grads()["fused.w"].grad;
    const Tensor &separate = c.grads()["separate.w"].grad;
    for (int64_t i = 0; i < out * in; ++i) {
      EXPECT_NEAR(fused.f32()[i], want[i], 1e-5) << i << ", rows " << rows[0];
      EXPECT_NEAR(fused.f32()[i], separate.f32()[i], 1e-6) << i;
    }
    c.grads().erase("fused.w");
    c.grads().erase("separate.w");
  }
}

/// A gradient buffer of `shape` for `fqn`, NaN until the step's first
/// accumulation overwrites it.
static void freshNanBuffer(Context &c, const char *fqn,
                           std::vector<int64_t> shape) {
  c.grads().erase(fqn);
  Context::GradBuffer &buffer = c.grads()[fqn];
  buffer.grad = Tensor::uninitialized(DType::F32, std::move(shape));
  std::fill_n(buffer.grad.f32(), buffer.grad.numel(),
              std::numeric_limits<float>::quiet_NaN());
}

// accumulate_embedding_grad: dy's rows added into the buffer's rows, the
// first micro-batch zeroing it (NaN before it here), the padding row never
// touched. Against the sums written out here, and the separate ops.
TEST(Kernels, EmbeddingGradientAccumulatesIntoItsBuffer) {
  Context &c = ctx();
  int64_t vocab = 6, hidden = 5;
  Tensor table = randomTensor({vocab, hidden}, 90);
  freshNanBuffer(c, "fused.e", {vocab, hidden});
  freshNanBuffer(c, "separate.e", {vocab, hidden});
  std::vector<double> want(vocab * hidden, 0.0);
  int64_t batches[2][4] = {{1, 4, 1, 0}, {2, 4, 5, 5}};
  for (int k = 0; k < 2; ++k) {
    Tensor ids(DType::I64, {2, 2});
    std::copy(batches[k], batches[k] + 4, ids.i64());
    Tensor dy = randomTensor({2, 2, hidden}, 91 + k);
    accumulate_embedding_grad(c, ids, dy, table, "fused.e", -1, false, false,
                              /*paddingIdx=*/0, {}, {});
    accumulate_grad(c, embedding_grad(c, ids, dy, table, false, 0, {}, {}),
                    table, "separate.e", -1, false);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t h = 0; h < hidden; ++h)
        if (batches[k][i] != 0)
          want[batches[k][i] * hidden + h] += dy.f32()[i * hidden + h];
  }
  const Tensor &fused = c.grads()["fused.e"].grad;
  const Tensor &separate = c.grads()["separate.e"].grad;
  for (int64_t i = 0; i < vocab * hidden; ++i) {
    EXPECT_NEAR(fused.f32()[i], want[i], 1e-6) << i;
    EXPECT_EQ(fused.f32()[i], separate.f32()[i]) << i;
  }
  c.grads().erase("fused.e");
  c.grads().erase("separate.e");
}

// accumulate_linear_cross_entropy: the loss and dx of linear_cross_entropy,
// its dw added into the buffer by the products. Over two micro-batches
// (the first overwriting the NaN buffer), more positions than one block,
// against the separate ops.
TEST(Kernels, LossWeightGradientAccumulatesIntoItsBuffer) {
  Context &c = ctx();
  int64_t seq = 150, hidden = 8, vocab = 4096;
  Tensor w = randomTensor({vocab, hidden}, 100, -1.0f, 1.0f);
  freshNanBuffer(c, "fused.lm", {vocab, hidden});
  freshNanBuffer(c, "separate.lm", {vocab, hidden});
  for (int k = 0; k < 2; ++k) {
    Tensor x = randomTensor({2, seq, hidden}, 101 + k, -1.0f, 1.0f);
    Tensor ids(DType::I64, {2, seq}), mask(DType::I64, {2, seq});
    for (int64_t i = 0; i < 2 * seq; ++i) {
      ids.i64()[i] = (i * 131 + 7 * k) % vocab;
      mask.i64()[i] = i % 9 != 8;
    }
    Tensors fused = accumulate_linear_cross_entropy(
        c, x, w, ids, mask, "fused.lm", -1, false,
        /*vocabParallel=*/false, {}, {});
    Tensors separate = linear_cross_entropy(c, x, w, ids, mask);
    accumulate_grad(c, separate[2], w, "separate.lm", -1, false);
    ASSERT_EQ(fused.size(), 2u);
    EXPECT_EQ(fused[0].f32()[0], separate[0].f32()[0]);
    for (int64_t i = 0; i < x.numel(); ++i)
      ASSERT_EQ(fused[1].f32()[i], separate[1].f32()[i]) << "dx " << i;
  }
  const Tensor &fused = c.grads()["fused.lm"].grad;
  const Tensor &separate = c.grads()["separate.lm"].grad;
  for (int64_t i = 0; i < vocab * hidden; ++i)
    ASSERT_NEAR(fused.f32()[i], separate.f32()[i],
                1e-5 * std::max(1.0f, std::fabs(separate.f32()[i])))
        << "dw " << i;
  c.grads().erase("fused.lm");
  c.grads().erase("separate.lm");
}

// A bf16 program's weight gradients take the separate ops (their bf16
// product widened and added measured faster than a product into the f32
// buffer): the same buffer, bit for bit.
TEST(Kernels, Bf16WeightGradientAccumulatesAsTheSeparateOps) {
  int64_t in = 64, out = 48;
  Tensor w = randomTensor({out, in}, 90).to(DType::BF16);
  Context &c = ctx();
  for (int64_t k = 0; k < 2; ++k) {
    Tensor dy = randomTensor({1, 29 + k, out}, 91 + k).to(DType::BF16),
           x = randomTensor({1, 29 + k, in}, 93 + k).to(DType::BF16);
    accumulate_linear_grad_weight(c, dy, x, w, "bf16fused.w", -1, false);
    accumulate_grad(c, linear_grad_weight(c, dy, x), w, "bf16separate.w", -1,
                    false);
  }
  const Tensor &fused = c.grads()["bf16fused.w"].grad;
  const Tensor &separate = c.grads()["bf16separate.w"].grad;
  ASSERT_EQ(fused.dtype(), DType::F32);
  EXPECT_EQ(std::memcmp(fused.raw(), separate.raw(), fused.bytes()), 0);
  c.grads().erase("bf16fused.w");
  c.grads().erase("bf16separate.w");
}

#ifdef TPRT_TEST_BOTH_GEMMS
// TPRT_GEMM picks the f32 products' library; by default MKL on Intel CPUs
// where it opens, else OpenBLAS where oneDNN 2.x's matmul is not brgemm,
// which it has from AVX-512 (the avx512_core ISA: F, BW, VL, DQ) up.
TEST(Kernels, GemmLibraryFollowsTprtGemm) {
  const char *env = std::getenv("TPRT_GEMM");
  std::string choice = env && *env ? env : "auto";
  std::string library = cpu::gemmLibrary();
  __builtin_cpu_init();
  if (choice == "mkl" ||
      (choice == "auto" && __builtin_cpu_is("intel") && cpu::mkl())) {
    EXPECT_EQ(library.rfind("MKL ", 0), 0u) << library;
    return;
  }
  EXPECT_EQ(library.rfind("MKL ", 0), std::string::npos) << library;
  bool avx512Core =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  std::string name = cpu::gemmLibrary();
  // oneDNN 3 has brgemm matmuls below AVX-512 too: this rule is 2.x's.
  if (choice == "auto" && name.find("oneDNN 2.") == std::string::npos)
    GTEST_SKIP() << name;
#ifdef TPRT_TEST_XSMM
  // libxsmm, where it generates kernels (AVX2 and up), for packed weights
  // below AVX-512.
  bool xsmm = choice == "xsmm" || (choice == "auto" && !avx512Core);
#else
  bool xsmm = false;
#endif
  bool openBlas =
      !xsmm && (choice == "openblas" || (choice == "auto" && !avx512Core));
  EXPECT_EQ(name.rfind("libxsmm ", 0) == 0, xsmm) << name;
  EXPECT_EQ(name.rfind("OpenBLAS (f32), oneDNN ", 0) == 0, openBlas) << name;
  EXPECT_EQ(name.rfind("oneDNN ", 0) == 0, !openBlas && !xsmm) << name;
}
#endif

// The TPLinear dispatch's two forms (flattened linear and per-batch bmm)
// and the split-off bias agree with the naive product.
TEST(Kernels, LinearFormsAgree) {
  for (auto [batch, seq, in, out] :
       {std::tuple{3, 5, 16, 7}, {1, 4, 3, 5}, {2, 1, 8, 8}, {2, 0, 4, 3}}) {
    Tensor x = randomTensor({batch, seq, in}, 11),
           w = randomTensor({out, in}, 12), b = randomTensor({out}, 13);
    auto [want, wantBias] = naiveLinear(x, w, b);
    Tensor flat = linear(ctx(), x, w, LinearForm::Flat),
           bmm = linear(ctx(), x, w, LinearForm::Bmm);
    EXPECT_EQ(bmm.shape(), (std::vector<int64_t>{batch, seq, out}));
    expectClose(flat, want);
    expectClose(bmm, want);
    expectClose(
        linear_epilogue(ctx(), x, w, b, LinearForm::Bmm, LinearEpilogue::Bias),
        wantBias);
    expectClose(bias_add(ctx(), flat, b), wantBias);
    expectClose(
        linear_epilogue(ctx(), x, w, b, LinearForm::Flat, LinearEpilogue::Bias),
        wantBias);
  }
  Tensor x2 = randomTensor({4, 3}, 14), w = randomTensor({5, 3}, 15);
  EXPECT_EXIT(linear(ctx(), x2, w, LinearForm::Bmm), testing::ExitedWithCode(1),
              "linear \\(bmm\\): input .* does not match weight");
  EXPECT_EXIT(bias_add(ctx(), x2, randomTensor({4}, 16)),
              testing::ExitedWithCode(1), "bias_add: bias .* does not match");
}

/// Restores the shared test context's packing setting.
struct ConstantWeights {
  ConstantWeights() { ctx().setConstantWeights(true); }
  ~ConstantWeights() { ctx().setConstantWeights(false); }
};

/// x W^T in double (naiveLinear without a bias).
std::vector<double> naiveProduct(const Tensor &x, const Tensor &w) {
  return naiveLinear(x, w, Tensor(DType::F32, {w.dim(0)})).first;
}

/// `check(bmm)` with trained, then constant weights, each in the linear and
/// then the bmm form.
template <typename Check> void forEachPackingAndForm(const Check &check) {
  for (bool constant : {false, true}) {
    std::optional<ConstantWeights> packing;
    if (constant)
      packing.emplace();
    for (bool bmm : {false, true}) {
      SCOPED_TRACE(std::string(constant ? "constant" : "trained") +
                   (bmm ? ", bmm" : ", linear"));
      check(bmm);
    }
  }
}

/// `check(batch, seq, in, out, form)` over the linear shapes where each of
/// batch, sequence, input and output is one or not, in both forms.
template <typename Check> void forEachShapeWithOnes(const Check &check) {
  for (int64_t batch : {1, 2})
    for (int64_t seq : {1, 3})
      for (int64_t in : {1, 5})
        for (int64_t out : {1, 4})
          for (LinearForm form : {LinearForm::Flat, LinearForm::Bmm}) {
            SCOPED_TRACE(::testing::Message()
                         << "batch " << batch << " seq " << seq << " in " << in
                         << " out " << out << " bmm "
                         << (form == LinearForm::Bmm));
            check(batch, seq, in, out, form);
          }
}

// Every call of the linear family, forward and backward, where any of
// batch, sequence, input and output is one (a single token, a rank-one
// LoRA factor, a one-feature head): the BLAS libraries take a leading
// dimension per operand, and a dimension of one is where a layout is
// easiest to get wrong. With trained and constant (packed) weights, in
// both forms, against double sums; the tprt-unittests-* tests run it under
// each GEMM library.
TEST(Kernels, LinearFamilyOnDimensionsOfOne) {
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  for (bool constant : {false, true}) {
    std::optional<ConstantWeights> packing;
    if (constant)
      packing.emplace();
    SCOPED_TRACE(constant ? "constant weights" : "trained weights");
    forEachShapeWithOnes([&](int64_t batch, int64_t seq, int64_t in,
                             int64_t out, LinearForm form) {
      unsigned seed = 100 * batch + 10 * seq + in + out;
      Tensor x = randomTensor({batch, seq, in}, seed),
             w = randomTensor({out, in}, seed + 1),
             w1 = randomTensor({out + 1, in}, seed + 2),
             b = randomTensor({out}, seed + 3),
             other = randomTensor({batch, seq, out}, seed + 4),
             dy = randomTensor({batch, seq, out}, seed + 5);
      std::vector<double> p = naiveProduct(x, w);
      std::vector<double> withBias(p.size()), gated(p.size()), added(p.size());
      for (size_t i = 0; i < p.size(); ++i) {
        withBias[i] = p[i] + b.f32()[i % out];
        gated[i] = silu(p[i]) * other.f32()[i];
        added[i] = p[i] + other.f32()[i];
      }
      expectClose(linear(ctx(), x, w, form), p);
      expectClose(linear_epilogue(ctx(), x, w, b, form, LinearEpilogue::Bias),
                  withBias);
      expectClose(
          linear_epilogue(ctx(), x, w, other, form, LinearEpilogue::SiluMul),
          gated);
      expectClose(linear_add(ctx(), x, w, other, form, false), added);
      Tensor residual = Tensor::uninitialized(DType::F32, other.shape());
      std::copy_n(other.f32(), other.numel(), residual.f32());
      expectClose(linear_add_consuming(ctx(), x, w, residual, form, false),
                  added);
      Tensors two = linear_siblings(ctx(), x, w, w1, form);
      expectClose(two[0], p);
      expectClose(two[1], naiveProduct(x, w1));
      Tensors three = linear_siblings(ctx(), x, w1, w, w1, form);
      expectClose(three[1], p);
      Tensor up = randomTensor({out, in}, seed + 6);
      std::vector<double> u = naiveProduct(x, up), swiglu(p.size());
      for (size_t i = 0; i < p.size(); ++i)
        swiglu[i] = silu(p[i]) * u[i];
      expectClose(linear_swiglu(ctx(), x, w, up, form), swiglu);
      auto [dx, dw] = naiveLinearGrads(dy, x, w);
      expectClose(linear_grad_input(ctx(), dy, w), dx);
      expectClose(linear_grad_weight(ctx(), dy, x), dw);
      ctx().grads().erase("small.w");
      accumulate_linear_grad_weight(ctx(), dy, x, w, "small.w", -1, false);
      expectClose(ctx().grads()["small.w"].grad, dw);
    });
  }
}

// The same shapes in bf16 (a bf16 program's products, oneDNN's bf16
// matmul where it has one): against double sums of the bf16 operands,
// within the result's one rounding.
TEST(Kernels, Bf16LinearFamilyOnDimensionsOfOne) {
  auto bf16 = [](const Tensor &t) { return t.to(DType::BF16); };
  auto f32 = [](const Tensor &t) { return t.to(DType::F32); };
  forEachShapeWithOnes([&](int64_t batch, int64_t seq, int64_t in, int64_t out,
                           LinearForm form) {
    unsigned seed = 200 + 100 * batch + 10 * seq + in + out;
    Tensor x = bf16(randomTensor({batch, seq, in}, seed)),
           w = bf16(randomTensor({out, in}, seed + 1)),
           other = bf16(randomTensor({batch, seq, out}, seed + 2)),
           dy = bf16(randomTensor({batch, seq, out}, seed + 3));
    std::vector<double> p = naiveProduct(f32(x), f32(w)), added(p.size());
    for (size_t i = 0; i < p.size(); ++i)
      added[i] = p[i] + f32(other).f32()[i];
    expectClose(f32(linear(ctx(), x, w, form)), p, 1e-2);
    expectClose(f32(linear_add(ctx(), x, w, other, form, false)), added, 1e-2);
    auto [dx, dw] = naiveLinearGrads(f32(dy), f32(x), f32(w));
    expectClose(f32(linear_grad_input(ctx(), dy, w)), dx, 1e-2);
    expectClose(f32(linear_grad_weight(ctx(), dy, x)), dw, 1e-2);
  });
}

// The calls the table computes in f32 only (KernelsInF32): on bf16 or f16
// tensors the dispatch runs the f32 kernel on the widened operands and
// rounds the result once to the first operand's type: bit for bit the f32
// call's result rounded (the collectives need MPI: not here).
TEST(Kernels, F32OnlyCallsRoundOnce) {
  for (DType type : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(type));
    Tensor x = randomTensor({2, 3, 8}, 301).to(type),
           bias = randomTensor({8}, 302).to(type);
    Tensor q = randomTensor({1, 4, 16}, 303).to(type),
           k = randomTensor({1, 4, 8}, 304).to(type),
           v = randomTensor({1, 4, 8}, 305).to(type);
    auto expectRounded = [&](const Tensor &got, const Tensor &f32,
                             const char *what) {
      ASSERT_EQ(got.dtype(), type) << what;
      Tensor want = f32.to(type);
      ASSERT_EQ(got.bytes(), want.bytes()) << what;
      EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.bytes()), 0) << what;
    };
    Tensor xf = x.to(DType::F32), bf = bias.to(DType::F32);
    expectRounded(bias_add(ctx(), x, bias), bias_add(ctx(), xf, bf),
                  "bias_add");
    expectRounded(sum_leading(ctx(), x), sum_leading(ctx(), xf), "sum_leading");
    expectRounded(
        attention(ctx(), q, k, v, Tensor(), 2, 1, 8, 0.35, true, 0, 0.0),
        attention(ctx(), q.to(DType::F32), k.to(DType::F32), v.to(DType::F32),
                  Tensor(), 2, 1, 8, 0.35, true, 0, 0.0),
        "attention");
  }
}

// tp.linear_siblings: result i is weight i's product, in both forms, with
// two and three weights; with constant weights one product over their
// concatenation split into the results, otherwise the separate products.
// Other weights of the same shapes, and views of one allocation in other
// shapes, are not served the first ones' concatenation.
TEST(Kernels, LinearSiblingsAreEachWeightsProduct) {
  Tensor x = randomTensor({2, 5, 16}, 61);
  Tensor ws[] = {randomTensor({7, 16}, 62), randomTensor({3, 16}, 63),
                 randomTensor({9, 16}, 64)};
  forEachPackingAndForm([&](bool bmm) {
    Tensors two =
        bmm ? linear_siblings(ctx(), x, ws[0], ws[1], LinearForm::Bmm)
            : linear_siblings(ctx(), x, ws[0], ws[1], LinearForm::Flat);
    Tensors three =
        bmm ? linear_siblings(ctx(), x, ws[0], ws[1], ws[2], LinearForm::Bmm)
            : linear_siblings(ctx(), x, ws[0], ws[1], ws[2], LinearForm::Flat);
    ASSERT_EQ(two.size(), 2u);
    ASSERT_EQ(three.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      std::vector<double> want = naiveProduct(x, ws[i]);
      EXPECT_EQ(three[i].shape(), (std::vector<int64_t>{2, 5, ws[i].dim(0)}));
      expectClose(three[i], want);
      if (i < 2)
        expectClose(two[i], want);
    }
  });
  ConstantWeights packing;
  Tensor v0 = randomTensor({7, 16}, 65), v1 = randomTensor({3, 16}, 66);
  Tensors other = linear_siblings(ctx(), x, v0, v1, LinearForm::Flat);
  expectClose(other[0], naiveProduct(x, v0));
  expectClose(other[1], naiveProduct(x, v1));
  // Views of one allocation that start at one element but differ in shape
  // are other weights too.
  Tensor base = randomTensor({12, 16}, 68);
  Tensor longer = Tensor::view(base, 0, {7, 16}),
         shorter = Tensor::view(base, 0, {5, 16});
  expectClose(linear_siblings(ctx(), x, longer, v1, LinearForm::Flat)[0],
              naiveProduct(x, longer));
  Tensors viewed = linear_siblings(ctx(), x, shorter, v1, LinearForm::Flat);
  expectClose(viewed[0], naiveProduct(x, shorter));
  expectClose(viewed[1], naiveProduct(x, v1));
  EXPECT_EXIT(linear_siblings(ctx(), x, ws[0], randomTensor({3, 8}, 67),
                              LinearForm::Flat),
              testing::ExitedWithCode(1), "linear: input .* does not match");
}

// tp.linear_swiglu: silu(x wg^T) * (x wu^T) against the double product, in
// both forms, with trained and constant weights (constant: one product over
// [wg; wu] and the blockwise pass where the library has no post-ops, the
// gate's product with oneDNN's post-ops where it has). 3000 rows of 40
// features span several blocks of the pass and a partial last one.
TEST(Kernels, LinearSwigluIsSiluOfGateTimesUp) {
  Tensor x = randomTensor({2, 1500, 24}, 71), wg = randomTensor({40, 24}, 72),
         wu = randomTensor({40, 24}, 73);
  std::vector<double> g = naiveProduct(x, wg), u = naiveProduct(x, wu);
  std::vector<double> want(g.size());
  for (size_t i = 0; i < g.size(); ++i)
    want[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  forEachPackingAndForm([&](bool bmm) {
    Tensor h = bmm ? linear_swiglu(ctx(), x, wg, wu, LinearForm::Bmm)
                   : linear_swiglu(ctx(), x, wg, wu, LinearForm::Flat);
    EXPECT_EQ(h.shape(), (std::vector<int64_t>{2, 1500, 40}));
    expectClose(h, want, 1e-4);
  });
}

/// Sets the shared test context's autocast while it lives.
struct Autocast {
  Autocast() { ctx().setAutocast(DType::BF16); }
  ~Autocast() { ctx().setAutocast(DType::F32); }
};

/// `x` rounded to bf16 (nearest even), independently of the runtime's
/// rounding: the nearest of the two bf16 neighbours, ties to the even one.
float bf16Rounded(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  uint32_t down = bits & 0xffff0000u, up = down + 0x10000u;
  float lo, hi;
  std::memcpy(&lo, &down, sizeof lo);
  std::memcpy(&hi, &up, sizeof hi);
  double dLo = std::fabs(double(x) - lo), dHi = std::fabs(double(hi) - x);
  if (dLo != dHi)
    return dLo < dHi ? lo : hi;
  return (down & 0x10000u) ? hi : lo;
}

/// The product of the bf16-rounded operands, accumulated in double:
/// a[rows, k] b^T (b [n, k]).
std::vector<double> bf16Product(const float *a, const float *b, int64_t rows,
                                int64_t k, int64_t n, bool bTransposed) {
  std::vector<double> out(rows * n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < k; ++i)
        acc += double(bf16Rounded(a[r * k + i])) *
               bf16Rounded(bTransposed ? b[j * k + i] : b[i * n + j]);
      out[r * n + j] = acc;
    }
  return out;
}

// --autocast bf16 on the CPU: the linear forms (packed or not) and both
// backward products round their operands to bf16 and accumulate in f32.
// Against the double product of the rounded operands they agree within f32
// accumulation; the f32 product is further away than that.
TEST(Kernels, AutocastBf16RoundsTheOperandsOfEveryProduct) {
  int64_t rows = 37, in = 96, out = 40;
  Tensor x = randomTensor({1, rows, in}, 51), w = randomTensor({out, in}, 52);
  Tensor dy = randomTensor({1, rows, out}, 53);
  std::vector<double> wantY =
      bf16Product(x.f32(), w.f32(), rows, in, out, true);
  // dx = dy w: b = w [out, in] not transposed; dw = dy^T x.
  std::vector<double> wantDx =
      bf16Product(dy.f32(), w.f32(), rows, out, in, false);
  std::vector<float> dyT(out * rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out; ++j)
      dyT[j * rows + r] = dy.f32()[r * out + j];
  std::vector<double> wantDw =
      bf16Product(dyT.data(), x.f32(), out, rows, in, false);
  auto expectNear = [](const Tensor &got, const std::vector<double> &want,
                       double bound, const char *what) {
    ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
    double worst = 0;
    for (int64_t i = 0; i < got.numel(); ++i)
      worst = std::max(worst, std::fabs(got.f32()[i] - want[i]));
    EXPECT_LT(worst, bound) << what;
  };
  {
    Autocast bf16;
    expectNear(linear(ctx(), x, w, LinearForm::Flat), wantY, 1e-5, "linear");
    expectNear(linear(ctx(), x, w, LinearForm::Bmm), wantY, 1e-5, "linear_bmm");
    expectNear(linear_grad_input(ctx(), dy, w), wantDx, 1e-5, "grad input");
    expectNear(linear_grad_weight(ctx(), dy, x), wantDw, 1e-5, "grad weight");
    ConstantWeights constant;
    expectNear(linear(ctx(), x, w, LinearForm::Flat), wantY, 1e-5,
               "packed linear");
  }
  // Without autocast the products are f32's, which the rounding moves by
  // far more than the bound above.
  Tensor f32 = linear(ctx(), x, w, LinearForm::Flat);
  double moved = 0;
  for (int64_t i = 0; i < f32.numel(); ++i)
    moved = std::max(moved, std::fabs(f32.f32()[i] - wantY[i]));
  EXPECT_GT(moved, 1e-3);
}

// A program compiled with tpc --dtype bf16 / f16 hands the kernels
// activations and weights of that type: each result is of the activation's
// type, the value computed from the operands' values and rounded once (one
// ulp of the type at most: f32 accumulation may land on the other side of a
// rounding boundary than the exact value).
TEST(Kernels, ReducedPrecisionKernelsRoundTheirOutputOnce) {
  auto expectWithinUlp = [](const Tensor &got, DType dtype,
                            const std::vector<double> &exact,
                            const char *what) {
    ASSERT_EQ(got.dtype(), dtype) << what;
    ASSERT_EQ(got.numel(), static_cast<int64_t>(exact.size())) << what;
    Tensor wide = got.to(DType::F32);
    // bf16 keeps 8 significant bits, f16 11 (and spaces its subnormals,
    // below 2^-14, 2^-24 apart).
    double ulp = dtype == DType::BF16 ? 1.0 / 128 : 1.0 / 1024;
    double tiny = dtype == DType::BF16 ? 0 : std::ldexp(1.0, -24);
    int far = 0;
    for (int64_t i = 0; i < got.numel(); ++i)
      far += std::fabs(wide.f32()[i] - exact[i]) >
             ulp * std::fabs(exact[i]) + tiny;
    EXPECT_EQ(far, 0) << what;
  };
  for (DType dtype : {DType::BF16, DType::F16}) {
    int64_t rows = 29, in = 64, out = 48;
    Tensor x = randomTensor({1, rows, in}, 61).to(dtype);
    Tensor w = randomTensor({out, in}, 62).to(dtype);
    Tensor xf = x.to(DType::F32), wf = w.to(DType::F32);
    std::vector<double> product(rows * out);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < out; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < in; ++i)
          acc += double(xf.f32()[r * in + i]) * wf.f32()[j * in + i];
        product[r * out + j] = acc;
      }
    expectWithinUlp(linear(ctx(), x, w, LinearForm::Flat), dtype, product,
                    "linear");
    expectWithinUlp(linear(ctx(), x, w, LinearForm::Bmm), dtype, product,
                    "linear_bmm");
    {
      ConstantWeights constant;
      expectWithinUlp(linear(ctx(), x, w, LinearForm::Flat), dtype, product,
                      "packed linear");
    }
    // The backward's products: dx = dy w, dw = dy^T x.
    Tensor dy = randomTensor({1, rows, out}, 64).to(dtype);
    Tensor dyf = dy.to(DType::F32);
    std::vector<double> dx(rows * in, 0.0), dw(out * in, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < out; ++j)
        for (int64_t i = 0; i < in; ++i) {
          double g = dyf.f32()[r * out + j];
          dx[r * in + i] += g * wf.f32()[j * in + i];
          dw[j * in + i] += g * xf.f32()[r * in + i];
        }
    expectWithinUlp(linear_grad_input(ctx(), dy, w), dtype, dx, "grad input");
    expectWithinUlp(linear_grad_weight(ctx(), dy, x), dtype, dw, "grad weight");
    // An f32 weight (a kept f32 LoRA factor) under a reduced activation.
    expectWithinUlp(linear(ctx(), x, wf, LinearForm::Flat), dtype, product,
                    "f32 weight");

    std::vector<double> silu(x.numel());
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = xf.f32()[i];
      silu[i] = v / (1 + std::exp(-v));
    }
    expectWithinUlp(tprt::silu(ctx(), x), dtype, silu, "silu");
    // The elementwise maps read and write the narrow type directly.
    Tensor y = randomTensor({1, rows, in}, 65).to(dtype);
    Tensor yf = y.to(DType::F32);
    std::vector<double> sum(x.numel()), prod(x.numel()), siluGrad(x.numel());
    for (int64_t i = 0; i < x.numel(); ++i) {
      double a = xf.f32()[i], b = yf.f32()[i], s = 1 / (1 + std::exp(-a));
      sum[i] = a + b;
      prod[i] = a * b;
      siluGrad[i] = b * s * (1 + a * (1 - s));
    }
    expectWithinUlp(add(ctx(), x, y), dtype, sum, "add");
    expectWithinUlp(mul(ctx(), x, y), dtype, prod, "mul");
    expectWithinUlp(silu_grad(ctx(), x, y), dtype, siluGrad, "silu_grad");
    // The norm's statistics in f32 over reduced inputs, an f32 weight.
    Tensor nw = randomTensor({in}, 63);
    std::vector<double> norm(x.numel());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < in; ++i)
        ss += double(xf.f32()[r * in + i]) * xf.f32()[r * in + i];
      double inv = 1 / std::sqrt(ss / in + 1e-6);
      for (int64_t i = 0; i < in; ++i)
        norm[r * in + i] = xf.f32()[r * in + i] * inv * nw.f32()[i];
    }
    expectWithinUlp(rms_norm(ctx(), x, nw, 1e-6, 0, 0), dtype, norm,
                    "rms_norm");
    // The embedding copies rows in the table's type, exactly.
    Tensor ids(DType::I64, {2});
    ids.i64()[0] = 5;
    ids.i64()[1] = 1;
    Tensor rowsOut = embedding(ctx(), ids, w);
    ASSERT_EQ(rowsOut.dtype(), dtype);
    EXPECT_EQ(std::memcmp(rowsOut.raw(),
                          static_cast<const char *>(w.raw()) +
                              5 * in * dtypeSize(dtype),
                          in * dtypeSize(dtype)),
              0);
  }
}

// A forward-only program keeps weights in the GEMM library's packed layout:
// both forms, at shapes large enough for blocked layouts, with row counts
// that give different primitives for one weight.
TEST(Kernels, PackedWeightsMatchNaive) {
  ConstantWeights constant;
  Tensor w = randomTensor({96, 80}, 21), b = randomTensor({96}, 22);
  for (auto [batch, seq] : {std::pair{1, 33}, {4, 33}, {1, 1}, {3, 64}}) {
    Tensor x = randomTensor({batch, seq, 80}, 23 + batch * seq);
    auto [want, wantBias] = naiveLinear(x, w, b);
    expectClose(linear(ctx(), x, w, LinearForm::Flat), want);
    expectClose(linear(ctx(), x, w, LinearForm::Bmm), want);
    expectClose(
        linear_epilogue(ctx(), x, w, b, LinearForm::Flat, LinearEpilogue::Bias),
        wantBias);
  }
}

// Linears at shapes of several blocks of libxsmm's products (32 output
// features, 128 rows, 1024 deep) and partial ones of each, plain and added
// into a residual (the later depth blocks add to the first's sum), on
// constant weights (packed once) and changing ones; the gradient for the
// input at such a shape.
TEST(Kernels, LinearsInBlocksMatchNaive) {
  Tensor w = randomTensor({70, 1100}, 91), zero(DType::F32, {70});
  for (auto [batch, seq, packed] : {std::tuple{1, 300, true},
                                    {2, 129, true},
                                    {1, 128, true},
                                    {1, 300, false},
                                    {2, 129, false}}) {
    SCOPED_TRACE(testing::Message() << "batch " << batch << " seq " << seq
                                    << " packed " << packed);
    std::optional<ConstantWeights> constant;
    if (packed)
      constant.emplace();
    Tensor x = randomTensor({batch, seq, 1100}, 92 + seq);
    Tensor residual = randomTensor({batch, seq, 70}, 93 + seq);
    std::vector<double> want = naiveLinear(x, w, zero).first, sum = want;
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += residual.f32()[i];
    // f32 sums of 1100 products: rounding reaches 1e-5 of them.
    expectClose(linear(ctx(), x, w, LinearForm::Flat), want, 1e-4);
    expectClose(linear(ctx(), x, w, LinearForm::Bmm), want, 1e-4);
    expectClose(
        linear_add_consuming(ctx(), x, w, residual, LinearForm::Bmm, false),
        sum, 1e-4);
  }
  // The gradient for the input, dx = dy w: 1100 features of depth 70.
  int64_t rows = 300;
  Tensor dy = randomTensor({rows, 70}, 94), dx(DType::F32, {rows, 1100});
  cpu::linearGradInput(dy.f32(), w.f32(), dx.f32(), rows, 1100, 70);
  std::vector<double> want(rows * 1100);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < 70; ++o)
      for (int64_t i = 0; i < 1100; ++i)
        want[r * 1100 + i] +=
            double(dy.f32()[r * 70 + o]) * w.f32()[o * 1100 + i];
  expectClose(dx, want);
}

// The consuming residual adds (the residual taken; with MKL or OpenBLAS the
// product added into its storage by the GEMM) against the naive product
// plus the residual, plain and packed, both forms (the `once` forms need a
// communicator: tprt-mpi-test); a residual a view still shares is left as
// it was.
TEST(Kernels, ConsumingAddsMatchNaive) {
  Tensor w = randomTensor({96, 80}, 81);
  Tensor zero(DType::F32, {96});
  for (bool packed : {false, true}) {
    std::optional<ConstantWeights> constant;
    if (packed)
      constant.emplace();
    for (auto [batch, seq] : {std::pair{1, 33}, {3, 64}}) {
      Tensor x = randomTensor({batch, seq, 80}, 82 + batch * seq);
      Tensor original = randomTensor({batch, seq, 96}, 83 + batch * seq);
      std::vector<double> want = naiveLinear(x, w, zero).first;
      for (size_t i = 0; i < want.size(); ++i)
        want[i] += original.f32()[i];
      for (int form = 0; form < 2; ++form) {
        SCOPED_TRACE(testing::Message() << "packed " << packed << " form "
                                        << form << " batch " << batch);
        Tensor residual = Tensor::uninitialized(DType::F32, original.shape());
        std::copy_n(original.f32(), original.numel(), residual.f32());
        const void *storage = residual.raw();
        Tensor sum = form == 0 ? linear_add_consuming(ctx(), x, w, residual,
                                                      LinearForm::Flat, false)
                               : linear_add_consuming(ctx(), x, w, residual,
                                                      LinearForm::Bmm, false);
        EXPECT_FALSE(residual.defined());
        expectClose(sum, want);
        // MKL and OpenBLAS add into the residual; oneDNN's epilogue writes
        // a new tensor.
        EXPECT_EQ(sum.raw() == storage,
                  cpu::gemmLibrary()[0] != 'o') // "oneDNN ..."
            << cpu::gemmLibrary();
      }
      Tensor shared = randomTensor({batch, seq, 96}, 83 + batch * seq);
      Tensor view = Tensor::view(shared, 0, {shared.numel()});
      Tensor sum =
          linear_add_consuming(ctx(), x, w, shared, LinearForm::Flat, false);
      expectClose(sum, want);
      for (int64_t i = 0; i < view.numel(); ++i)
        ASSERT_EQ(view.f32()[i], original.f32()[i]);
    }
  }
}

// The linear forms with an epilogue (tp.linear_epilogue) against the naive
// product then the op, plain and packed, at sizes of several blocks and a
// partial one; in f32 they equal the separate ops bit for bit (the same
// accumulator, then the same vector code, rounding once each).
TEST(Kernels, LinearEpiloguesMatchNaiveAndTheSeparateOps) {
  Tensor w = randomTensor({96, 80}, 71);
  Tensor zero(DType::F32, {96});
  for (bool packed : {false, true}) {
    std::optional<ConstantWeights> constant;
    if (packed)
      constant.emplace();
    for (auto [batch, seq] : {std::pair{1, 33}, {3, 64}, {2, 1}}) {
      Tensor x = randomTensor({batch, seq, 80}, 72 + batch * seq);
      Tensor other = randomTensor({batch, seq, 96}, 73 + batch * seq);
      std::vector<double> product = naiveLinear(x, w, zero).first;
      std::vector<double> sum(product.size()), gated(product.size());
      for (size_t i = 0; i < product.size(); ++i) {
        double p = product[i], o = other.f32()[i];
        sum[i] = p + o;
        gated[i] = p / (1.0 + std::exp(-p)) * o;
      }
      for (bool bmm : {false, true}) {
        SCOPED_TRACE(testing::Message() << "packed " << packed << " bmm " << bmm
                                        << " batch " << batch);
        Tensor added =
            bmm ? linear_add(ctx(), x, w, other, LinearForm::Bmm, false)
                : linear_add(ctx(), x, w, other, LinearForm::Flat, false);
        Tensor gatedOut =
            bmm ? linear_epilogue(ctx(), x, w, other, LinearForm::Bmm,
                                  LinearEpilogue::SiluMul)
                : linear_epilogue(ctx(), x, w, other, LinearForm::Flat,
                                  LinearEpilogue::SiluMul);
        EXPECT_EQ(added.shape(), other.shape());
        expectClose(added, sum);
        expectClose(gatedOut, gated);
        Tensor y = bmm ? linear(ctx(), x, w, LinearForm::Bmm)
                       : linear(ctx(), x, w, LinearForm::Flat);
        Tensor separateSum = add(ctx(), y, other),
               separateGated = mul(ctx(), silu(ctx(), y), other);
        EXPECT_EQ(0, std::memcmp(added.raw(), separateSum.raw(),
                                 added.numel() * sizeof(float)));
        EXPECT_EQ(0, std::memcmp(gatedOut.raw(), separateGated.raw(),
                                 gatedOut.numel() * sizeof(float)));
      }
    }
  }
  // A bf16 program's tensors: within bf16's rounding of the naive value
  // (fused where the library has bf16 products, else the separate ops).
  Tensor x = randomTensor({2, 17, 80}, 81).to(DType::BF16);
  Tensor other = randomTensor({2, 17, 96}, 82).to(DType::BF16);
  Tensor wb = w.to(DType::BF16);
  std::vector<double> product =
      naiveLinear(x.to(DType::F32), wb.to(DType::F32), zero).first;
  std::vector<double> sum(product.size());
  for (size_t i = 0; i < product.size(); ++i)
    sum[i] = product[i] + other.to(DType::F32).f32()[i];
  Tensor added = linear_add(ctx(), x, wb, other, LinearForm::Flat, false);
  EXPECT_EQ(added.dtype(), DType::BF16);
  expectClose(added.to(DType::F32), sum, 1e-2);
}

// A packed weight belongs to its allocation: a new weight at the address of
// a freed one is packed afresh, and a view is packed by its own elements.
TEST(Kernels, PackedWeightsFollowTheirAllocation) {
  ConstantWeights constant;
  Tensor x = randomTensor({8, 64}, 31);
  // glibc hands the freed block of one iteration to the next.
  for (unsigned seed = 32; seed < 40; ++seed) {
    Tensor w = randomTensor({48, 64}, seed), b = randomTensor({48}, 1);
    expectClose(linear(ctx(), x, w, LinearForm::Flat),
                naiveLinear(x, w, b).first);
  }
  Tensor base = randomTensor({2, 48, 64}, 41);
  Tensor top = Tensor::view(base, 0, {48, 64}),
         bottom = Tensor::view(base, 48 * 64, {48, 64});
  Tensor b = randomTensor({48}, 1);
  expectClose(linear(ctx(), x, top, LinearForm::Flat),
              naiveLinear(x, top, b).first);
  expectClose(linear(ctx(), x, bottom, LinearForm::Flat),
              naiveLinear(x, bottom, b).first);
}

TEST(Kernels, EmbeddingGathersRowsAndRejectsBadIds) {
  Tensor table = randomTensor({5, 3}, 4);
  Tensor ids(DType::I64, {1, 3});
  ids.i64()[0] = 4, ids.i64()[1] = 0, ids.i64()[2] = 4;
  Tensor y = embedding(ctx(), ids, table);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{1, 3, 3}));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(y.f32()[i * 3 + j], table.f32()[ids.i64()[i] * 3 + j]);
  ids.i64()[1] = 5;
  EXPECT_EXIT(embedding(ctx(), ids, table), testing::ExitedWithCode(1),
              "token id 5 at position 1 is outside the vocabulary \\[0, 5\\)");
}

TEST(Kernels, RmsNormWithOffsetAndGroups) {
  Tensor x = randomTensor({2, 3, 8}, 5), w = randomTensor({8}, 6);
  for (double offset : {0.0, 1.0}) {
    std::vector<double> want(x.numel());
    for (int r = 0; r < 6; ++r) {
      double ms = 0;
      for (int i = 0; i < 8; ++i)
        ms += double(x.f32()[r * 8 + i]) * x.f32()[r * 8 + i] / 8;
      for (int i = 0; i < 8; ++i)
        want[r * 8 + i] =
            x.f32()[r * 8 + i] / std::sqrt(ms + 1e-6) * (offset + w.f32()[i]);
    }
    expectClose(rms_norm(ctx(), x, w, 1e-6, offset, 0), want, 1e-5);
  }
  // Per-head groups of 4 (q_norm on 2 packed heads).
  Tensor wg = randomTensor({4}, 7);
  std::vector<double> want(x.numel());
  for (int g = 0; g < 12; ++g) {
    double ms = 0;
    for (int i = 0; i < 4; ++i)
      ms += double(x.f32()[g * 4 + i]) * x.f32()[g * 4 + i] / 4;
    for (int i = 0; i < 4; ++i)
      want[g * 4 + i] = x.f32()[g * 4 + i] / std::sqrt(ms + 1e-5) * wg.f32()[i];
  }
  expectClose(rms_norm(ctx(), x, wg, 1e-5, 0.0, 4), want, 1e-5);
}

/// The same bytes (bit-for-bit equal results).
void expectSameBits(const Tensor &got, const Tensor &want, const char *what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.bytes()), 0) << what;
}

TEST(Kernels, AddRmsNormIsTheSumAndItsNorm) {
  // 15 rows of 40 (more than one row per thread).
  Tensor a = randomTensor({3, 5, 40}, 11, -2.0f, 2.0f),
         b = randomTensor({3, 5, 40}, 12), w = randomTensor({40}, 13);
  for (double offset : {0.0, 1.0}) {
    Tensors fused = add_rms_norm(ctx(), a, b, w, 1e-6, offset);
    std::vector<double> sum(a.numel()), want(a.numel());
    for (int r = 0; r < 15; ++r) {
      double ms = 0;
      for (int i = 0; i < 40; ++i) {
        sum[r * 40 + i] = double(a.f32()[r * 40 + i]) + b.f32()[r * 40 + i];
        ms += sum[r * 40 + i] * sum[r * 40 + i] / 40;
      }
      for (int i = 0; i < 40; ++i)
        want[r * 40 + i] =
            sum[r * 40 + i] / std::sqrt(ms + 1e-6) * (offset + w.f32()[i]);
    }
    expectClose(fused[0], sum, 1e-6);
    expectClose(fused[1], want, 1e-5);
    // The separate calls' values bit for bit.
    Tensor added = add(ctx(), a, b);
    expectSameBits(fused[0], added, "f32 sum");
    expectSameBits(fused[1], rms_norm(ctx(), added, w, 1e-6, offset, 0),
                   "f32 norm");
  }
  // bf16 (the sum rounded before the norm reads it) and f16 (the separate
  // calls), with a weight of another type.
  for (DType dtype : {DType::BF16, DType::F16}) {
    Tensor ar = a.to(dtype), br = b.to(dtype), wr = w.to(DType::BF16);
    Tensors fused = add_rms_norm(ctx(), ar, br, wr, 1e-5, 1.0);
    Tensor added = add(ctx(), ar, br);
    expectSameBits(fused[0], added, "reduced-precision sum");
    expectSameBits(fused[1], rms_norm(ctx(), added, wr, 1e-5, 1.0, 0),
                   "reduced-precision norm");
  }
}

TEST(KernelsDeathTest, AddRmsNormOfMismatchedOperandsIsFatal) {
  Tensor a = randomTensor({2, 8}, 1), w = randomTensor({6}, 2);
  EXPECT_DEATH(add_rms_norm(ctx(), a, a, w, 1e-6, 0.0),
               "add_rms_norm: input f32\\[2, 8\\] and weight f32\\[6\\] do not "
               "match");
  EXPECT_DEATH(add_rms_norm(ctx(), a, randomTensor({8, 2}, 3), w, 1e-6, 0.0),
               "add_rms_norm");
}

/// RoPE as a rotation of complex pairs.
std::vector<double> naiveRotary(const Tensor &x, int64_t headDim,
                                int64_t rotaryDim, double theta,
                                bool interleaved) {
  int64_t b = x.dim(0), s = x.dim(1), heads = x.dim(2) / headDim;
  std::vector<double> out(x.f32(), x.f32() + x.numel());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t p = 0; p < s; ++p)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < rotaryDim / 2; ++i) {
          double angle = p * std::pow(theta, -2.0 * i / rotaryDim);
          int64_t base = ((bi * s + p) * heads + h) * headDim;
          int64_t a = base + (interleaved ? 2 * i : i);
          int64_t c = base + (interleaved ? 2 * i + 1 : i + rotaryDim / 2);
          double re = x.f32()[a], im = x.f32()[c];
          out[a] = re * std::cos(angle) - im * std::sin(angle);
          out[c] = re * std::sin(angle) + im * std::cos(angle);
        }
  return out;
}

TEST(Kernels, RotaryMatchesComplexRotation) {
  Tensor x = randomTensor({2, 7, 3 * 8}, 8);
  for (bool interleaved : {false, true})
    for (int64_t rot : {8, 4})
      expectClose(rotary(ctx(), x, 8, rot, 10000.0, interleaved, 0, 1.0, 1.0,
                         4.0, 8192, 32.0, 1.0, true, 1.0, false, {}, {}),
                  naiveRotary(x, 8, rot, 10000.0, interleaved), 1e-4);
  // Sequence length 1: position 0 is the identity.
  Tensor one = randomTensor({1, 1, 16}, 9);
  expectClose(rotary(ctx(), one, 16, 16, 500000.0, false, 0, 1.0, 1.0, 4.0,
                     8192, 32.0, 1.0, true, 1.0, false, {}, {}),
              std::vector<double>(one.f32(), one.f32() + 16), 0);
}

TEST(Kernels, RotaryTablesFollowEachCallsParameters) {
  // The runtime keeps the last call's cos and sin tables: calls that differ
  // in theta, sequence length, rotary width or attention factor, or that
  // rotate back (the transpose), each get their own.
  auto rope = [](const Tensor &t, int64_t rot, double theta,
                 double attentionFactor = 1.0, bool transpose = false) {
    return rotary(ctx(), t, 16, rot, theta, false, 0, 1.0, 1.0, 4.0, 8192, 32.0,
                  1.0, true, attentionFactor, transpose, {}, {});
  };
  Tensor x = randomTensor({1, 5, 32}, 21),
         longer = randomTensor({1, 9, 32}, 22);
  for (double theta : {10000.0, 500000.0, 10000.0})
    expectClose(rope(x, 16, theta), naiveRotary(x, 16, 16, theta, false), 1e-4);
  expectClose(rope(longer, 16, 10000.0),
              naiveRotary(longer, 16, 16, 10000.0, false), 1e-4);
  expectClose(rope(x, 8, 10000.0), naiveRotary(x, 16, 8, 10000.0, false), 1e-4);
  std::vector<double> doubled = naiveRotary(x, 16, 16, 10000.0, false);
  for (int64_t i = 0; i < x.numel(); ++i)
    doubled[i] = 2 * doubled[i];
  expectClose(rope(x, 16, 10000.0, 2.0), doubled, 1e-4);
  Tensor there = rope(x, 16, 10000.0);
  expectClose(rope(there, 16, 10000.0, 1.0, /*transpose=*/true),
              std::vector<double>(x.f32(), x.f32() + x.numel()), 1e-5);
}

TEST(Kernels, RotaryLlama3ScalingAtLongPositions) {
  // Llama 3.1's scaling, from its definition in double precision (HF's
  // _compute_llama3_parameters), at positions where each band matters.
  const double theta = 500000.0, factor = 8.0, low = 1.0, high = 4.0,
               context = 8192.0;
  const int64_t headDim = 16, seq = 6000;
  std::vector<double> freq(headDim / 2);
  for (int64_t i = 0; i < headDim / 2; ++i) {
    double f = std::pow(theta, -2.0 * i / headDim);
    double wavelen = 2 * M_PI / f;
    if (wavelen > context / low)
      f /= factor;
    else if (wavelen >= context / high) {
      double smooth = (context / wavelen - low) / (high - low);
      f = (1 - smooth) * f / factor + smooth * f;
    }
    freq[i] = f;
  }
  Tensor x = randomTensor({1, seq, headDim}, 11);
  std::vector<double> want(x.f32(), x.f32() + x.numel());
  for (int64_t p = 0; p < seq; ++p)
    for (int64_t i = 0; i < headDim / 2; ++i) {
      double angle = p * freq[i];
      int64_t a = p * headDim + i, c = a + headDim / 2;
      double re = x.f32()[a], im = x.f32()[c];
      want[a] = re * std::cos(angle) - im * std::sin(angle);
      want[c] = re * std::sin(angle) + im * std::cos(angle);
    }
  // f32 angles at position 6000 carry about 6000 * 2^-24 rad of rounding.
  expectClose(rotary(ctx(), x, headDim, headDim, theta, false, 2, factor, low,
                     high, 8192, 32.0, 1.0, true, 1.0, false, {}, {}),
              want, 2e-3);
  // Unscaled RoPE is far from it there.
  Tensor plain = rotary(ctx(), x, headDim, headDim, theta, false, 0, 1.0, 1.0,
                        4.0, 8192, 32.0, 1.0, true, 1.0, false, {}, {});
  double worst = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    worst = std::max(worst, std::fabs(plain.f32()[i] - want[i]));
  EXPECT_GT(worst, 0.1);
}

TEST(Kernels, YarnFrequenciesMatchTransformers) {
  // transformers 5.23's inv_freq for rope_type yarn, theta 1e4, factor 4,
  // 4096 original positions, head_dim 16 (test/models/qwen2_rope_yarn).
  const double hf[] = {1.0,         0.31622776389,  0.10000000149,
                       0.025693506, 0.00624999963,  0.0013834965648,
                       0.000250000, 7.905694656e-05};
  tprt::RopeScaling yarn;
  yarn.type = tprt::RopeType::Yarn;
  yarn.factor = 4.0;
  yarn.originalMaxPositions = 4096;
  float freq[8];
  tprt::ropeInverseFrequencies(freq, 16, 10000.0, yarn);
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(freq[i], hf[i], 1e-6 * hf[i]) << "frequency " << i;
}

/// Attention with an explicit visibility matrix and double precision.
std::vector<double> naiveAttention(const Tensor &q, const Tensor &k,
                                   const Tensor &v, const Tensor *mask,
                                   int64_t heads, int64_t kvHeads, int64_t d,
                                   double scale, bool causal, int64_t window,
                                   double softcap) {
  int64_t b = q.dim(0), s = q.dim(1), t = k.dim(1);
  std::vector<double> out(q.numel(), 0.0);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t kh = h * kvHeads / heads;
      for (int64_t i = 0; i < s; ++i) {
        std::vector<double> score(t), prob(t, 0.0);
        std::vector<bool> visible(t);
        double best = -1e300;
        for (int64_t j = 0; j < t; ++j) {
          visible[j] = (!causal || j <= i) && (window == 0 || i - j < window) &&
                       (!mask || mask->i64()[bi * t + j] != 0);
          double dot = 0;
          for (int64_t x = 0; x < d; ++x)
            dot += double(q.f32()[((bi * s + i) * heads + h) * d + x]) *
                   k.f32()[((bi * t + j) * kvHeads + kh) * d + x];
          score[j] = dot * scale;
          if (softcap > 0)
            score[j] = softcap * std::tanh(score[j] / softcap);
          if (visible[j])
            best = std::max(best, score[j]);
        }
        double total = 0;
        for (int64_t j = 0; j < t; ++j)
          if (visible[j])
            total += (prob[j] = std::exp(score[j] - best));
        for (int64_t j = 0; j < t; ++j)
          for (int64_t x = 0; x < d && total > 0; ++x)
            out[((bi * s + i) * heads + h) * d + x] +=
                prob[j] / total *
                v.f32()[((bi * t + j) * kvHeads + kh) * d + x];
      }
    }
  return out;
}

struct AttentionCase {
  int64_t batch, seq, heads, kvHeads, window;
  bool causal;
  int64_t padded; // leading keys masked out (0: no key mask)
  double softcap;
};

class AttentionTest : public testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionTest, MatchesNaive) {
  AttentionCase c = GetParam();
  int64_t d = 4;
  Tensor q = randomTensor({c.batch, c.seq, c.heads * d}, 10, -2, 2);
  Tensor k = randomTensor({c.batch, c.seq, c.kvHeads * d}, 11, -2, 2);
  Tensor v = randomTensor({c.batch, c.seq, c.kvHeads * d}, 12);
  Tensor mask;
  if (c.padded) {
    mask = Tensor(DType::I64, {c.batch, c.seq});
    for (int64_t i = 0; i < mask.numel(); ++i)
      mask.i64()[i] = (i % c.seq) >= c.padded || c.seq == 1;
  }
  Tensor got = attention(ctx(), q, k, v, mask, c.heads, c.kvHeads, d, 0.5,
                         c.causal, c.window, c.softcap);
  expectClose(got,
              naiveAttention(q, k, v, c.padded ? &mask : nullptr, c.heads,
                             c.kvHeads, d, 0.5, c.causal, c.window, c.softcap),
              1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AttentionTest,
    testing::Values(AttentionCase{2, 6, 4, 2, 0, true, 0, 0},   // GQA 2
                    AttentionCase{1, 6, 3, 3, 0, true, 0, 0},   // ratio 1
                    AttentionCase{2, 1, 4, 1, 0, true, 1, 0},   // seq 1
                    AttentionCase{2, 7, 2, 1, 3, true, 0, 0},   // window 3
                    AttentionCase{1, 5, 2, 2, 64, true, 0, 0},  // window > seq
                    AttentionCase{2, 6, 4, 2, 0, true, 1, 0},   // padding
                    AttentionCase{1, 6, 2, 1, 0, false, 0, 0},  // not causal
                    AttentionCase{1, 6, 2, 1, 0, true, 0, 2.0}, // softcap
                    // Several query blocks and key tiles (kernels.cpp's
                    // kAttentionQueryBlock, kAttentionKeyBlock): the online
                    // softmax across tiles, causal tiles skipped, window
                    // tiles skipped, a first tile every row sees nothing
                    // of, and soft-capping per tile.
                    AttentionCase{1, 300, 4, 2, 0, true, 0, 0},
                    AttentionCase{2, 300, 2, 1, 150, true, 0, 0},
                    AttentionCase{1, 300, 2, 1, 0, false, 200, 0},
                    AttentionCase{1, 300, 2, 2, 0, true, 130, 2.0}));

TEST(Kernels, QueryThatSeesNoKeyIsZero) {
  Tensor q = randomTensor({1, 3, 4}, 13), k = randomTensor({1, 3, 4}, 14);
  Tensor mask(DType::I64, {1, 3});
  mask.i64()[0] = 0, mask.i64()[1] = 1, mask.i64()[2] = 1;
  Tensor y = attention(ctx(), q, k, k, mask, 1, 1, 4, 0.5, true, 0, 0);
  for (int x = 0; x < 4; ++x)
    EXPECT_EQ(y.f32()[x], 0.0f);
}

/// SiLU, tanh-GELU and exact GELU of each element of `x`, in double.
struct ActivationReferences {
  std::vector<double> silu, geluTanh, gelu;
  explicit ActivationReferences(const Tensor &x) {
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = x.f32()[i];
      silu.push_back(v / (1 + std::exp(-v)));
      geluTanh.push_back(
          0.5 * v *
          (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
      gelu.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    }
  }
};

TEST(Kernels, Activations) {
  Tensor x = randomTensor({37}, 15, -6, 6);
  ActivationReferences want(x);
  std::vector<double> r2, sc, cap;
  for (int i = 0; i < 37; ++i) {
    double v = x.f32()[i];
    r2.push_back(v > 0 ? v * v : 0);
    sc.push_back(v * 8.0);
    cap.push_back(3.0 * std::tanh(v / 3.0));
  }
  expectClose(silu(ctx(), x), want.silu);
  expectClose(gelu(ctx(), x, true), want.geluTanh);
  expectClose(gelu(ctx(), x, false), want.gelu);
  expectClose(relu_squared(ctx(), x), r2);
  expectClose(scale(ctx(), x, 8.0), sc);
  expectClose(softcap(ctx(), x, 3.0), cap);
  Tensor y = randomTensor({37}, 16);
  std::vector<double> sum, prod;
  for (int i = 0; i < 37; ++i) {
    sum.push_back(double(x.f32()[i]) + y.f32()[i]);
    prod.push_back(double(x.f32()[i]) * y.f32()[i]);
  }
  expectClose(add(ctx(), x, y), sum);
  expectClose(mul(ctx(), x, y), prod);
  // Same-shape f32 products in the blocks the threads share, the last one
  // partial and not a whole number of vectors.
  Tensor big = randomTensor({2, 16389}, 17),
         other = randomTensor({2, 16389}, 18);
  std::vector<double> bigProd;
  for (int64_t i = 0; i < big.numel(); ++i)
    bigProd.push_back(double(big.f32()[i]) * other.f32()[i]);
  expectClose(mul(ctx(), big, other), bigProd);
}

// The vectorized activations over many elements (full vectors, a tail, and
// every thread's share), including where exp overflows or underflows.
TEST(Kernels, ActivationsAtScale) {
  Tensor x = randomTensor({4099}, 17, -20, 20);
  x.f32()[0] = -100.0f;
  x.f32()[1] = 100.0f;
  x.f32()[2] = 0.0f;
  x.f32()[3] = -1e-20f;
  ActivationReferences want(x);
  expectClose(silu(ctx(), x), want.silu);
  expectClose(gelu(ctx(), x, true), want.geluTanh);
  expectClose(gelu(ctx(), x, false), want.gelu);
}

/// Mamba2 in its quadratic ("attention") form: y_t = sum_{s<=t}
/// (C_t . B_s) exp(A sum_{r=s+1..t} dt_r) dt_s x_s + D x_t, in double,
/// from the same projections the kernel computes; a different algorithm from
/// the kernel's recurrence.
TEST(Kernels, Mamba2MatchesQuadraticForm) {
  const int64_t batch = 2, seq = 6, hidden = 8, heads = 4, headDim = 2,
                groups = 2, state = 3, kernel = 3;
  const int64_t inner = heads * headDim, conv = inner + 2 * groups * state,
                proj = inner + conv + heads;
  for (bool masked : {false, true}) {
    Tensor x = randomTensor({batch, seq, hidden}, 30);
    Tensor inW = randomTensor({proj, hidden}, 31, -0.5, 0.5);
    Tensor cw = randomTensor({conv, 1, kernel}, 32),
           cb = randomTensor({conv}, 33);
    Tensor dtb = randomTensor({heads}, 34), alog = randomTensor({heads}, 35);
    Tensor dd = randomTensor({heads}, 36),
           nw = randomTensor({inner}, 37, 0.5, 1.5);
    Tensor outW = randomTensor({hidden, inner}, 38, -0.5, 0.5);
    Tensor mask;
    if (masked) {
      mask = Tensor(DType::I64, {batch, seq});
      for (int64_t i = 0; i < batch * seq; ++i)
        mask.i64()[i] = !(i < 2); // row 0 left-padded by 2
    }
    Tensor got =
        mamba2_mixer(ctx(), x, inW, cw, cb, dtb, alog, dd, nw, outW, mask,
                     heads, headDim, groups, state, kernel, 1e-5, 1e-3, false);
    auto keep = [&](int64_t b, int64_t t) {
      return !masked || mask.i64()[b * seq + t] != 0;
    };
    std::vector<double> want(batch * seq * hidden);
    for (int64_t b = 0; b < batch; ++b) {
      // Projection of the masked input, then conv + SiLU + mask.
      std::vector<std::vector<double>> pr(seq, std::vector<double>(proj)),
          xbc(seq, std::vector<double>(conv));
      for (int64_t t = 0; t < seq; ++t)
        for (int64_t o = 0; o < proj; ++o) {
          double acc = 0;
          for (int64_t k = 0; k < hidden; ++k)
            acc += keep(b, t) * double(x.f32()[(b * seq + t) * hidden + k]) *
                   inW.f32()[o * hidden + k];
          pr[t][o] = acc;
        }
      for (int64_t t = 0; t < seq; ++t)
        for (int64_t c = 0; c < conv; ++c) {
          double acc = cb.f32()[c];
          for (int64_t k = 0; k < kernel; ++k)
            if (t - (kernel - 1) + k >= 0)
              acc += cw.f32()[c * kernel + k] *
                     pr[t - (kernel - 1) + k][inner + c];
          xbc[t][c] = keep(b, t) ? acc / (1 + std::exp(-acc)) : 0.0;
        }
      std::vector<std::vector<double>> y(seq, std::vector<double>(inner, 0.0));
      for (int64_t h = 0; h < heads; ++h) {
        int64_t g = h / (heads / groups);
        double a = -std::exp(double(alog.f32()[h]));
        std::vector<double> dt(seq);
        for (int64_t t = 0; t < seq; ++t)
          dt[t] = std::max(std::log1p(std::exp(pr[t][inner + conv + h] +
                                               double(dtb.f32()[h]))),
                           1e-3);
        for (int64_t t = 0; t < seq; ++t)
          for (int64_t s = 0; s <= t; ++s) {
            double cb_ = 0, decay = 0;
            for (int64_t n = 0; n < state; ++n)
              cb_ += xbc[t][inner + groups * state + g * state + n] *
                     xbc[s][inner + g * state + n];
            for (int64_t r = s + 1; r <= t; ++r)
              decay += dt[r];
            double coef = cb_ * std::exp(a * decay) * dt[s];
            for (int64_t i = 0; i < headDim; ++i)
              y[t][h * headDim + i] += coef * xbc[s][h * headDim + i];
          }
        for (int64_t t = 0; t < seq; ++t)
          for (int64_t i = 0; i < headDim; ++i)
            y[t][h * headDim + i] += dd.f32()[h] * xbc[t][h * headDim + i];
      }
      for (int64_t t = 0; t < seq; ++t) {
        int64_t gs = inner / groups;
        for (int64_t i = 0; i < inner; ++i)
          y[t][i] *= pr[t][i] / (1 + std::exp(-pr[t][i]));
        for (int64_t g = 0; g < groups; ++g) {
          double ms = 0;
          for (int64_t i = 0; i < gs; ++i)
            ms += y[t][g * gs + i] * y[t][g * gs + i] / gs;
          for (int64_t i = 0; i < gs; ++i)
            y[t][g * gs + i] *= nw.f32()[g * gs + i] / std::sqrt(ms + 1e-5);
        }
        for (int64_t o = 0; o < hidden; ++o) {
          double acc = 0;
          for (int64_t i = 0; i < inner; ++i)
            acc += y[t][i] * outW.f32()[o * inner + i];
          want[(b * seq + t) * hidden + o] = acc;
        }
      }
    }
    expectClose(got, want, 2e-4);
  }
}

// A tensor that cannot fit is an error naming its shape, before anything
// is allocated.
TEST(Tensors, AllocationBeyondMemoryIsAnError) {
  EXPECT_EXIT(Tensor::uninitialized(DType::F32, {1 << 20, 1 << 20, 1 << 10}),
              testing::ExitedWithCode(1),
              "a tensor of shape .* does not fit in this machine's [0-9]+ "
              "bytes of memory");
}

TEST(Tensors, HalfAndBf16RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f,
                  std::ldexp(5.0f, -24) /* subnormal */}) {
    EXPECT_EQ(halfToFloat(floatToHalf(f)), f) << f;
  }
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.0f)), 1.0f);
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  // Round to nearest even: 1 + 2^-8 is halfway between bf16 neighbours.
  EXPECT_EQ(floatToBf16(1.00390625f), 0x3f80);
  Tensor t = randomTensor({5}, 17);
  Tensor back = t.to(DType::BF16).to(DType::F32);
  for (int i = 0; i < 5; ++i)
    EXPECT_NEAR(back.f32()[i], t.f32()[i], 1e-2);
  // Whole-tensor conversions (the vectorized bf16 loops) round as the
  // scalar functions do, ties, infinities and NaNs included.
  std::vector<float> special = {1.00390625f,
                                1.01171875f,
                                -3.0e38f,
                                std::numeric_limits<float>::infinity(),
                                std::numeric_limits<float>::quiet_NaN(),
                                std::ldexp(1.0f, -130)};
  Tensor many = randomTensor({1 << 17}, 18, -1e3, 1e3);
  std::copy(special.begin(), special.end(), many.f32());
  Tensor narrow = many.to(DType::BF16), wide = narrow.to(DType::F32);
  const auto *bits = static_cast<const uint16_t *>(narrow.raw());
  int wrong = 0;
  for (int64_t i = 0; i < many.numel(); ++i) {
    wrong += bits[i] != floatToBf16(many.f32()[i]);
    float w = wide.f32()[i], b = bf16ToFloat(bits[i]);
    wrong += !(w == b || (std::isnan(w) && std::isnan(b)));
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_TRUE(std::isnan(wide.f32()[4]));
}

TEST(Tensors, SequencePaddingForSequenceParallelism) {
  // Two rows of 5 ids padded to a multiple of 4: zeros on the right.
  Tensor ids(DType::I64, {2, 5});
  for (int64_t i = 0; i < 10; ++i)
    ids.i64()[i] = i + 1;
  Tensor padded = padSequence(ids, 4);
  ASSERT_EQ(padded.shape(), (std::vector<int64_t>{2, 8}));
  const int64_t want[16] = {1, 2, 3, 4, 5, 0, 0, 0, 6, 7, 8, 9, 10, 0, 0, 0};
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(padded.i64()[i], want[i]) << i;
  // A multiple already: the same tensor.
  EXPECT_EQ(padSequence(padded, 4).raw(), padded.raw());
  // Logits [2, 8, 3] back to the 5 real positions of each row.
  Tensor logits(DType::F32, {2, 8, 3});
  for (int64_t i = 0; i < logits.numel(); ++i)
    logits.f32()[i] = static_cast<float>(i);
  Tensor real = truncateSequence(logits, 5);
  ASSERT_EQ(real.shape(), (std::vector<int64_t>{2, 5, 3}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t p = 0; p < 5; ++p)
      for (int64_t v = 0; v < 3; ++v)
        EXPECT_EQ(real.f32()[(b * 5 + p) * 3 + v],
                  static_cast<float>((b * 8 + p) * 3 + v));
}

TEST(Io, NpyRoundTripAndParamLoading) {
  char dir[] = "/tmp/tprt-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string base(dir);
  Tensor t = randomTensor({2, 3, 4}, 18);
  writeNpy(base + "/t.npy", t);
  Tensor r = readNpy(base + "/t.npy");
  EXPECT_EQ(r.shape(), t.shape());
  for (int i = 0; i < 24; ++i)
    EXPECT_EQ(r.f32()[i], t.f32()[i]);

  // A parameter stored transposed at an offset: [3, 2] on disk, [2, 3]
  // canonical.
  float stored[6] = {1, 2, 3, 4, 5, 6};
  FILE *f = std::fopen((base + "/w.bin").c_str(), "wb");
  std::fwrite("PAD!", 1, 4, f);
  std::fwrite(stored, 4, 6, f);
  std::fclose(f);
  Context c(0, 1, base + "/model.onnx", "model.onnx");
  Tensor w = load_param(c, "a.weight", "w", "w.bin", 4, 24, DType::F32, {2, 3},
                        true, -1, 1, 1, {}, {}, DType::F32, 0.0, false);
  float want[6] = {1, 3, 5, 2, 4, 6};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(w.f32()[i], want[i]);
  // Read once: the same FQN again is the cached tensor.
  Tensor again =
      load_param(c, "a.weight", "w", "w.bin", 4, 24, DType::F32, {2, 3}, true,
                 -1, 1, 1, {}, {}, DType::F32, 0.0, false);
  EXPECT_EQ(again.raw(), w.raw());
  EXPECT_EXIT(
      load_param(c, "short.weight", "w", "w.bin", 8, 24, DType::F32, {2, 3},
                 true, -1, 1, 1, {}, {}, DType::F32, 0.0, false),
      testing::ExitedWithCode(1),
      "parameter 'short.weight' \\(initializer 'w'\\): '.*w.bin' is too "
      "short \\(28 bytes\\) for bytes \\[8, 32\\)");
  EXPECT_EXIT(load_param(c, "b.weight", "w", "missing.bin", 0, 24, DType::F32,
                         {2, 3}, false, -1, 1, 1, {}, {}, DType::F32, 0.0,
                         false),
              testing::ExitedWithCode(1),
              "parameter 'b.weight' \\(initializer 'w'\\): cannot open");
  EXPECT_EXIT(load_param(c, "c.weight", "w", "w.bin", 0, 20, DType::F32, {2, 3},
                         false, -1, 1, 1, {}, {}, DType::F32, 0.0, false),
              testing::ExitedWithCode(1), "20 bytes of f32 cannot hold");

  // A folded Mamba2 A stores -exp(A_log): read back as A_log, and read
  // again so for FP32 master weights; a stored element >= 0 is no -exp.
  float folded[3] = {-std::exp(0.5f), -std::exp(-1.25f), -1.0f};
  f = std::fopen((base + "/a.bin").c_str(), "wb");
  std::fwrite(folded, 4, 3, f);
  std::fclose(f);
  Tensor aLog = load_param(c, "m.A_log", "neg", "a.bin", 0, 12, DType::F32, {3},
                           false, -1, 1, 1, {}, {}, DType::F32, 0.0, true);
  Tensor aLogAgain = readParamF32(c, "m.A_log");
  float logs[3] = {0.5f, -1.25f, 0.0f};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(aLog.f32()[i], logs[i], 1e-6) << i;
    EXPECT_EQ(aLogAgain.f32()[i], aLog.f32()[i]) << i;
  }
  EXPECT_EXIT(load_param(c, "n.A_log", "w", "w.bin", 4, 12, DType::F32, {3},
                         false, -1, 1, 1, {}, {}, DType::F32, 0.0, true),
              testing::ExitedWithCode(1),
              "parameter 'n.A_log': element 0 of its block in '.*w.bin' is "
              "1.000000, not the negative -exp\\(x\\) the export folded");

  // Slices: canonical [2, 3] = {{1, 3, 5}, {2, 4, 6}}, stored transposed.
  // Rows (dim 0) in 2 blocks: block 1 is {2, 4, 6} (a strided run on disk).
  auto block = [](std::vector<int64_t> shape, int dim, int64_t shards, int rank,
                  std::vector<int64_t> starts = {},
                  std::vector<int64_t> sizes = {}) {
    Context::ParamLayout layout;
    layout.shape = std::move(shape);
    layout.shardDim = dim;
    layout.shards = shards;
    layout.starts = std::move(starts);
    layout.sizes = std::move(sizes);
    return paramBlockOf("w", layout, rank);
  };
  Tensor row = readParamBlock(c, "r1", "w", "w.bin", 4, 24, DType::F32, {2, 3},
                              true, block({2, 3}, 0, 2, 1));
  EXPECT_EQ(row.shape(), (std::vector<int64_t>{1, 3}));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(row.f32()[i], float(2 + 2 * i));
  // Columns (dim 1) in 3 blocks: block 2 is {5, 6} (one contiguous run).
  Tensor col = readParamBlock(c, "c2", "w", "w.bin", 4, 24, DType::F32, {2, 3},
                              true, block({2, 3}, 1, 3, 2));
  EXPECT_EQ(col.shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(col.f32()[0], 5.0f);
  EXPECT_EQ(col.f32()[1], 6.0f);
  // Untransposed [3, 2] = {{1, 2}, {3, 4}, {5, 6}}: columns in 2 blocks.
  Tensor plain = readParamBlock(c, "p1", "w", "w.bin", 4, 24, DType::F32,
                                {3, 2}, false, block({3, 2}, 1, 2, 1));
  EXPECT_EQ(plain.shape(), (std::vector<int64_t>{3, 1}));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(plain.f32()[i], float(2 + 2 * i));
  // Uneven: rows [0, 2) and [2, 3) of [3, 2]; rank 1's block is its row
  // and a row of zeros.
  Tensor rows = readParamBlock(c, "u1", "w", "w.bin", 4, 24, DType::F32, {3, 2},
                               false, block({3, 2}, 0, 2, 1, {0, 2}, {2, 1}));
  EXPECT_EQ(rows.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(std::vector<float>(rows.f32(), rows.f32() + 4),
            (std::vector<float>{5, 6, 0, 0}));
  // Uneven columns of the transposed [2, 3]: rank 1 holds column 2 and a
  // column of zeros.
  Tensor cols = readParamBlock(c, "u2", "w", "w.bin", 4, 24, DType::F32, {2, 3},
                               true, block({2, 3}, 1, 2, 1, {0, 2}, {2, 1}));
  EXPECT_EQ(cols.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(std::vector<float>(cols.f32(), cols.f32() + 4),
            (std::vector<float>{5, 0, 6, 0}));
  // Replicated uneven ranges (a KV head on two ranks): both read it.
  Tensor shared =
      readParamBlock(c, "u3", "w", "w.bin", 4, 24, DType::F32, {3, 2}, false,
                     block({3, 2}, 0, 3, 1, {0, 0, 2}, {2, 2, 1}));
  EXPECT_EQ(std::vector<float>(shared.f32(), shared.f32() + 4),
            (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EXIT(block({2, 3}, 1, 2, 0), testing::ExitedWithCode(1),
              "parameter 'w': cannot split dimension 1 of size 3: not into 2 "
              "equal blocks");
  EXPECT_EXIT(block({3, 2}, 0, 2, 1, {0, 2}, {2, 2}),
              testing::ExitedWithCode(1),
              "parameter 'w': cannot split dimension 0 of size 3: rank 1's "
              "range \\[2, 4\\) is outside it");
}

} // namespace

// A fused projection's parts: x[..., offset : offset + size] in x's type,
// and the gradient placing dy back at the offset among zeros.
TEST(Kernels, FeatureSlicesCopyTheirPartAndPlaceItsGradient) {
  Tensor x = randomTensor({2, 3, 7}, 5);
  Tensor part = feature_slice(ctx(), x, 2, 4);
  ASSERT_EQ(part.shape(), (std::vector<int64_t>{2, 3, 4}));
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < 4; ++j)
      ASSERT_EQ(part.f32()[r * 4 + j], x.f32()[r * 7 + 2 + j]);
  Tensor dx = feature_slice_grad(ctx(), part, 2, 7);
  ASSERT_EQ(dx.shape(), x.shape());
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < 7; ++j)
      ASSERT_EQ(dx.f32()[r * 7 + j], j >= 2 && j < 6 ? x.f32()[r * 7 + j] : 0)
          << "row " << r << " feature " << j;
  // bf16 parts are bf16, bit for bit; an empty part is empty.
  Tensor xb = x.to(DType::BF16);
  Tensor pb = feature_slice(ctx(), xb, 5, 2);
  ASSERT_EQ(pb.dtype(), DType::BF16);
  const auto *whole = static_cast<const uint16_t *>(xb.raw());
  const auto *got = static_cast<const uint16_t *>(pb.raw());
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < 2; ++j)
      ASSERT_EQ(got[r * 2 + j], whole[r * 7 + 5 + j]);
  EXPECT_EQ(feature_slice(ctx(), x, 7, 0).shape(),
            (std::vector<int64_t>{2, 3, 0}));
  Tensor none = feature_slice_grad(ctx(), feature_slice(ctx(), x, 3, 0), 3, 7);
  for (int64_t i = 0; i < none.numel(); ++i)
    ASSERT_EQ(none.f32()[i], 0.0f);
}

TEST(KernelsDeathTest, FeatureSlicePastTheRowIsFatal) {
  Tensor x = randomTensor({2, 3, 7}, 5);
  EXPECT_DEATH(feature_slice(ctx(), x, 5, 4),
               "feature_slice: features \\[5, 9\\) of rows of 7");
  EXPECT_DEATH(feature_slice_grad(ctx(), x, 1, 7),
               "feature_slice_grad: features \\[1, 8\\) of rows of 7");
}
