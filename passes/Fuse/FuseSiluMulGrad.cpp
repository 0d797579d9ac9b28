//===- FuseSiluMulGrad.cpp - a gated MLP's backward in one pass -----------===//
//
// The VJPs of tp.mul and tp.silu give a gated MLP's backward as three
// elementwise ops over [tokens, intermediate] tensors: dy * up, dy * silu
// and silu_grad of the first. Each is a pass over memory, and the second
// keeps the forward's SiLU alive until the backward. One op that reads the
// gate, up and dy once and writes both gradients recomputes the sigmoid
// instead (cheaper than a pass over memory). Runs on the rank's program,
// like the other fusions before emission.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPFUSESILUMULGRAD
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// The operand of the binary `mul` that is not `v` (null when neither or
/// both are).
Value otherOperand(MulOp mul, Value v) {
  Value lhs = mul.getLhs(), rhs = mul.getRhs();
  if ((lhs == v) == (rhs == v))
    return {};
  return lhs == v ? rhs : lhs;
}

/// A tp.mul in `block` of `dy` and a tp.silu of `gate`: the product that
/// gives up's gradient.
MulOp siluProduct(Value dy, Value gate, Block *block) {
  for (Operation *user : dy.getUsers()) {
    auto mul = dyn_cast<MulOp>(user);
    if (!mul || mul->getBlock() != block)
      continue;
    auto silu = otherOperand(mul, dy).getDefiningOp<SiluOp>();
    if (silu && silu.getX() == gate)
      return mul;
  }
  return {};
}

struct TPFuseSiluMulGrad
    : public tp::impl::TPFuseSiluMulGradBase<TPFuseSiluMulGrad> {
  void runOnOperation() override {
    SmallVector<SiluGradOp> grads;
    getOperation().walk([&](SiluGradOp op) { grads.push_back(op); });
    DominanceInfo dominance(getOperation());
    for (SiluGradOp grad : grads) {
      Value gate = grad.getX();
      // dsilu = dy * up, read by nothing else.
      auto dsilu = grad.getDy().getDefiningOp<MulOp>();
      if (!dsilu || !dsilu->hasOneUse() ||
          dsilu->getBlock() != grad->getBlock())
        continue;
      // Either operand may be dy (the product commutes).
      for (auto [dy, up] : {std::pair(dsilu.getLhs(), dsilu.getRhs()),
                            std::pair(dsilu.getRhs(), dsilu.getLhs())}) {
        MulOp dup = siluProduct(dy, gate, grad->getBlock());
        if (!dup || up.getType() != gate.getType() ||
            dy.getType() != gate.getType())
          continue;
        // Before the first of the two results' definitions, where the
        // operands must already be defined.
        Operation *first = dup->isBeforeInBlock(grad) ? dup.getOperation()
                                                      : grad.getOperation();
        if (!llvm::all_of(
                std::initializer_list<Value>{gate, up, dy},
                [&](Value v) { return dominance.properlyDominates(v, first); }))
          continue;
        OpBuilder b(first);
        auto fused = SiluMulGradOp::create(b, grad.getLoc(), gate.getType(),
                                           gate.getType(), gate, up, dy);
        inheritDecoderLayer(grad, fused);
        auto silu = otherOperand(dup, dy).getDefiningOp<SiluOp>();
        grad.getResult().replaceAllUsesWith(fused.getDgate());
        dup.getResult().replaceAllUsesWith(fused.getDup());
        grad.erase();
        dsilu.erase();
        dup.erase();
        if (silu->use_empty())
          silu.erase();
        break;
      }
    }
  }
};

} // namespace
