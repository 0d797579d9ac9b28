//===- FuseSiblingLinears.cpp - projections of one input as one product ---===//
//
// An attention block's q, k and v projections, and a gated MLP's gate and
// up, read the same input: three (two) GEMMs that each stream it, each
// with its own, narrower output. One GEMM over the weights concatenated
// along their output dimension reads the input once and runs at the rate
// of the wider product. The fusion is local to a rank: on the partitioned
// program each rank concatenates its own blocks of the weights, so the
// plan's split (and every collective) is unchanged.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"
#include "llvm/ADT/MapVector.h"

#include <tuple>

namespace mlir::tp {
#define GEN_PASS_DEF_TPFUSESIBLINGLINEARS
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// What siblings share: the input, the form and the weights' element type
/// (the concatenated weight has one).
using SiblingKey = std::tuple<Value, Attribute, Type>;

/// How `n` siblings split into products: the runtime's forms take two or
/// three weights, so four make two pairs, and a lone one stays a linear.
SmallVector<size_t> chunkSizes(size_t n) {
  SmallVector<size_t> sizes;
  while (n >= 2) {
    size_t take = n == 4 ? 2 : std::min<size_t>(n, 3);
    sizes.push_back(take);
    n -= take;
  }
  return sizes;
}

/// Replaces `linears` (in program order, in one block) by one
/// tp.linear_siblings where the first is; each weight must exist there.
void fuse(ArrayRef<LinearOp> linears, DominanceInfo &dominance) {
  LinearOp first = linears.front();
  for (LinearOp linear : linears.drop_front())
    if (!dominance.properlyDominates(linear.getWeight(), first))
      return;
  SmallVector<Value> weights;
  SmallVector<Type> types;
  for (LinearOp linear : linears) {
    weights.push_back(linear.getWeight());
    types.push_back(linear.getType());
  }
  OpBuilder b(first);
  auto fused = LinearSiblingsOp::create(b, first.getLoc(), types, first.getX(),
                                        weights, first.getFormAttr());
  inheritDecoderLayer(first, fused);
  for (auto [i, linear] : llvm::enumerate(linears)) {
    LinearOp op = linear;
    op.getResult().replaceAllUsesWith(fused.getResult(i));
    op.erase();
  }
}

struct TPFuseSiblingLinears
    : public tp::impl::TPFuseSiblingLinearsBase<TPFuseSiblingLinears> {
  void runOnOperation() override {
    DominanceInfo &dominance = getAnalysis<DominanceInfo>();
    // Per block, bias-free linears by what they share, in program order.
    getOperation().walk([&](Block *block) {
      llvm::MapVector<SiblingKey, SmallVector<LinearOp>> groups;
      for (auto linear : block->getOps<LinearOp>()) {
        if (linear.getBias())
          continue;
        Type weightElement =
            cast<RankedTensorType>(linear.getWeight().getType())
                .getElementType();
        groups[{linear.getX(), linear.getFormAttr(), weightElement}].push_back(
            linear);
      }
      for (auto &[key, linears] : groups) {
        ArrayRef<LinearOp> rest = linears;
        for (size_t size : chunkSizes(linears.size())) {
          fuse(rest.take_front(size), dominance);
          rest = rest.drop_front(size);
        }
      }
    });
  }
};

} // namespace
