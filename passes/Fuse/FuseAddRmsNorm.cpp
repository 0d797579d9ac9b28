//===- FuseAddRmsNorm.cpp - a residual add and the norm that reads it -----===//
//
// The residual stream's add writes the sum, and the next block's RMS norm
// reads it straight back: two passes over [tokens, hidden] where one that
// reads the addends and writes both the sum and its norm does. The adds a
// projection takes as its epilogue (tp-fuse-epilogues, which runs first)
// cost nothing; this is for the others: after Gemma3's post-norms, a
// sequence-parallel reduce-scatter, an all-reduce other work reads. Only
// an add and a norm of one decoder layer fuse, so that each layer still
// hands the next the residual stream alone (tp-to-emitc's layer loops).
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPFUSEADDRMSNORM
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// Where the fused op can stand: at the norm when every other reader of
/// the sum comes after it, else at the add when the norm's weight is
/// defined before it; null when neither.
Operation *insertionPoint(AddOp add, RmsNormOp norm, DominanceInfo &dominance) {
  bool readBefore = llvm::any_of(add->getUsers(), [&](Operation *user) {
    return user != norm &&
           !dominance.properlyDominates(norm.getOperation(), user);
  });
  if (!readBefore)
    return norm;
  if (dominance.properlyDominates(norm.getWeight(), add))
    return add;
  return nullptr;
}

struct TPFuseAddRmsNorm
    : public tp::impl::TPFuseAddRmsNormBase<TPFuseAddRmsNorm> {
  void runOnOperation() override {
    SmallVector<RmsNormOp> norms;
    getOperation().walk([&](RmsNormOp op) { norms.push_back(op); });
    DominanceInfo dominance(getOperation());
    for (RmsNormOp norm : norms) {
      // A sum two norms read fuses with the first; the second then reads
      // the fused op's sum.
      auto add = norm.getX().getDefiningOp<AddOp>();
      if (!add || norm.getGroupSizeAttr() ||
          add->getBlock() != norm->getBlock() ||
          decoderLayerOf(add) != decoderLayerOf(norm))
        continue;
      Operation *at = insertionPoint(add, norm, dominance);
      if (!at)
        continue;
      OpBuilder b(at);
      Type type = add.getType();
      auto fused = AddRmsNormOp::create(
          b, b.getFusedLoc({add.getLoc(), norm.getLoc()}), type, type,
          add.getLhs(), add.getRhs(), norm.getWeight(), norm.getEpsilonAttr(),
          norm.getWeightOffsetAttr());
      inheritDecoderLayer(norm, fused);
      norm.getResult().replaceAllUsesWith(fused.getNormed());
      add.getResult().replaceAllUsesWith(fused.getSum());
      norm.erase();
      add.erase();
    }
  }
};

} // namespace
