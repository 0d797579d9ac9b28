//===- ProbeTensorTest.cpp - the probe evaluator, operator by operator ----===//
//
// Each ONNX operator the probe evaluates, on small inputs with hand-derived
// results (the numpy / ONNX reference semantics), and the errors that keep
// malformed side computations from reading out of bounds.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Probe/ProbeTensor.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "gtest/gtest.h"

using namespace mlir;
using namespace mlir::tp;

namespace {

class ProbeTensorTest : public ::testing::Test {
protected:
  ProbeTensor floats(ArrayRef<int64_t> shape, std::vector<double> data) {
    ProbeTensor t;
    t.shape.assign(shape.begin(), shape.end());
    t.data = std::move(data);
    return t;
  }
  ProbeTensor ints(ArrayRef<int64_t> shape, std::vector<double> data) {
    return ProbeTensor::ints(shape, std::move(data));
  }
  DictionaryAttr attrs(ArrayRef<NamedAttribute> list = {}) {
    return DictionaryAttr::get(&ctx, list);
  }
  NamedAttribute intAttr(StringRef name, int64_t v) {
    return b.getNamedAttr(name, b.getI64IntegerAttr(v));
  }
  NamedAttribute intsAttr(StringRef name, ArrayRef<int64_t> v) {
    return b.getNamedAttr(name, b.getDenseI64ArrayAttr(v));
  }
  /// The first result; fails the test on an error.
  ProbeTensor eval(StringRef op, ArrayRef<std::optional<ProbeTensor>> in,
                   DictionaryAttr a = {}) {
    llvm::Expected<std::vector<ProbeTensor>> r =
        evaluateOnnxOp(op, a ? a : attrs(), in);
    if (!r) {
      ADD_FAILURE() << op.str() << ": " << llvm::toString(r.takeError());
      return {};
    }
    return r->front();
  }
  std::string error(StringRef op, ArrayRef<std::optional<ProbeTensor>> in,
                    DictionaryAttr a = {}) {
    llvm::Expected<std::vector<ProbeTensor>> r =
        evaluateOnnxOp(op, a ? a : attrs(), in);
    if (r)
      return "";
    return llvm::toString(r.takeError());
  }

