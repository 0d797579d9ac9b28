//===- TPInterfaces.cpp - partition state and runtime calls ---------------===//

#include "tpopt/Dialect/TP/TPInterfaces.h"
#include "tpopt/Dialect/TP/RuntimeCalls.h"
#include "tpopt/Dialect/TP/TPOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::tp;

#include "tpopt/Dialect/TP/TPInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// PartitionState
//===----------------------------------------------------------------------===//

/// Whether `split`'s ranges follow one another from 0 (what a gather or a
/// scatter of the whole needs); their end in `total`.
static bool rangesFollow(const PartitionState::UnevenSplit &split,
                         int64_t &total) {
  total = 0;
  for (auto [start, size] : llvm::zip_equal(split.starts, split.sizes)) {
    if (start != total)
      return false;
    total += size;
  }
  return true;
}

/// `type` with dimension `dim` `size` long.
static RankedTensorType withDimSize(Type type, int64_t dim, int64_t size) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, t.getElementType());
}

ShardLayout PartitionState::getLayout(Value v) const {
  auto it = layouts.find(v);
  return it == layouts.end() ? ShardLayout::Replicated : it->second;
}

int64_t PartitionState::getParamSplitDim(Value v) const {
  auto it = paramSplit.find(v);
  return it == paramSplit.end() ? -1 : it->second;
}

const PartitionState::UnevenSplit *PartitionState::getUneven(Value v) const {
  auto it = uneven.find(v);
  return it == uneven.end() ? nullptr : &it->second;
}

bool PartitionState::splitAlike(Value a, Value b) const {
  const UnevenSplit *x = getUneven(a), *y = getUneven(b);
  return x == y || (x && y && *x == *y);
}

void PartitionState::propagate(Value from, Value result) {
  result.setType(from.getType());
  setLayout(result, getLayout(from));
  if (const UnevenSplit *split = getUneven(from))
    setUneven(result, *split);
  // A parameter through a per-element op (LoRA's scaled lora_B bias) is
  // still held as the parameter is.
  if (int64_t dim = getParamSplitDim(from); dim >= 0)
    setParamSplitDim(result, dim);
}

void PartitionState::markPartial(Value v) {
  auto readsValue = [](OpOperand &use) {
    auto op = dyn_cast<PartitionOpInterface>(use.getOwner());
    return !op || !op.readsOnlyLayout(use);
  };
  if (llvm::count_if(v.getUses(), readsValue) <= 1) {
    setLayout(v, ShardLayout::Partial);
    return;
  }
  Value sum = completed(v);
  v.replaceAllUsesExcept(sum, sum.getDefiningOp());
}

Value PartitionState::completed(Value v) {
  Value &sum = allReduced[v];
  if (!sum) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfterValue(v);
    sum = allReduce(v.getLoc(), v);
  }
  return sum;
}

Value PartitionState::allReduce(Location loc, Value v) {
  MLIRContext *ctx = builder.getContext();
  return shard::AllReduceOp::create(
      builder, loc, v.getType(), gridRef(), builder.getDenseI16ArrayAttr({0}),
      v, shard::ReductionKindAttr::get(ctx, shard::ReductionKind::Sum));
}

FailureOr<RankedTensorType> PartitionState::resized(Operation *op, Type type,
                                                    int64_t dim,
                                                    bool gather) const {
  auto t = cast<RankedTensorType>(type);
  if (dim < 0 || dim >= t.getRank()) {
    op->emitError() << "tp-partition: " << type << " has no dimension " << dim
                    << " to split";
    return failure();
  }
  SmallVector<int64_t> shape(t.getShape());
  if (!ShapedType::isDynamic(shape[dim])) {
    if (!gather && shape[dim] % ranks) {
      op->emitError() << "tp-partition: "
                      << (dim == 1 ? "sequence length " : "last dimension ")
                      << shape[dim] << " is not divisible by tp " << ranks;
      return failure();
    }
    shape[dim] = gather ? shape[dim] * ranks : shape[dim] / ranks;
  }
  return RankedTensorType::get(shape, t.getElementType());
}

