//===- FuseEpilogues.cpp - elementwise successors into the product --------===//
//
// A projection's output that only a residual add, or only the SiLU and the
// product of a gated MLP, reads is written by the GEMM and read straight
// back. Fusing the elementwise ops into the product's epilogue (oneDNN's
// post-ops) applies them to each output tile while it is in registers. Only
// values nothing else reads fuse, so the training step's backward keeps
// what it reads.
//
// A gated MLP whose gate and up projections are already one product
// (tp-fuse-sibling-linears) becomes one op with the SiLU and the product
// (tp.linear_swiglu), which the runtime computes without the gate, SiLU
// and up tensors in memory.
//
// A row-split projection's add comes after its all-reduce, on every rank:
// a pass over the reduced sum each. Adding the (replicated) residual into
// one rank's partial sum instead (`add_once`) makes the all-reduce's result
// the residual stream itself, so the add is an epilogue on one rank.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPFUSEEPILOGUES
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// The bias-free tp.linear whose result is `v`, when `v` has no other use.
LinearOp soleBiasFreeLinear(Value v) {
  auto linear = v.getDefiningOp<LinearOp>();
  if (!linear || linear.getBias() || !v.hasOneUse())
    return {};
  return linear;
}

/// Replaces `op` (the last elementwise op) by the fused product of `linear`
/// and `other`, then erases the ops it absorbed.
void fuse(Operation *op, LinearOp linear, Value other, Epilogue epilogue,
          Operation *between = nullptr) {
  OpBuilder b(op);
  auto fused = LinearEpilogueOp::create(
      b, linear.getLoc(), op->getResult(0).getType(), linear.getX(),
      linear.getWeight(), other, EpilogueAttr::get(b.getContext(), epilogue),
      linear.getFormAttr());
  inheritDecoderLayer(linear, fused);
  op->getResult(0).replaceAllUsesWith(fused.getResult());
  op->erase();
  if (between)
    between->erase();
  linear.erase();
}

/// `add` of `other` and `sum`, the all-reduce of a bias-free product only
/// it reads: the residual goes into the product on the first rank
/// (`add_once`) and the all-reduce's result replaces the add. `other` must
/// exist where the product is computed.
bool fuseBeforeReduction(AddOp add, Value sum, Value other,
                         DominanceInfo &dominance) {
  auto reduce = sum.getDefiningOp<shard::AllReduceOp>();
  if (!reduce || !sum.hasOneUse() ||
      reduce.getReduction() != shard::ReductionKind::Sum ||
      reduce.getInput().getType() != add.getType())
    return false;
  LinearOp linear = soleBiasFreeLinear(reduce.getInput());
  if (!linear || !dominance.properlyDominates(other, linear))
    return false;
  OpBuilder b(linear);
  auto fused = LinearEpilogueOp::create(
      b, linear.getLoc(), linear.getType(), linear.getX(), linear.getWeight(),
      other, EpilogueAttr::get(b.getContext(), Epilogue::AddOnce),
      linear.getFormAttr());
  inheritDecoderLayer(linear, fused);
  reduce.getInputMutable().assign(fused.getResult());
  linear.erase();
  add.getResult().replaceAllUsesWith(sum);
  add.erase();
  return true;
}

/// `mul` of `product` = silu(s#i) and `other` = s#(1-i), for a
/// tp.linear_siblings `s` of two weights whose results only these read:
/// one tp.linear_swiglu.
bool fuseSwiglu(MulOp mul, Value product, Value other) {
  auto silu = product.getDefiningOp<SiluOp>();
  if (!silu || !product.hasOneUse())
    return false;
  auto siblings = silu.getX().getDefiningOp<LinearSiblingsOp>();
  if (!siblings || siblings.getNumResults() != 2 ||
      other.getDefiningOp() != siblings || other == silu.getX() ||
      !silu.getX().hasOneUse() || !other.hasOneUse())
    return false;
  unsigned gate = cast<OpResult>(silu.getX()).getResultNumber();
  OpBuilder b(mul);
  auto fused = LinearSwigluOp::create(
      b, siblings.getLoc(), mul.getType(), siblings.getX(),
      siblings.getWeights()[gate], siblings.getWeights()[1 - gate],
      siblings.getFormAttr());
  inheritDecoderLayer(siblings, fused);
  mul.getResult().replaceAllUsesWith(fused.getResult());
  mul.erase();
  silu.erase();
  siblings.erase();
  return true;
}

struct TPFuseEpilogues : public tp::impl::TPFuseEpiloguesBase<TPFuseEpilogues> {
  void runOnOperation() override {
    DominanceInfo &dominance = getAnalysis<DominanceInfo>();
    SmallVector<Operation *> candidates;
    getOperation().walk([&](Operation *op) {
      if (isa<AddOp, MulOp>(op))
        candidates.push_back(op);
    });
    for (Operation *op : candidates) {
      Value lhs = op->getOperand(0), rhs = op->getOperand(1);
      // Either operand may be the product (both ops commute).
      for (auto [product, other] : {std::pair(lhs, rhs), std::pair(rhs, lhs)}) {
        if (auto add = dyn_cast<AddOp>(op)) {
          if (LinearOp linear = soleBiasFreeLinear(product)) {
            fuse(op, linear, other, Epilogue::Add);
            break;
          }
          if (fuseBeforeReduction(add, product, other, dominance))
            break;
          continue;
        }
        if (fuseSwiglu(cast<MulOp>(op), product, other))
          break;
        auto silu = product.getDefiningOp<SiluOp>();
        if (!silu || !product.hasOneUse())
          continue;
        if (LinearOp linear = soleBiasFreeLinear(silu.getX())) {
          fuse(op, linear, other, Epilogue::SiluMul, silu);
          break;
        }
      }
    }
  }
};

} // namespace
