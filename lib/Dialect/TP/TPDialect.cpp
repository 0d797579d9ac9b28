//===- TPDialect.cpp - tp dialect -----------------------------------------===//

#include "tpopt/Dialect/TP/TPDialect.h"
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
    std::optional<uint64_t> bytes = getTensorByteSize(tensorType);
    if (!bytes)
      return emitArgError()
             << "cannot size element type " << tensorType.getElementType();
    // A partitioned parameter is one of `tp.shards` equal blocks.
    if (auto shards = op->getAttrDictionary().getAs<ArrayAttr>("arg_attrs")) {
      if (argIndex < shards.size())
        if (auto dict = dyn_cast<DictionaryAttr>(shards[argIndex]))
          if (auto n = dict.getAs<IntegerAttr>("tp.shards"))
            *bytes *= n.getInt();
    }
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

  // Written by tp-partition: this rank holds block `rank / tp.shard_replicas`
  // of `tp.shards` equal blocks along `tp.shard_dim` (tp-apply-plan writes
  // `tp.shard_replicas` for KV heads shared by a query group).
  if (attr.getName() == "tp.shard_dim" || attr.getName() == "tp.shards" ||
      attr.getName() == "tp.shard_replicas") {
    auto value = dyn_cast<IntegerAttr>(attr.getValue());
    int64_t least = attr.getName() == "tp.shard_dim" ? 0 : 1;
    if (!value || value.getInt() < least)
      return emitArgError() << "'" << attr.getName().getValue()
                            << "' must be an integer of at least " << least;
    return success();
  }
  // Placements written by tp-apply-plan.
  if (attr.getName() == "tp.placement" || attr.getName() == "tp.plan_key" ||
      attr.getName() == "tp.grad_reduction") {
    if (!isa<StringAttr>(attr.getValue()))
      return emitArgError()
             << "'" << attr.getName().getValue() << "' must be a string";
    return success();
  }

  return emitArgError() << "unknown tp argument attribute '"
                        << attr.getName().getValue() << "'";
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
             << "point (\"forward\"), got " << attr.getValue();
    return success();
  }
  // The module-level configuration and ONNX bookkeeping (tp.config,
  // tp.model) are checked by the passes that read them.
  return success();
}
