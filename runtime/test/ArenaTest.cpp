//===- ArenaTest.cpp - the activation arena and placed results ------------===//

#include "TestTensors.h"
#include "tprt/tprt.h"

#include "gtest/gtest.h"

#include <cstring>

using namespace tprt;
using tprt::test::ctx;
using tprt::test::randomTensor;

namespace {

/// Two buffers per token: 64 bytes at 0, 16 at 64, in an arena of 128.
const PlannedBuffer kPlan[] = {{0, 64}, {64, 16}};

Tensor ids(int64_t batch, int64_t seq) {
  return Tensor::uninitialized(DType::I64, {batch, seq});
}

const unsigned char *bytes(const Tensor &t) {
  return static_cast<const unsigned char *>(t.raw());
}

TEST(Arena, ResultsGoWhereThePlanSaysPerToken) {
  ActivationArena arena(ctx(), kPlan, 2, 128, ids(2, 3));
  Tensor a = ctx().placed(0, DType::F32, {2, 3, 16});
  Tensor b = ctx().placed(1, DType::F32, {2, 3, 4});
  // Offsets scale with the 6 tokens.
  EXPECT_EQ(bytes(b) - bytes(a), 64 * 6);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw()) % 64, 0u);
  // Each placed tensor is a handle of its own.
  EXPECT_TRUE(a.soleOwner());
  Tensor copy = a;
  EXPECT_FALSE(a.soleOwner());
}

TEST(Arena, LargerResultsAndSlotMinusOneAreAllocatedApart) {
  ActivationArena arena(ctx(), kPlan, 2, 128, ids(2, 3));
  Tensor base = ctx().placed(0, DType::F32, {2, 3, 16});
  // 32 bytes per token do not fit buffer 1's 16.
  Tensor large = ctx().placed(1, DType::F32, {2, 3, 8});
  Tensor anywhere = ctx().placed(-1, DType::F32, {2, 3, 4});
  for (const Tensor *t : {&large, &anywhere})
    EXPECT_TRUE(bytes(*t) + t->bytes() <= bytes(base) ||
                bytes(*t) >= bytes(base) + 128 * 6);
}

TEST(Arena, KernelsWriteTheirResultIntoTheirSlot) {
  Tensor x = randomTensor({2, 3, 8}, 1), w = randomTensor({16, 8}, 2);
  Tensor unplaced = linear(ctx(), x, w, LinearForm::Flat);
  ActivationArena arena(ctx(), kPlan, 2, 128, ids(2, 3));
  Tensor at = ctx().placed(0, DType::F32, {2, 3, 16});
  Tensor y = linear(ctx(), x, w, LinearForm::Flat, 0);
  EXPECT_EQ(y.raw(), at.raw());
  EXPECT_EQ(0, std::memcmp(y.raw(), unplaced.raw(), unplaced.bytes()));
  Tensor small = randomTensor({2, 3, 4}, 3);
  Tensor s = silu(ctx(), small, 1);
  EXPECT_EQ(bytes(s), bytes(at) + 64 * 6);
  Tensor sUnplaced = silu(ctx(), small);
  EXPECT_EQ(0, std::memcmp(s.raw(), sUnplaced.raw(), s.bytes()));
}

TEST(Arena, ACallReusesTheArenaUnlessAResultOfTheLastStillHoldsIt) {
  const unsigned char *first;
  {
    ActivationArena arena(ctx(), kPlan, 2, 128, ids(1, 4));
    first = bytes(ctx().placed(0, DType::F32, {1, 4, 16}));
  }
  Tensor kept;
  {
    ActivationArena arena(ctx(), kPlan, 2, 128, ids(1, 4));
    kept = ctx().placed(0, DType::F32, {1, 4, 16});
    EXPECT_EQ(bytes(kept), first);
    std::memset(kept.raw(), 0x11, kept.bytes());
  }
  {
    ActivationArena arena(ctx(), kPlan, 2, 128, ids(1, 4));
    Tensor next = ctx().placed(0, DType::F32, {1, 4, 16});
    EXPECT_NE(bytes(next), bytes(kept));
    std::memset(next.raw(), 0x22, next.bytes());
  }
  EXPECT_EQ(bytes(kept)[kept.bytes() - 1], 0x11);
}

TEST(Arena, WithoutAnArenaResultsAreAllocated) {
  const unsigned char *inner;
  {
    ActivationArena outer(ctx(), kPlan, 2, 128, ids(1, 2));
    const unsigned char *outerBase = bytes(ctx().placed(0, DType::F32, {2}));
    {
      const PlannedBuffer other[] = {{0, 128}};
      ActivationArena nested(ctx(), other, 1, 128, ids(1, 2));
      inner = bytes(ctx().placed(0, DType::F32, {1, 2, 32}));
      EXPECT_NE(inner, outerBase);
    }
    // The outer plan is back.
    EXPECT_EQ(bytes(ctx().placed(0, DType::F32, {2})), outerBase);
  }
  Tensor after = ctx().placed(0, DType::F32, {1, 2, 32});
  EXPECT_NE(bytes(after), inner);
}

} // namespace
