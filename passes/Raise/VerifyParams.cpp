//===- VerifyParams.cpp - check the model's parameter arguments -----------===//

#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Passes.h"

#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPVERIFYPARAMS
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

struct SourceRange {
  unsigned argIndex;
  uint64_t begin, end;
};

LogicalResult verifyFunctionParams(FunctionOpInterface func) {
  llvm::StringMap<unsigned> firstArgOfFqn;
  llvm::StringMap<SmallVector<SourceRange>> rangesOfFile;
  bool ok = true;
  Location loc = func.getLoc();

  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
    auto fqn = func.getArgAttrOfType<StringAttr>(i, TPDialect::kFqnAttrName);
    if (!fqn)
      continue;
    auto [it, inserted] = firstArgOfFqn.try_emplace(fqn.getValue(), i);
    if (!inserted) {
      emitError(loc) << "parameter '" << fqn.getValue()
                     << "' is declared twice, by arguments " << it->second
                     << " and " << i;
      ok = false;
    }
    auto source =
        func.getArgAttrOfType<SourceAttr>(i, TPDialect::kSourceAttrName);
    if (!source)
      continue;
    SourceRange range{i, source.getOffset(),
                      source.getOffset() + source.getLength()};
    if (range.end < range.begin) {
      emitError(loc) << "parameter '" << fqn.getValue()
                     << "': source range overflows (offset "
                     << source.getOffset() << ", length " << source.getLength()
                     << ")";
      ok = false;
      continue;
    }
    for (const SourceRange &other : rangesOfFile[source.getFile()]) {
      bool identical = other.begin == range.begin && other.end == range.end;
      if (identical || range.end <= other.begin || other.end <= range.begin)
        continue;
      auto otherFqn = func.getArgAttrOfType<StringAttr>(
          other.argIndex, TPDialect::kFqnAttrName);
      emitError(loc) << "parameter '" << fqn.getValue() << "' (bytes ["
                     << range.begin << ", " << range.end << ") of '"
                     << source.getFile() << "') overlaps parameter '"
                     << otherFqn.getValue() << "' (bytes [" << other.begin
                     << ", " << other.end << "))";
      ok = false;
    }
    rangesOfFile[source.getFile()].push_back(range);
  }
  return success(ok);
}

struct TPVerifyParamsPass
    : public tp::impl::TPVerifyParamsBase<TPVerifyParamsPass> {
  void runOnOperation() override {
    bool ok = true;
    getOperation().walk([&](FunctionOpInterface func) {
      ok &= succeeded(verifyFunctionParams(func));
    });
    if (!ok)
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
