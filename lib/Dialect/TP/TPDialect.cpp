//===- TPDialect.cpp - tp dialect -----------------------------------------===//

#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/ModelConfig.h"
#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::tp;

#include "tpopt/Dialect/TP/TPDialect.cpp.inc"

void TPDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "tpopt/Dialect/TP/TPOps.cpp.inc"
      >();
}

LogicalResult TPDialect::verifyRegionArgAttribute(Operation *op,
                                                  unsigned regionIndex,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  Region &region = op->getRegion(regionIndex);
  Type argType =
      region.empty() ? Type() : region.getArgument(argIndex).getType();
  auto emitArgError = [&]() {
    return op->emitOpError() << "argument " << argIndex << ": ";
  };

  if (attr.getName() == kFqnAttrName) {
    auto fqn = dyn_cast<StringAttr>(attr.getValue());
    if (!fqn || fqn.getValue().empty())
      return emitArgError()
             << "'" << kFqnAttrName << "' must be a non-empty string";
    return success();
  }

  if (attr.getName() == kSourceAttrName) {
    auto source = dyn_cast<SourceAttr>(attr.getValue());
    if (!source)
      return emitArgError()
             << "'" << kSourceAttrName << "' must be a #tp.source attribute";
    // Weightless declarations (no region body) cannot be checked further.
    if (!argType)
      return success();
    auto tensorType = dyn_cast<RankedTensorType>(argType);
    if (!tensorType || !tensorType.hasStaticShape())
      return emitArgError() << "a parameter with a source must be a "
                               "statically shaped tensor, got "
                            << argType;
    // The bytes are of the stored type when it differs from the argument's.
    if (Type stored = source.getStoredType()) {
      if (!isa<FloatType>(stored) ||
          !isa<FloatType>(tensorType.getElementType()))
        return emitArgError() << "a stored type (" << stored
                              << ") converts one float type to another, not to "
                              << tensorType.getElementType();
      tensorType = tensorType.clone(stored);
    }
    std::optional<uint64_t> bytes = getTensorByteSize(tensorType);
    if (!bytes)
      return emitArgError()
             << "cannot size element type " << tensorType.getElementType();
    // A partitioned parameter is this rank's block of the whole.
    if (auto attrs = op->getAttrDictionary().getAs<ArrayAttr>("arg_attrs"))
      if (argIndex < attrs.size())
        if (auto dict = dyn_cast<DictionaryAttr>(attrs[argIndex]))
          if (auto placement = dict.getAs<PlacementAttr>(kPlacementAttrName);
              placement && placement.isSplit() &&
              placement.getSplitDim() < tensorType.getRank() &&
              tensorType.getDimSize(placement.getSplitDim()) > 0)
            *bytes = *bytes / tensorType.getDimSize(placement.getSplitDim()) *
                     placement.getGlobalSize(
                         tensorType.getDimSize(placement.getSplitDim()));
    if (*bytes != source.getLength())
      return emitArgError() << "source '" << source.getInitializer()
                            << "' holds " << source.getLength() << " bytes but "
                            << tensorType << " needs " << *bytes;
    if (source.getTransposed() && tensorType.getRank() != 2)
      return emitArgError() << "only 2-D parameters can be stored "
                               "transposed, got rank "
                            << tensorType.getRank();
    return success();
  }

  if (attr.getName() == kExcludeAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return emitArgError()
             << "'" << kExcludeAttrName << "' is a unit attribute";
    return success();
  }

  if (attr.getName() == kGradReductionAttrName) {
    if (!isa<GradReductionAttr>(attr.getValue()))
      return emitArgError() << "'" << kGradReductionAttrName
                            << "' must be a #tp.grad_reduction attribute";
    return success();
  }

  // Written by tp-apply-plan, completed by tp-partition.
  if (attr.getName() == kPlacementAttrName) {
    auto placement = dyn_cast<PlacementAttr>(attr.getValue());
    if (!placement)
      return emitArgError() << "'" << kPlacementAttrName
                            << "' must be a #tp.placement attribute";
    auto tensorType = dyn_cast_or_null<RankedTensorType>(argType);
    if (placement.isSplit() && tensorType &&
        placement.getSplitDim() >= tensorType.getRank())
      return emitArgError() << "placement splits dimension "
                            << placement.getSplitDim() << " of " << argType;
    // An uneven split's ranges cover the dimension; once partitioned, the
    // argument is the largest range.
    if (placement.isUneven() && tensorType &&
        !tensorType.isDynamicDim(placement.getSplitDim())) {
      int64_t size = tensorType.getDimSize(placement.getSplitDim());
      int64_t expected = placement.isPartitioned()
                             ? placement.getUnevenExtent()
                             : placement.getGlobalSize(size);
      if (size != expected)
        return emitArgError() << "placement " << placement
                              << " needs dimension " << placement.getSplitDim()
                              << " of " << argType << " to be " << expected;
    }
    return success();
  }

  return emitArgError() << "unknown tp argument attribute '"
                        << attr.getName().getValue() << "'";
}

