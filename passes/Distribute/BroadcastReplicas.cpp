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
  using Base::Base;

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
    if (dp < 1) {
      module.emitError("tp-broadcast-replicas: dp must be at least 1, got ")
          << static_cast<int64_t>(dp);
      return signalPassFailure();
    }
    bool tensorParallel = module.lookupSymbol<shard::GridOp>("tp") != nullptr;
    if (!tensorParallel && dp == 1)
      return;

    // The parameters to broadcast, in FQN order (every rank alike): the
    // replicated ones over tp, all over dp.
    struct Param {
      StringRef fqn;
      unsigned index;
      bool overTP;
    };
    SmallVector<Param> params;
    for (unsigned i = 0; i < forward->getNumArguments(); ++i) {
      auto fqn =
          forward->getArgAttrOfType<StringAttr>(i, TPDialect::kFqnAttrName);
      if (!fqn)
        continue;
      auto placement = forward->getArgAttrOfType<PlacementAttr>(
          i, TPDialect::kPlacementAttrName);
      // A parameter the plan excludes is each rank's own.
      bool excluded =
          forward->getArgAttr(i, TPDialect::kExcludeAttrName) != nullptr;
      bool overTP =
          tensorParallel && !(placement && placement.isSplit()) && !excluded;
      if (overTP || dp > 1)
        params.push_back({fqn.getValue(), i, overTP});
    }
    llvm::sort(params,
               [](const Param &a, const Param &b) { return a.fqn < b.fqn; });

    OpBuilder builder(module.getContext());
    builder.setInsertionPointToEnd(module.getBody());
    SmallVector<Type> types;
    for (const Param &p : params)
      types.push_back(forward->getArgument(p.index).getType());
    auto init = func::FuncOp::create(builder, forward->getLoc(), "init",
                                     builder.getFunctionType(types, {}));
    init->setAttr(TPDialect::kEntryAttrName, builder.getStringAttr(kInitEntry));
    Block *body = init.addEntryBlock();
    builder.setInsertionPointToStart(body);
    for (auto [index, p] : llvm::enumerate(params)) {
      init.setArgAttrs(index, forward->getArgAttrDict(p.index));
      for (StringRef group : {"tp", "dp"})
        if (group == "tp" ? p.overTP : dp > 1)
          BroadcastReplicaOp::create(
              builder, init.getLoc(), body->getArgument(index),
              builder.getStringAttr(p.fqn), builder.getStringAttr(group));
    }
    func::ReturnOp::create(builder, init.getLoc());
  }
};

} // namespace
