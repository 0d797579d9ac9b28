//===- BroadcastReplicas.cpp - replicas start equal -----------------------===//
//
// Ranks that read a replicated parameter each read their own copy; a file
// changed between two reads, a rank-local perturbation or a bug would let
// the copies differ from the first step on, and synchronized gradients
// would keep them apart. One broadcast per replicated parameter at start-up
// (AutoModel's broadcast_tp_replicas) rules that out.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPBROADCASTREPLICAS
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

struct TPBroadcastReplicasPass
    : public tp::impl::TPBroadcastReplicasBase<TPBroadcastReplicasPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> forward = requireEntry<func::FuncOp>(
        module, kForwardEntry, "tp-broadcast-replicas: no func.func @forward");
    FailureOr<FunctionOpInterface> existing = lookupEntry(module, kInitEntry);
    if (failed(forward) || failed(existing))
      return signalPassFailure();
    if (*existing) {
      existing->emitError("tp-broadcast-replicas: the module already has an "
                          "init function");
      return signalPassFailure();
    }
    if (!module.lookupSymbol<shard::GridOp>("tp"))
      return;

    // The replicated parameters, in FQN order (every rank alike).
    SmallVector<std::pair<StringRef, unsigned>> replicated;
    for (unsigned i = 0; i < forward->getNumArguments(); ++i) {
      auto fqn =
          forward->getArgAttrOfType<StringAttr>(i, TPDialect::kFqnAttrName);
      auto placement = forward->getArgAttrOfType<PlacementAttr>(
          i, TPDialect::kPlacementAttrName);
      if (fqn && !(placement && placement.isSplit()))
        replicated.push_back({fqn.getValue(), i});
    }
    llvm::sort(replicated);

    OpBuilder builder(module.getContext());
    builder.setInsertionPointToEnd(module.getBody());
    SmallVector<Type> types;
    for (auto [fqn, i] : replicated)
      types.push_back(forward->getArgument(i).getType());
    auto init = func::FuncOp::create(builder, forward->getLoc(), "init",
                                     builder.getFunctionType(types, {}));
    init->setAttr(TPDialect::kEntryAttrName, builder.getStringAttr(kInitEntry));
    Block *body = init.addEntryBlock();
    builder.setInsertionPointToStart(body);
    for (auto [index, param] : llvm::enumerate(replicated)) {
      auto [fqn, i] = param;
      init.setArgAttrs(index, forward->getArgAttrDict(i));
      BroadcastReplicaOp::create(builder, init.getLoc(),
                                 body->getArgument(index),
                                 builder.getStringAttr(fqn));
    }
    func::ReturnOp::create(builder, init.getLoc());
  }
};

} // namespace