/// A function's activation plan: both attributes, the buffers as (offset,
/// bytes) pairs inside the arena.
static LogicalResult verifyActivationPlan(Operation *op) {
  auto bytes =
      op->getAttrOfType<IntegerAttr>(TPDialect::kActivationBytesAttrName);
  auto buffers = op->getAttrOfType<DenseI64ArrayAttr>(
      TPDialect::kActivationBuffersAttrName);
  if (!isa<FunctionOpInterface>(op) || !bytes || !buffers ||
      buffers.size() % 2 != 0 || bytes.getInt() < 0)
    return op->emitOpError()
           << "an activation plan is a function's '"
           << TPDialect::kActivationBytesAttrName << "' (an integer) and '"
           << TPDialect::kActivationBuffersAttrName
           << "' ((offset, bytes) pairs per token)";
  ArrayRef<int64_t> pairs = buffers.asArrayRef();
  for (size_t k = 0; k < pairs.size(); k += 2)
    if (pairs[k] < 0 || pairs[k + 1] < 0 ||
        pairs[k] > bytes.getInt() - pairs[k + 1])
      return op->emitOpError()
             << "activation buffer " << k / 2 << " (offset " << pairs[k] << ", "
             << pairs[k + 1] << " bytes per token) lies outside the "
             << bytes.getInt() << " bytes per token of its arena";
  return success();
}

LogicalResult TPDialect::verifyOperationAttribute(Operation *op,
                                                  NamedAttribute attr) {
  if (attr.getName() == kEntryAttrName) {
    auto role = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op))
      return op->emitOpError()
             << "'" << kEntryAttrName << "' marks functions only";
    if (!role || !isEntryRole(role.getValue()))
      return op->emitOpError()
             << "'" << kEntryAttrName << "' must be the role of an entry "
             << "point (\"forward\", \"train_step\", \"optimizer_step\", "
                "\"init\"), got "
             << attr.getValue();
    return success();
  }
  if (attr.getName() == kSavedAttrName ||
      attr.getName() == kRecomputedAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << attr.getName().getValue() << "' is a unit attribute";
    return success();
  }
  if (attr.getName() == kLayerAttrName) {
    auto layer = dyn_cast<IntegerAttr>(attr.getValue());
    if (!layer || !layer.getType().isInteger(64) || layer.getInt() < 0)
      return op->emitOpError()
             << "'" << kLayerAttrName
             << "' must be a non-negative i64 (a decoder layer), got "
             << attr.getValue();
    return success();
  }
  if (attr.getName() == kPlanSourceAttrName) {
    if (!isa<ModuleOp>(op) || !isa<StringAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << kPlanSourceAttrName << "' must be a string on a module";
    return success();
  }
  if (attr.getName() == kActivationBytesAttrName ||
      attr.getName() == kActivationBuffersAttrName)
    return verifyActivationPlan(op);
  if (attr.getName() == kActivationSlotAttrName) {
    auto slot = dyn_cast<IntegerAttr>(attr.getValue());
    auto func = op->getParentOfType<FunctionOpInterface>();
    auto buffers =
        func
            ? func->getAttrOfType<DenseI64ArrayAttr>(kActivationBuffersAttrName)
            : DenseI64ArrayAttr();
    if (!slot || !buffers || slot.getInt() < 0 ||
        slot.getInt() >= buffers.size() / 2)
      return op->emitOpError() << "'" << kActivationSlotAttrName
                               << "' must be a buffer of its function's '"
                               << kActivationBuffersAttrName << "' ("
                               << (buffers ? buffers.size() / 2 : 0)
                               << " buffers), got " << attr.getValue();
    return success();
  }
  if (attr.getName() == ModelConfig::kAttrName) {
    auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!dict)
      return op->emitOpError()
             << "'" << ModelConfig::kAttrName << "' must be a dictionary";
    return ModelConfig::verify(dict, [&] { return op->emitOpError(); });
  }
  return success();
}
