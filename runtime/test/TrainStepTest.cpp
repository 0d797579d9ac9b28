//===- TrainStepTest.cpp - a step's gradient buffers, two ways ------------===//
//
// A step whose buffers are zeroed at its start and take every
// micro-batch's gradient by adding (beginTrainStep's zeroBuffers: what a
// step replaying one CUDA graph per micro-batch needs) must leave the
// buffers the step whose first gradient overwrites leaves: the same sums,
// the pending scale of the step before gone.
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"
#include "tprt/Train.h"
#include "tprt/tprt.h"

#include "gtest/gtest.h"

#include <map>
#include <string>

using namespace tprt;
using tprt::test::randomTensor;

namespace {

/// The gradients each micro-batch adds: one of each accumulating call.
void microBatch(Context &ctx, const Tensor &w, const Tensor &table,
                unsigned seed) {
  Tensor x = randomTensor({2, 3, 8}, seed),
         dy = randomTensor({2, 3, 5}, seed + 1);
  accumulate_linear_grad_weight(ctx, dy, x, w, "proj.weight", -1, false);
  accumulate_grad(ctx, randomTensor({8}, seed + 2), randomTensor({8}, 0),
                  "norm.weight", -1, false);
  Tensor ids(DType::I64, {2, 3});
  for (int64_t i = 0; i < ids.numel(); ++i)
    ids.i64()[i] = (seed + i * 3) % table.dim(0);
  accumulate_embedding_grad(ctx, ids, randomTensor({2, 3, 4}, seed + 3), table,
                            "embed.weight", -1, false, false, -1, {}, {});
}

/// Two steps of three micro-batches; with `zeroed`, the second one's
/// buffers zeroed at its start. The buffers after it, by FQN.
std::map<std::string, Context::GradBuffer> twoSteps(bool zeroed) {
  Context ctx(0, 1, "/nonexistent/model.onnx", "model.onnx");
  TrainOptions options;
  TrainState state(options);
  ctx.setTrainState(&state);
  Tensor w = randomTensor({5, 8}, 1), table = randomTensor({7, 4}, 2);
  unsigned seed = 10;
  for (int step = 0; step < 2; ++step) {
    beginTrainStep(ctx, state, /*zeroBuffers=*/zeroed && step > 0);
    for (int k = 0; k < 3; ++k, seed += 10)
      microBatch(ctx, w, table, seed);
    // What the optimizer step leaves pending for the next step's first
    // gradient to clear.
    for (auto &entry : ctx.grads())
      entry.second.pendingScale = 0.25f;
  }
  ctx.setTrainState(nullptr);
  return ctx.grads();
}

TEST(TrainStep, ZeroedBuffersSumWhatAnOverwritingStepSums) {
  std::map<std::string, Context::GradBuffer> overwriting = twoSteps(false),
                                             zeroed = twoSteps(true);
  ASSERT_EQ(overwriting.size(), 3u);
  ASSERT_EQ(zeroed.size(), 3u);
  for (const auto &[fqn, expected] : overwriting) {
    const Context::GradBuffer &got = zeroed.at(fqn);
    ASSERT_EQ(got.grad.shape(), expected.grad.shape()) << fqn;
    for (int64_t i = 0; i < got.grad.numel(); ++i)
      ASSERT_NEAR(got.grad.f32()[i], expected.grad.f32()[i],
                  1e-6f * (1 + std::fabs(expected.grad.f32()[i])))
          << fqn << " element " << i;
    EXPECT_FALSE(got.fresh) << fqn;
    EXPECT_EQ(got.splitDim, expected.splitDim) << fqn;
  }
}

TEST(TrainStep, ZeroedBuffersClearTheStepBeforesPendingScale) {
  Context ctx(0, 1, "/nonexistent/model.onnx", "model.onnx");
  TrainOptions options;
  TrainState state(options);
  ctx.setTrainState(&state);
  Tensor w = randomTensor({5, 8}, 1), table = randomTensor({7, 4}, 2);
  beginTrainStep(ctx, state);
  microBatch(ctx, w, table, 10);
  for (auto &entry : ctx.grads())
    entry.second.pendingScale = 0.25f;
  beginTrainStep(ctx, state, /*zeroBuffers=*/true);
  for (const auto &[fqn, buffer] : ctx.grads()) {
    EXPECT_EQ(buffer.pendingScale, 1.0f) << fqn;
    EXPECT_FALSE(buffer.fresh) << fqn;
    for (int64_t i = 0; i < buffer.grad.numel(); ++i)
      ASSERT_EQ(buffer.grad.f32()[i], 0.0f) << fqn << " element " << i;
  }
  ctx.setTrainState(nullptr);
}

} // namespace
