//===- TPUtilsTest.cpp - byte sizes used to check parameter sources -------===//

#include "tpopt/Dialect/TP/TPUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

using namespace mlir;

namespace {

TEST(TPUtils, ElementByteSize) {
  MLIRContext ctx;
  Builder b(&ctx);
  EXPECT_EQ(tp::getElementByteSize(b.getF32Type()), 4u);
  EXPECT_EQ(tp::getElementByteSize(b.getBF16Type()), 2u);
  EXPECT_EQ(tp::getElementByteSize(b.getF16Type()), 2u);
  EXPECT_EQ(tp::getElementByteSize(b.getI64Type()), 8u);
  EXPECT_EQ(tp::getElementByteSize(b.getI1Type()), 1u);
  EXPECT_EQ(tp::getElementByteSize(b.getIndexType()), std::nullopt);
}

TEST(TPUtils, TensorByteSize) {
  MLIRContext ctx;
  Builder b(&ctx);
  EXPECT_EQ(
      tp::getTensorByteSize(RankedTensorType::get({128, 64}, b.getBF16Type())),
      128u * 64u * 2u);
  EXPECT_EQ(tp::getTensorByteSize(RankedTensorType::get({}, b.getF32Type())),
            4u);
  EXPECT_EQ(
      tp::getTensorByteSize(RankedTensorType::get({0, 7}, b.getF32Type())), 0u);
  EXPECT_EQ(tp::getTensorByteSize(RankedTensorType::get(
                {ShapedType::kDynamic, 4}, b.getF32Type())),
            std::nullopt);
  // 2^62 elements of 8 bytes overflow 64 bits.
  EXPECT_EQ(tp::getTensorByteSize(RankedTensorType::get(
                {int64_t(1) << 31, int64_t(1) << 31}, b.getI64Type())),
            std::nullopt);
}

} // namespace
