//===- AttentionKernelTest.cpp - which kernel runs attention, on the host -===//
//
// The GPU's choice between cuDNN's fused attention and the tiled kernels
// (tprt/AttentionKernel.h) against the limits written out here, and the rule
// by which the rows cuDNN computes for fully masked queries are zeroed
// (attentionSeesKey) against tp.attention's rule, for every query of many
// shapes and masks: no GPU needed. In a CUDA build, cuDNN is opened only by
// the GPU backend.
//
//===----------------------------------------------------------------------===//

#include "tprt/AttentionKernel.h"
#include "common/Attention.h"
#include "tprt/tprt.h"

#ifdef TPRT_WITH_CUDA
#include "TestTensors.h"
#include "cuda/Cudnn.h"
#endif

#include <algorithm>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

using namespace tprt;

namespace {

AttentionProblem llamaTraining() {
  AttentionProblem p;
  p.reducedPrecision = true;
  p.headDim = 64;
  p.sq = p.skv = 2048;
  p.causal = true;
  return p;
}

TEST(AttentionKernel, CudnnTakesBf16CausalAttention) {
  AttentionProblem p = llamaTraining();
  EXPECT_EQ(chooseAttentionKernel(p).kernel, AttentionKernel::CudnnFused);
  p.keyMask = true; // padding, as a bias
  EXPECT_EQ(chooseAttentionKernel(p).kernel, AttentionKernel::CudnnFused);
  p.keyMask = false;
  p.window = 512; // Gemma3's local layers
  EXPECT_EQ(chooseAttentionKernel(p).kernel, AttentionKernel::CudnnFused);
  p.keyMask = true;
  EXPECT_EQ(chooseAttentionKernel(p).kernel, AttentionKernel::CudnnFused);
  p.keyMask = false;
  p.window = 0;
  p.headDim = 256; // Gemma3
  EXPECT_EQ(chooseAttentionKernel(p).kernel, AttentionKernel::CudnnFused);
  p.headDim = 64;
  p.sq = 1; // a query after cached keys, aligned at the last key
  EXPECT_EQ(chooseAttentionKernel(p).kernel, AttentionKernel::CudnnFused);
  p.causal = false;
  p.keyMask = true;
  EXPECT_EQ(chooseAttentionKernel(p).kernel, AttentionKernel::CudnnFused);
}

TEST(AttentionKernel, TheTiledKernelsTakeTheRest) {
  struct Case {
    const char *what;
    void (*edit)(AttentionProblem &);
    const char *reason;
  };
  Case cases[] = {
      {"f32", [](AttentionProblem &p) { p.reducedPrecision = false; },
       "f32 operands"},
      {"softcap", [](AttentionProblem &p) { p.softcap = 50; },
       "soft-capped scores"},
      {"head_dim 72 + 2", [](AttentionProblem &p) { p.headDim = 74; },
       "head_dim"},
      {"head_dim 264", [](AttentionProblem &p) { p.headDim = 264; },
       "head_dim"},
      {"sq > skv", [](AttentionProblem &p) { p.sq = p.skv + 1; },
       "more queries than keys"},
      {"window, not causal",
       [](AttentionProblem &p) {
         p.causal = false;
         p.window = 16;
       },
       "without the causal mask"},
      {"key mask after cached keys",
       [](AttentionProblem &p) {
         p.sq = 4;
         p.keyMask = true;
       },
       "queries after cached keys"},
  };
  for (const Case &c : cases) {
    AttentionProblem p = llamaTraining();
    c.edit(p);
    AttentionKernelChoice choice = chooseAttentionKernel(p);
    EXPECT_EQ(choice.kernel, AttentionKernel::Tiled) << c.what;
    EXPECT_NE(std::string(choice.reason).find(c.reason), std::string::npos)
        << c.what << ": " << choice.reason;
  }
}

/// tp.attention's rule (TPOps.td), written out: a query sees key j when
/// the mask keeps it, it is not in the future (causal) and within the
/// window.
bool seesAKey(int64_t pos, int64_t skv, bool causal, int64_t window,
              const std::vector<int64_t> &mask) {
  for (int64_t j = 0; j < skv; ++j)
    if ((mask.empty() || mask[j] != 0) && (!causal || j <= pos) &&
        (window <= 0 || pos - j < window))
      return true;
  return false;
}

TEST(AttentionKernel, RowsThatSeeNoKey) {
  std::mt19937 random(7);
  int64_t zeroed = 0, rows = 0;
  for (int64_t skv : {1, 5, 33, 70})
    for (int64_t sq : {int64_t(1), skv / 2 + 1, skv})
      for (bool causal : {false, true})
        for (int64_t window : {0, 1, 3, 40})
          for (int form = 0; form < 5; ++form) {
            // No mask, left padding, right padding, random, all masked.
            std::vector<int64_t> mask;
            if (form > 0) {
              mask.assign(skv, 1);
              int64_t pad = skv / 3 + 1;
              for (int64_t j = 0; j < skv; ++j) {
                if (form == 1 && j < pad)
                  mask[j] = 0;
                if (form == 2 && j >= skv - pad)
                  mask[j] = 0;
                if (form == 3)
                  mask[j] = random() % 3 == 0 ? 0 : 1;
                if (form == 4)
                  mask[j] = 0;
              }
            }
            for (int64_t row = 0; row < sq; ++row) {
              int64_t pos = row + skv - sq;
              bool expected = seesAKey(pos, skv, causal, window, mask);
              EXPECT_EQ(attentionSeesKey(pos, skv, causal, window,
                                         mask.empty() ? nullptr : mask.data()),
                        expected)
                  << "query " << row << " of " << sq << ", skv " << skv
                  << ", causal " << causal << ", window " << window
                  << ", mask form " << form;
              zeroed += !expected;
              ++rows;
            }
          }
  // Both kinds of rows occur.
  EXPECT_GT(zeroed, 0);
  EXPECT_LT(zeroed, rows);
}

TEST(AttentionKernel, AnInputMaskThatKeepsEveryKeyIsNone) {
  Tensor ones(DType::I64, {2, 3}), padded(DType::I64, {2, 3});
  for (int64_t i = 0; i < 6; ++i) {
    ones.i64()[i] = 1 + i; // non-zero keeps
    padded.i64()[i] = i != 3;
  }
  EXPECT_TRUE(keepsEveryKey(ones));
  EXPECT_FALSE(keepsEveryKey(padded));
  EXPECT_FALSE(keepsEveryKey(Tensor()));
  Context ctx(0, 1, "/nonexistent/model.onnx", "model.onnx");
  EXPECT_FALSE(ctx.keyMaskKeepsAll(ones));
  ctx.setKeyMaskKeepsAll(ones);
  EXPECT_TRUE(ctx.keyMaskKeepsAll(ones));
  // Another tensor with the same elements is not known to be it; nor is an
  // undefined one.
  Tensor copy(DType::I64, {2, 3});
  std::copy_n(ones.i64(), 6, copy.i64());
  EXPECT_FALSE(ctx.keyMaskKeepsAll(copy));
  EXPECT_FALSE(ctx.keyMaskKeepsAll(Tensor()));
  EXPECT_FALSE(ctx.keyMaskKeepsAll(padded));
}

#ifdef TPRT_WITH_CUDA
bool mapsCudnn() { return tprt::test::mapsLibrary("libcudnn"); }

TEST(AttentionKernel, OnlyTheGpuBackendOpensCudnn) {
  using namespace tprt::test;
  Tensor q = randomTensor({1, 4, 16}, 1), k = randomTensor({1, 4, 16}, 2);
  Tensor out =
      attention(ctx(), q.to(DType::BF16), k.to(DType::BF16), k.to(DType::BF16),
                Tensor(), 2, 2, 8, 0.35, true, 0, 0, -1);
  ASSERT_EQ(out.shape(), q.shape());
  EXPECT_FALSE(mapsCudnn()) << "a CPU program mapped libcudnn";
  // Without a GPU cuDNN opens but makes no handle: unavailable, with the
  // reason (then the tiled kernels run).
  std::string why;
  bool available = cuda::cudnnAvailable(why);
  EXPECT_TRUE(available || !why.empty());
  // Opened unless this build has no frontend or the library is not here.
  if (why.find("built without") == std::string::npos &&
      why.find("cannot open") == std::string::npos) {
    EXPECT_TRUE(mapsCudnn()) << why;
  }
}
#endif

} // namespace