  MLIRContext ctx;
  Builder b{&ctx};
};

TEST_F(ProbeTensorTest, GatherTakesRowsAndNegativeIndices) {
  ProbeTensor r = eval(
      "Gather", {floats({3, 2}, {0, 1, 10, 11, 20, 21}), ints({2}, {2, -3})});
  EXPECT_EQ(r.shape, (SmallVector<int64_t>{2, 2}));
  EXPECT_EQ(r.data, (std::vector<double>{20, 21, 0, 1}));
  EXPECT_NE(error("Gather", {floats({3}, {0, 1, 2}), ints({1}, {3})})
                .find("out of range"),
            std::string::npos);
}

TEST_F(ProbeTensorTest, RangeAndItsScalars) {
  ProbeTensor r = eval("Range", {ints({}, {1}), ints({}, {7}), ints({}, {2})});
  EXPECT_EQ(r.data, (std::vector<double>{1, 3, 5}));
  // An empty start tensor is an error, not a read past its end.
  EXPECT_NE(error("Range", {ints({0}, {}), ints({}, {7}), ints({}, {1})})
                .find("scalar"),
            std::string::npos);
}

TEST_F(ProbeTensorTest, ConcatChecksTheOtherDimensions) {
  ProbeTensor r =
      eval("Concat", {floats({1, 2}, {1, 2}), floats({2, 2}, {3, 4, 5, 6})},
           attrs({intAttr("axis", 0)}));
  EXPECT_EQ(r.shape, (SmallVector<int64_t>{3, 2}));
  EXPECT_EQ(r.data, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_NE(error("Concat", {floats({1, 2}, {1, 2}), floats({1, 3}, {3, 4, 5})},
                  attrs({intAttr("axis", 0)}))
                .find("differ outside"),
            std::string::npos);
}

TEST_F(ProbeTensorTest, SliceWithNegativeStep) {
  // x[3:0:-2] of [0, 1, 2, 3, 4] = [3, 1].
  ProbeTensor r =
      eval("Slice", {floats({5}, {0, 1, 2, 3, 4}), ints({1}, {3}),
                     ints({1}, {0}), ints({1}, {0}), ints({1}, {-2})});
  EXPECT_EQ(r.data, (std::vector<double>{3, 1}));
}

TEST_F(ProbeTensorTest, TriluKeepsTheUpperTriangle) {
  ProbeTensor r = eval("Trilu", {floats({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(r.data, (std::vector<double>{1, 2, 3, 0, 5, 6}));
  r = eval("Trilu", {floats({2, 3}, {1, 2, 3, 4, 5, 6}), ints({}, {1})},
           attrs({intAttr("upper", 0)}));
  EXPECT_EQ(r.data, (std::vector<double>{1, 2, 0, 4, 5, 6}));
}

TEST_F(ProbeTensorTest, MatMulBroadcastsBatches) {
  // [2, 1, 2] x [2, 1]: each batch row dotted with [1, 10].
  ProbeTensor r = eval(
      "MatMul", {floats({2, 1, 2}, {1, 2, 3, 4}), floats({2, 1}, {1, 10})});
  EXPECT_EQ(r.shape, (SmallVector<int64_t>{2, 1, 1}));
  EXPECT_EQ(r.data, (std::vector<double>{21, 43}));
}

TEST_F(ProbeTensorTest, ReduceMeanWithoutKeepdims) {
  ProbeTensor r = eval("ReduceMean", {floats({2, 2}, {1, 2, 3, 5})},
                       attrs({intsAttr("axes", {1}), intAttr("keepdims", 0)}));
  EXPECT_EQ(r.shape, (SmallVector<int64_t>{2}));
  EXPECT_EQ(r.data, (std::vector<double>{1.5, 4}));
}

TEST_F(ProbeTensorTest, ElementwiseTables) {
  // Integer Div truncates toward zero; float Div does not.
  EXPECT_EQ(eval("Div", {ints({2}, {7, -7}), ints({}, {2})}).data,
            (std::vector<double>{3, -3}));
  EXPECT_EQ(eval("Div", {floats({1}, {7}), floats({}, {2})}).data,
            (std::vector<double>{3.5}));
  ProbeTensor less = eval("Less", {ints({3}, {0, 1, 2}), ints({}, {1})});
  EXPECT_EQ(less.kind, ProbeTensor::Kind::Bool);
  EXPECT_EQ(less.data, (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(
      eval("Where", {ints({2}, {1, 0}), floats({2}, {1, 2}), floats({}, {-9})})
          .data,
      (std::vector<double>{1, -9}));
  EXPECT_EQ(eval("Neg", {floats({2}, {1, -2})}).data,
            (std::vector<double>{-1, 2}));
  EXPECT_NE(error("Softmax", {floats({1}, {1})}).find("cannot be evaluated"),
            std::string::npos);
}

TEST_F(ProbeTensorTest, ShapeAndUnsqueeze) {
  ProbeTensor s = eval("Shape", {floats({2, 3, 4}, std::vector<double>(24))},
                       attrs({intAttr("start", 1)}));
  EXPECT_EQ(s.data, (std::vector<double>{3, 4}));
  ProbeTensor u = eval("Unsqueeze", {floats({2}, {1, 2}), ints({1}, {-1})});
  EXPECT_EQ(u.shape, (SmallVector<int64_t>{2, 1}));
}

TEST_F(ProbeTensorTest, CumSumChecksItsAxis) {
  EXPECT_EQ(eval("CumSum", {ints({3}, {1, 2, 3}), ints({}, {0})}).data,
            (std::vector<double>{1, 3, 6}));
  EXPECT_NE(error("CumSum", {ints({3}, {1, 2, 3}), ints({}, {4})})
                .find("out of range"),
            std::string::npos);
}

} // namespace

namespace {

TEST_F(ProbeTensorTest, ReadsStayInsideTheTensor) {
  ProbeTensor t = floats({2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(t.at({1, 2}), 5.0);
  // Broadcast along a unit dimension, but not past a real one.
  EXPECT_EQ(floats({1, 3}, {7, 8, 9}).at({5, 1}), 8.0);
  EXPECT_EQ(t.at({2, 0}), std::nullopt);
  EXPECT_EQ(t.at({0}), std::nullopt);
  EXPECT_TRUE(std::isnan(ProbeTensor().scalar()));
}

TEST_F(ProbeTensorTest, SizesDoNotWrap) {
  // 2^40 x 2^40 elements: refused, not wrapped to a small allocation.
  EXPECT_NE(error("Expand", {floats({1}, {1}),
                             ints({2}, {1099511627776.0, 1099511627776.0})})
                .find("too large"),
            std::string::npos);
  EXPECT_NE(error("Reshape", {floats({1}, {1}),
                              ints({3}, {1099511627776.0, 1099511627776.0,
                                         1099511627776.0})})
                .find("overflowing"),
            std::string::npos);
}

} // namespace

namespace {

TEST_F(ProbeTensorTest, AttributesAreCheckedBeforeIndexing) {
  EXPECT_NE(error("Transpose", {floats({2, 3}, {0, 1, 2, 3, 4, 5})},
                  attrs({intsAttr("perm", {0, 7})}))
                .find("not a permutation"),
            std::string::npos);
  EXPECT_NE(error("Transpose", {floats({2, 3}, {0, 1, 2, 3, 4, 5})},
                  attrs({intsAttr("perm", {1, 1})}))
                .find("not a permutation"),
            std::string::npos);
  EXPECT_NE(
      error("ReduceSum", {floats({2}, {1, 2})}, attrs({intsAttr("axes", {5})}))
          .find("axis out of range"),
      std::string::npos);
  EXPECT_NE(
      error("Range", {floats({}, {0}), floats({}, {INFINITY}), floats({}, {1})})
          .find("non-finite"),
      std::string::npos);
}

} // namespace
