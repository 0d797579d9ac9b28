//===- ComputeType.cpp - the float type a program computes in -------------===//
//
// PyTorch runs a model in its parameters' type and every op rounds its output
// to it; tp-opt makes that choice once, in the IR: activations get the
// compute type, parameters the type they are held in, and a parameter whose
// bytes are of another type says so on its #tp.source (loading converts).
// The kernels then read from their operands what to do, so no later pass
// needs to know.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPCOMPUTETYPE
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// A float tensor type, or null.
RankedTensorType floatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType()) ? tensor : nullptr;
}

/// Gives parameter `arg` the element type `held` (and the sharding
/// annotations of it, which are of its type), recording its stored type on
/// its source when the two differ.
void setHeldType(func::FuncOp func, BlockArgument arg, Type held) {
  auto source = func.getArgAttrOfType<SourceAttr>(arg.getArgNumber(),
                                                  TPDialect::kSourceAttrName);
  auto tensor = cast<RankedTensorType>(arg.getType());
  Type stored =
      source.getStoredType() ? source.getStoredType() : tensor.getElementType();
  SmallVector<Value> values = {arg};
  while (!values.empty()) {
    Value value = values.pop_back_val();
    value.setType(cast<RankedTensorType>(value.getType()).clone(held));
    for (Operation *user : value.getUsers())
      if (auto annotation = dyn_cast<shard::ShardOp>(user))
        values.push_back(annotation.getResult());
  }
  func.setArgAttr(
      arg.getArgNumber(), TPDialect::kSourceAttrName,
      SourceAttr::get(func.getContext(), source.getInitializer(),
                      source.getFile(), source.getOffset(), source.getLength(),
                      source.getTransposed(), held == stored ? Type() : stored,
                      source.getStoredOffset(), source.getStoredForm()));
}

/// Whether every op that reads `value` (through sharding annotations)
/// verifies with its present type; the verifiers' diagnostics are dropped.
bool readersAccept(Value value) {
  ScopedDiagnosticHandler quiet(value.getContext(),
                                [](Diagnostic &) { return success(); });
  SmallVector<Value> values = {value};
  while (!values.empty()) {
    Value v = values.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (auto annotation = dyn_cast<shard::ShardOp>(user)) {
        values.push_back(annotation.getResult());
        continue;
      }
      if (failed(verify(user, /*verifyRecursively=*/false)))
        return false;
    }
  }
  return true;
}

struct TPComputeTypePass
    : public tp::impl::TPComputeTypeBase<TPComputeTypePass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Type requested = llvm::StringSwitch<Type>(type)
                         .Case("f32", Float32Type::get(ctx))
                         .Case("bf16", BFloat16Type::get(ctx))
                         .Case("f16", Float16Type::get(ctx))
                         .Default(Type());
    if (!requested && type != "auto") {
      getOperation().emitError()
          << "tp-compute-type: type must be auto, f32, bf16 or f16, got '"
          << type << "'";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(convert(func, requested)))
        return signalPassFailure();
  }

  LogicalResult convert(func::FuncOp func, Type requested) {
    // Parameter bytes by stored type, in first-seen order (ties go to the
    // first).
    llvm::MapVector<Type, uint64_t> storedBytes;
    auto sourceOf = [&](unsigned i) {
      return func.getArgAttrOfType<SourceAttr>(i, TPDialect::kSourceAttrName);
    };
    for (BlockArgument arg : func.getArguments()) {
      SourceAttr source = sourceOf(arg.getArgNumber());
      RankedTensorType tensor = floatTensor(arg.getType());
      if (!source || !tensor)
        continue;
      Type stored = source.getStoredType() ? source.getStoredType()
                                           : tensor.getElementType();
      storedBytes[stored] +=
          tensor.getNumElements() * stored.getIntOrFloatBitWidth() / 8;
    }
    Type target = requested;
    if (!target) {
      // auto: the parameters' type; a function without float parameters
      // keeps its types.
      for (auto [stored, bytes] : storedBytes)
        if (!target || bytes > storedBytes.lookup(target))
          target = stored;
      if (!target)
        return success();
    }
    // Where the checkpoint stores parameters in `target`, wider ones keep
    // their type when the ops that read them accept it (below).
    bool keepWider = storedBytes.count(target);
    SmallVector<BlockArgument> kept;
    for (BlockArgument arg : func.getArguments()) {
      RankedTensorType tensor = floatTensor(arg.getType());
      if (!tensor)
        continue;
      SourceAttr source = sourceOf(arg.getArgNumber());
      if (!source) {
        // An activation handed in (hand-written functions).
        arg.setType(tensor.clone(target));
        continue;
      }
      Type stored = source.getStoredType() ? source.getStoredType()
                                           : tensor.getElementType();
      bool keep = keepWider && stored.getIntOrFloatBitWidth() >
                                   target.getIntOrFloatBitWidth();
      if (keep)
        kept.push_back(arg);
      setHeldType(func, arg, keep ? stored : target);
    }

    WalkResult walk = func.walk([&](Operation *op) {
      if (op == func.getOperation())
        return WalkResult::advance();
      Dialect *dialect = op->getDialect();
      if (!isa<func::ReturnOp>(op) &&
          !isa_and_nonnull<TPDialect, shard::ShardDialect>(dialect)) {
        op->emitError() << "tp-compute-type: " << op->getName()
                        << " is not a tp or shard op: its types cannot be "
                           "changed";
        return WalkResult::interrupt();
      }
      // A sharding annotation is of the value it annotates (a parameter
      // kept in its stored type stays so); every other float result is an
      // activation.
      if (auto annotation = dyn_cast<shard::ShardOp>(op)) {
        annotation.getResult().setType(annotation.getSrc().getType());
        return WalkResult::advance();
      }
      for (OpResult result : op->getResults())
        if (RankedTensorType tensor = floatTensor(result.getType()))
          result.setType(tensor.clone(target));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();

    // A kept parameter whose readers' verifiers refuse its type (an
    // embedding table is of its rows' type) is held in `target` after all.
    for (BlockArgument arg : kept)
      if (!readersAccept(arg))
        setHeldType(func, arg, target);
    Operation *terminator = func.getBody().back().getTerminator();
    func.setType(FunctionType::get(func.getContext(),
                                   func.getBody().getArgumentTypes(),
                                   terminator->getOperandTypes()));
    return success();
  }
};

} // namespace
