//===- TPUtils.cpp - small helpers shared by tp passes --------------------===//

#include "tpopt/Dialect/TP/TPUtils.h"

#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

std::optional<uint64_t> mlir::tp::getElementByteSize(Type type) {
  if (!type.isIntOrFloat() || type.isIndex())
    return std::nullopt;
  // Booleans are stored one byte per element (ONNX, numpy).
  if (type.isInteger(1))
    return 1;
  unsigned bits = type.getIntOrFloatBitWidth();
  if (bits % 8 != 0)
    return std::nullopt;
  return bits / 8;
}

std::optional<uint64_t> mlir::tp::getTensorByteSize(RankedTensorType type) {
  if (!type.hasStaticShape())
    return std::nullopt;
  std::optional<uint64_t> size = getElementByteSize(type.getElementType());
  if (!size)
    return std::nullopt;
  uint64_t bytes = *size;
  for (int64_t dim : type.getShape()) {
    bool overflow = false;
    bytes =
        llvm::SaturatingMultiply(bytes, static_cast<uint64_t>(dim), &overflow);
    if (overflow)
      return std::nullopt;
  }
  return bytes;
}

bool mlir::tp::isEntryRole(StringRef role) {
  return role == kForwardEntry || role == kTrainStepEntry ||
         role == kOptimizerStepEntry || role == kInitEntry;
}

FailureOr<FunctionOpInterface> mlir::tp::lookupEntry(ModuleOp module,
                                                     StringRef role) {
  FunctionOpInterface found;
  bool anyMarked = false;
  for (auto func : module.getOps<FunctionOpInterface>()) {
    auto mark = func->getAttrOfType<StringAttr>(TPDialect::kEntryAttrName);
    anyMarked |= static_cast<bool>(mark);
    if (!mark || mark.getValue() != role)
      continue;
    if (found) {
      return module.emitError()
             << "two functions are the '" << role << "' entry point: @"
             << found.getName() << " and @" << func.getName();
    }
    found = func;
  }
  if (found || anyMarked)
    return found;
  return FunctionOpInterface(dyn_cast_or_null<FunctionOpInterface>(
      SymbolTable::lookupSymbolIn(module, role)));
}

bool mlir::tp::reachesReturn(Operation *op) {
  while (op && op->getNumResults() == 1) {
    if (llvm::any_of(op->getUsers(),
                     [](Operation *u) { return isa<func::ReturnOp>(u); }))
      return true;
    // Follow one soft-cap or scale that is the result's only user.
    Value result = op->getResult(0);
    if (!result.hasOneUse())
      return false;
    op = *result.getUsers().begin();
    if (!isa<SoftcapOp, ScaleOp>(op))
      return false;
  }
  return false;
}

std::optional<int64_t> mlir::tp::decoderLayerOf(Operation *op) {
  if (auto layer = op->getAttrOfType<IntegerAttr>(TPDialect::kLayerAttrName))
    return layer.getInt();
  return std::nullopt;
}

void mlir::tp::setDecoderLayer(Operation *op, std::optional<int64_t> layer) {
  if (!layer) {
    op->removeAttr(TPDialect::kLayerAttrName);
    return;
  }
  op->setAttr(TPDialect::kLayerAttrName,
              IntegerAttr::get(IntegerType::get(op->getContext(), 64), *layer));
}

std::optional<int64_t> mlir::tp::decoderLayerOfValue(Value v) {
  if (Operation *def = v.getDefiningOp())
    return decoderLayerOf(def);
  return decoderLayerOfUsers(v);
}

int64_t mlir::tp::gridSize(ModuleOp module, StringRef name) {
  if (auto grid = module.lookupSymbol<shard::GridOp>(name))
    if (grid.getShape().size() == 1 && grid.getShape()[0] > 0)
      return grid.getShape()[0];
  return 1;
}

std::optional<int64_t> mlir::tp::decoderLayerOfUsers(Value v) {
  std::optional<int64_t> layer;
  for (Operation *user : v.getUsers()) {
    std::optional<int64_t> l = decoderLayerOf(user);
    if (!l || (layer && *layer != *l))
      return std::nullopt;
    layer = l;
  }
  return layer;
}

llvm::StringMap<BlockArgument>
mlir::tp::argumentsByFqn(FunctionOpInterface func) {
  llvm::StringMap<BlockArgument> argOf;
  for (BlockArgument arg : func.getArguments())
    if (auto fqn = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     TPDialect::kFqnAttrName))
      argOf[fqn.getValue()] = arg;
  return argOf;
}