FailureOr<Value> PartitionState::gathered(Operation *op, Value v, int64_t dim) {
  if (const UnevenSplit *split = getUneven(v)) {
    // The ranks' ranges must follow one another for the concatenation to be
    // the whole (replicated ranges are never gathered).
    auto t = cast<RankedTensorType>(v.getType());
    int64_t at = 0;
    if (!rangesFollow(*split, at))
      return op->emitError() << "tp-partition: the uneven ranges of " << t
                             << " do not follow one another; only such "
                                "a split is gathered";
    if (dim != t.getRank() - 1)
      return op->emitError("tp-partition: an uneven split is gathered on "
                           "its last dimension only");
    return Value(AllGatherUnevenOp::create(
        builder, op->getLoc(), withDimSize(t, dim, at), v, gridRef(),
        builder.getDenseI16ArrayAttr({0}), builder.getI64IntegerAttr(dim),
        builder.getDenseI64ArrayAttr(split->sizes)));
  }
  FailureOr<RankedTensorType> type =
      resized(op, v.getType(), dim, /*gather=*/true);
  if (failed(type))
    return failure();
  return Value(shard::AllGatherOp::create(
      builder, op->getLoc(), *type, gridRef(),
      builder.getDenseI16ArrayAttr({0}), v, builder.getIndexAttr(dim)));
}

FailureOr<Value> PartitionState::gatheredOnce(Operation *op, Value v,
                                              int64_t dim) {
  Value &whole = gatheredWhole[v];
  if (!whole) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfterValue(v);
    FailureOr<Value> made = gathered(op, v, dim);
    if (failed(made))
      return failure();
    whole = *made;
    setLayout(whole, ShardLayout::Replicated);
  }
  return whole;
}

FailureOr<Value> PartitionState::sliced(Operation *op, Value v, int64_t dim,
                                        const UnevenSplit *split) {
  if (split) {
    Value block = AllSliceUnevenOp::create(
        builder, op->getLoc(),
        withDimSize(v.getType(), dim, *llvm::max_element(split->sizes)), v,
        gridRef(), builder.getDenseI16ArrayAttr({0}),
        builder.getI64IntegerAttr(dim),
        builder.getDenseI64ArrayAttr(split->starts),
        builder.getDenseI64ArrayAttr(split->sizes));
    setUneven(block, *split);
    return block;
  }
  FailureOr<RankedTensorType> type =
      resized(op, v.getType(), dim, /*gather=*/false);
  if (failed(type))
    return failure();
  return Value(shard::AllSliceOp::create(
      builder, op->getLoc(), *type, gridRef(),
      builder.getDenseI16ArrayAttr({0}), v, builder.getIndexAttr(dim)));
}

FailureOr<Value> PartitionState::reduceScattered(Operation *op, Value v,
                                                 int64_t dim,
                                                 const UnevenSplit *split) {
  if (split) {
    auto t = cast<RankedTensorType>(v.getType());
    int64_t total = 0;
    if (!rangesFollow(*split, total) || t.isDynamicDim(dim) ||
        t.getDimSize(dim) != total)
      return op->emitError() << "tp-partition: " << t
                             << " does not reduce-scatter over the uneven "
                                "ranges of its readers";
    Value scattered = ReduceScatterUnevenOp::create(
        builder, op->getLoc(),
        withDimSize(t, dim, *llvm::max_element(split->sizes)), v, gridRef(),
        builder.getDenseI16ArrayAttr({0}), builder.getI64IntegerAttr(dim),
        builder.getDenseI64ArrayAttr(split->sizes));
    setUneven(scattered, *split);
    return scattered;
  }
  FailureOr<RankedTensorType> type =
      resized(op, v.getType(), dim, /*gather=*/false);
  if (failed(type))
    return failure();
  MLIRContext *ctx = builder.getContext();
  return Value(shard::ReduceScatterOp::create(
      builder, op->getLoc(), *type, gridRef(),
      builder.getDenseI16ArrayAttr({0}), v,
      shard::ReductionKindAttr::get(ctx, shard::ReductionKind::Sum),
      builder.getIndexAttr(dim)));
}

//===----------------------------------------------------------------------===//
// RuntimeCall
//===----------------------------------------------------------------------===//

