//===- TPUtils.h - small helpers shared by tp passes ------------*- C++ -*-===//

#ifndef TPOPT_DIALECT_TP_TPUTILS_H
#define TPOPT_DIALECT_TP_TPUTILS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringMap.h"
#include <cstdint>
#include <optional>

namespace mlir::tp {

/// Size in bytes of one stored element of `type` (an integer or float; i1 is
/// stored as one byte), or nullopt for index and non-scalar types.
std::optional<uint64_t> getElementByteSize(Type type);

/// Size in bytes of a statically shaped tensor, or nullopt when the shape is
/// dynamic, the element size is unknown, or the size overflows 64 bits.
std::optional<uint64_t> getTensorByteSize(RankedTensorType type);

/// The roles of a program's entry points (`tp.entry`).
inline constexpr llvm::StringLiteral kForwardEntry = "forward";
/// Forward, loss and backward of one micro-batch (tp-build-train-step).
inline constexpr llvm::StringLiteral kTrainStepEntry = "train_step";
/// The optimizer boundary and update, once per optimizer step.
inline constexpr llvm::StringLiteral kOptimizerStepEntry = "optimizer_step";
/// Once before the first step (tp-broadcast-replicas).
inline constexpr llvm::StringLiteral kInitEntry = "init";

/// Whether `role` is a role an entry point can have.
bool isEntryRole(StringRef role);

/// The function of `module` whose `tp.entry` is `role`. IR written by hand
/// may leave entry points unmarked: when no function of the module is
/// marked, the function named after the role is it. Null when there is
/// none; failure (an error on the module) when two are marked alike.
FailureOr<FunctionOpInterface> lookupEntry(ModuleOp module, StringRef role);

/// The ranks along the one-dimensional grid `name` (shard.grid @tp, @dp of
/// a training program with data parallelism), 1 without it.
int64_t gridSize(ModuleOp module, StringRef name);

/// Whether `op`'s result is an output of its function: returned, or
/// returned after elementwise soft-capping or scaling only (Gemma's
/// final_logit_softcapping after lm_head).
bool reachesReturn(Operation *op);

/// The decoder layer `op` computes (TPDialect::kLayerAttrName), if any.
std::optional<int64_t> decoderLayerOf(Operation *op);
/// The decoder layer all users of `v` are in, if they are in one.
std::optional<int64_t> decoderLayerOfUsers(Value v);
/// The decoder layer of a value: its producer's, or a block argument's
/// (a parameter's) users'.
std::optional<int64_t> decoderLayerOfValue(Value v);
/// Sets (or, with nullopt, removes) the decoder layer of `op`.
void setDecoderLayer(Operation *op, std::optional<int64_t> layer);
/// `to` computes part of what `from` does: the same decoder layer.
inline void inheritDecoderLayer(Operation *from, Operation *to) {
  setDecoderLayer(to, decoderLayerOf(from));
}

/// Gives every op a builder inserts the decoder layer `layer`, when set:
/// the ops made from one op (raising's for a node, autodiff's for an op).
struct DecoderLayerListener : public OpBuilder::Listener {
  std::optional<int64_t> layer;
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (layer)
      setDecoderLayer(op, layer);
  }
};

/// The parameters (arguments with a `tp.fqn`) of `func` by FQN.
llvm::StringMap<BlockArgument> argumentsByFqn(FunctionOpInterface func);

/// The `role` entry point as a FuncOpT; when there is none, failure with
/// `missing` as the error on the module (what the caller needs it for).
template <typename FuncOpT>
FailureOr<FuncOpT> requireEntry(ModuleOp module, StringRef role,
                                const Twine &missing) {
  FailureOr<FunctionOpInterface> entry = lookupEntry(module, role);
  if (failed(entry))
    return failure();
  if (auto func = dyn_cast_or_null<FuncOpT>(entry->getOperation()))
    return func;
  return module.emitError(missing);
}

} // namespace mlir::tp

#endif // TPOPT_DIALECT_TP_TPUTILS_H
