//===- TPAttrs.cpp - tp dialect attributes --------------------------------===//

#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tp;

#include "tpopt/Dialect/TP/TPEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "tpopt/Dialect/TP/TPAttrs.cpp.inc"

//===----------------------------------------------------------------------===//
// PlacementAttr
//===----------------------------------------------------------------------===//

LogicalResult
PlacementAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      int64_t splitDim, int64_t blocks, int64_t replicas,
                      GradReduction grad, StringRef key,
                      ArrayRef<int64_t> starts, ArrayRef<int64_t> sizes) {
  if (splitDim < -1)
    return emitError() << "split dimension must be at least 0, got "
                       << splitDim;
  if (blocks < 1 || replicas < 1)
    return emitError() << "blocks and replicas must be at least 1, got "
                       << blocks << " and " << replicas;
  if (splitDim < 0 && (blocks != 1 || replicas != 1))
    return emitError() << "a replicated parameter has no blocks or replicas";
  if (splitDim >= 0 && grad != GradReduction::Mean)
    return emitError() << "a split parameter's gradient is sharded; 'grad' "
                          "is for replicated ones";
  if (starts.size() != sizes.size())
    return emitError() << "an uneven split gives each rank a start and a "
                          "size, got "
                       << starts.size() << " starts and " << sizes.size()
                       << " sizes";
  if (!sizes.empty()) {
    if (splitDim < 0)
      return emitError() << "a replicated parameter has no ranges";
    if (replicas != 1)
      return emitError() << "an uneven split says its replicas by equal "
                            "ranges, not 'replicas'";
    if (blocks != 1 && blocks != static_cast<int64_t>(sizes.size()))
      return emitError() << "an uneven split over " << sizes.size()
                         << " ranks is partitioned into one block per rank, "
                            "not "
                         << blocks;
    for (auto [rank, start, size] : llvm::enumerate(starts, sizes))
      if (start < 0 || size < 1)
        return emitError() << "rank " << rank << " holds [" << start << ", "
                           << start + size << "): a range needs a start of "
                           << "at least 0 and a size of at least 1";
  }
  return success();
}

int64_t PlacementAttr::getUnevenExtent() const {
  return getSizes().empty() ? 0 : *llvm::max_element(getSizes());
}

int64_t PlacementAttr::getGlobalSize(int64_t local) const {
  if (!isUneven())
    return local * getBlocks();
  int64_t end = 0;
  for (auto [start, size] : llvm::zip_equal(getStarts(), getSizes()))
    end = std::max(end, start + size);
  return end;
}

SmallVector<int64_t> PlacementAttr::getSharedBlocks() const {
  SmallVector<int64_t> blocks;
  if (isUneven()) {
    // Ranges are equal or disjoint: ranks with one start share a range.
    SmallVector<int64_t> distinct;
    for (int64_t start : getStarts()) {
      auto at = llvm::find(distinct, start);
      blocks.push_back(at - distinct.begin());
      if (at == distinct.end())
        distinct.push_back(start);
    }
    if (distinct.size() == getStarts().size())
      blocks.clear();
    return blocks;
  }
  if (getReplicas() > 1)
    for (int64_t r = 0; r < getBlocks() * getReplicas(); ++r)
      blocks.push_back(r / getReplicas());
  return blocks;
}

/// `[a, b, c]` into `values`.
static ParseResult parseIntegerList(AsmParser &parser,
                                    SmallVectorImpl<int64_t> &values) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
    return parser.parseInteger(values.emplace_back());
  });
}

// #tp.placement<replicated, grad = sum, key = "...">
// #tp.placement<split(0), blocks = 2, replicas = 2, key = "...">
Attribute PlacementAttr::parse(AsmParser &parser, Type) {
  int64_t dim = -1, blocks = 1, replicas = 1;
  SmallVector<int64_t> starts, sizes;
  GradReduction grad = GradReduction::Mean;
  std::string key;
  if (parser.parseLess())
    return {};
  if (succeeded(parser.parseOptionalKeyword("split"))) {
    if (parser.parseLParen() || parser.parseInteger(dim) ||
        parser.parseRParen())
      return {};
  } else if (parser.parseKeyword("replicated",
                                 "or 'split(d)' in a placement")) {
    return {};
  }
  while (succeeded(parser.parseOptionalComma())) {
    StringRef field;
    if (parser.parseKeyword(&field) || parser.parseEqual())
      return {};
    if (field == "blocks" || field == "replicas") {
      if (parser.parseInteger(field == "blocks" ? blocks : replicas))
        return {};
    } else if (field == "starts" || field == "sizes") {
      if (parseIntegerList(parser, field == "starts" ? starts : sizes))
        return {};
    } else if (field == "grad") {
      StringRef name;
      SMLoc loc = parser.getCurrentLocation();
      if (parser.parseKeyword(&name))
        return {};
      std::optional<GradReduction> parsed = symbolizeGradReduction(name);
      if (!parsed)
        return parser.emitError(loc, "grad must be mean or sum"), Attribute();
      grad = *parsed;
    } else if (field == "key") {
      if (parser.parseString(&key))
        return {};
    } else {
      return parser.emitError(parser.getCurrentLocation(),
                              "unknown placement field '")
                 << field << "'",
             Attribute();
    }
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<PlacementAttr>(parser.getContext(), dim, blocks,
                                          replicas, grad, key, starts, sizes);
}

void PlacementAttr::print(AsmPrinter &printer) const {
  printer << "<";
  if (isSplit())
    printer << "split(" << getSplitDim() << ")";
  else
    printer << "replicated, grad = " << stringifyGradReduction(getGrad());
  if (getBlocks() != 1)
    printer << ", blocks = " << getBlocks();
  if (getReplicas() != 1)
    printer << ", replicas = " << getReplicas();
  if (isUneven()) {
    printer << ", starts = [";
    llvm::interleaveComma(getStarts(), printer);
    printer << "], sizes = [";
    llvm::interleaveComma(getSizes(), printer);
    printer << "]";
  }
  if (!getKey().empty()) {
    printer << ", key = ";
    printer.printString(getKey());
  }
  printer << ">";
}

void TPDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tpopt/Dialect/TP/TPAttrs.cpp.inc"
      >();
}