StringRef mlir::tp::getRuntimeArgCppType(RuntimeArg kind) {
  // The runtime's spelling of each kind (tprt/CallMacros.h).
#define TPRT_KIND_CASE(name)                                                   \
  case RuntimeArg::name:                                                       \
    return TPRT_STRINGIZE(TPRT_TYPE_##name);
  switch (kind) {
    TPRT_KIND_CASE(Tensor)
    TPRT_KIND_CASE(OptionalTensor)
    TPRT_KIND_CASE(ConsumedTensor)
    TPRT_KIND_CASE(I64)
    TPRT_KIND_CASE(I32)
    TPRT_KIND_CASE(F64)
    TPRT_KIND_CASE(Bool)
    TPRT_KIND_CASE(U64)
    TPRT_KIND_CASE(CString)
    TPRT_KIND_CASE(DType)
    TPRT_KIND_CASE(LinearForm)
    TPRT_KIND_CASE(LinearEpilogue)
    TPRT_KIND_CASE(Shape)
    TPRT_KIND_CASE(Reals)
    TPRT_KIND_CASE(Strings)
    TPRT_KIND_CASE(Slot)
  }
#undef TPRT_KIND_CASE
  return "";
}

StringRef mlir::tp::getRuntimeReturnCppType(const RuntimeSignature &signature) {
  return signature.results == 0   ? "void"
         : signature.results == 1 ? "tprt::Tensor"
                                  : "tprt::Tensors";
}

/// Whether `arg` can be passed as a parameter of `kind`.
static bool matches(const RuntimeCall::Arg &arg, RuntimeArg kind) {
  switch (kind) {
  case RuntimeArg::Tensor:
  case RuntimeArg::ConsumedTensor:
    return std::holds_alternative<Value>(arg) && std::get<Value>(arg);
  case RuntimeArg::OptionalTensor:
    return std::holds_alternative<Value>(arg);
  case RuntimeArg::I64:
  case RuntimeArg::I32:
  case RuntimeArg::U64:
    return std::holds_alternative<int64_t>(arg);
  case RuntimeArg::F64:
    return std::holds_alternative<double>(arg);
  case RuntimeArg::Bool:
    return std::holds_alternative<bool>(arg);
  case RuntimeArg::CString:
  case RuntimeArg::DType:
  case RuntimeArg::LinearForm:
  case RuntimeArg::LinearEpilogue:
    return std::holds_alternative<std::string>(arg);
  case RuntimeArg::Shape:
    return std::holds_alternative<SmallVector<int64_t>>(arg);
  case RuntimeArg::Reals:
    return std::holds_alternative<SmallVector<double>>(arg);
  case RuntimeArg::Strings:
    return std::holds_alternative<SmallVector<std::string>>(arg);
  case RuntimeArg::Slot:
    return false;
  }
  return false;
}

bool mlir::tp::takesActivationSlot(const RuntimeSignature &signature) {
  return !signature.params.empty() &&
         signature.params.back() == RuntimeArg::Slot;
}

LogicalResult RuntimeCall::verify() const {
  if (!signature)
    return op->emitError("no runtime function chosen for this op");
  // The activation slot is the emitter's to pass.
  size_t given = signature->params.size() - takesActivationSlot(*signature);
  if (args.size() != given)
    return op->emitError() << signature->callee << " takes " << given
                           << " arguments after the context, given "
                           << args.size();
  for (auto [i, arg, kind] : llvm::enumerate(args, signature->params))
    if (!matches(arg, kind))
      return op->emitError() << "argument " << i << " of " << signature->callee
                             << " is not a " << getRuntimeArgCppType(kind);
  // A parameter's load is asked for by the function, not by an op.
  if (!isa<FunctionOpInterface>(op) && signature->results != kVariadicResults &&
      signature->results != op->getNumResults())
    return op->emitError() << signature->callee << " returns "
                           << signature->results << " tensors for "
                           << op->getNumResults() << " results";
  return success();
}

const RuntimeSignature &mlir::tp::getLoadParamSignature() {
  return calls::load_param;
}

SmallVector<RuntimeSignature>
mlir::tp::getAllRuntimeSignatures(MLIRContext *ctx) {
  SmallVector<RuntimeSignature> signatures = {getLoadParamSignature()};
  for (RegisteredOperationName name : ctx->getRegisteredOperations())
    if (auto *concept = name.getInterface<RuntimeCallOpInterface>())
      for (const RuntimeSignature &signature :
           concept->getRuntimeSignatures()) {
        signatures.push_back(signature);
        if (signature.consuming)
          signatures.push_back(*signature.consuming);
      }
  return signatures;
}
