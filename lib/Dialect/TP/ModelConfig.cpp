//===- ModelConfig.cpp - the typed configuration of a raised model --------===//

#include "tpopt/Dialect/TP/ModelConfig.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::tp;

namespace {

// One reader, writer and type check per kind of field.
bool isKind(Attribute a, ModelConfig::Int *) {
  auto i = dyn_cast<IntegerAttr>(a);
  return i && i.getType().isInteger(64);
}
bool isKind(Attribute a, ModelConfig::Float *) {
  auto f = dyn_cast<FloatAttr>(a);
  return f && f.getType().isF64();
}
bool isKind(Attribute a, ModelConfig::Bool *) { return isa<BoolAttr>(a); }
bool isKind(Attribute a, ModelConfig::String *) { return isa<StringAttr>(a); }
bool isKind(Attribute a, ModelConfig::Strings *) {
  auto list = dyn_cast<ArrayAttr>(a);
  return list &&
         llvm::all_of(list, [](Attribute e) { return isa<StringAttr>(e); });
}

StringRef kindName(ModelConfig::Int *) { return "a 64-bit integer"; }
StringRef kindName(ModelConfig::Float *) { return "an f64 float"; }
StringRef kindName(ModelConfig::Bool *) { return "a boolean"; }
StringRef kindName(ModelConfig::String *) { return "a string"; }
StringRef kindName(ModelConfig::Strings *) { return "a list of strings"; }

void readField(Attribute a, ModelConfig::Int &v) {
  v = cast<IntegerAttr>(a).getInt();
}
void readField(Attribute a, ModelConfig::Float &v) {
  v = cast<FloatAttr>(a).getValueAsDouble();
}
void readField(Attribute a, ModelConfig::Bool &v) {
  v = cast<BoolAttr>(a).getValue();
}
void readField(Attribute a, ModelConfig::String &v) {
  v = cast<StringAttr>(a).getValue().str();
}
void readField(Attribute a, ModelConfig::Strings &v) {
  v.emplace();
  for (Attribute e : cast<ArrayAttr>(a))
    v->push_back(cast<StringAttr>(e).getValue().str());
}

Attribute writeField(Builder &b, int64_t v) { return b.getI64IntegerAttr(v); }
Attribute writeField(Builder &b, double v) { return b.getF64FloatAttr(v); }
Attribute writeField(Builder &b, bool v) { return b.getBoolAttr(v); }
Attribute writeField(Builder &b, const std::string &v) {
  return b.getStringAttr(v);
}
Attribute writeField(Builder &b, const std::vector<std::string> &v) {
  SmallVector<Attribute> list;
  for (const std::string &s : v)
    list.push_back(b.getStringAttr(s));
  return b.getArrayAttr(list);
}

} // namespace

LogicalResult
ModelConfig::verify(DictionaryAttr dict,
                    function_ref<InFlightDiagnostic()> emitError) {
  for (NamedAttribute entry : dict) {
    StringRef key = entry.getName().getValue();
    bool known = false, typed = false;
    StringRef want;
#define TP_CONFIG_FIELD(KIND, KEY, MEMBER)                                     \
  if (key == #KEY) {                                                           \
    known = true;                                                              \
    typed = isKind(entry.getValue(), static_cast<KIND *>(nullptr));            \
    want = kindName(static_cast<KIND *>(nullptr));                             \
  }
#include "tpopt/Dialect/TP/ModelConfig.def"
    if (!known)
      return emitError() << "'" << kAttrName << "' has an unknown field '"
                         << key << "'";
    if (!typed)
      return emitError() << "'" << kAttrName << "' field '" << key
                         << "' must be " << want << ", got "
                         << entry.getValue();
  }
  return success();
}

ModelConfig ModelConfig::fromAttr(DictionaryAttr dict) {
  ModelConfig config;
#define TP_CONFIG_FIELD(KIND, KEY, MEMBER)                                     \
  if (Attribute a = dict.get(#KEY))                                            \
    readField(a, config.MEMBER);
#include "tpopt/Dialect/TP/ModelConfig.def"
  return config;
}

FailureOr<ModelConfig> ModelConfig::read(ModuleOp module) {
  auto dict = module->getAttrOfType<DictionaryAttr>(kAttrName);
  if (!dict)
    return module.emitError() << "the module has no '" << kAttrName
                              << "' dictionary (run --tp-raise-onnx first)";
  if (failed(verify(dict, [&] { return module.emitError(); })))
    return failure();
  return fromAttr(dict);
}

DictionaryAttr ModelConfig::toAttr(MLIRContext *ctx) const {
  Builder b(ctx);
  SmallVector<NamedAttribute> entries;
#define TP_CONFIG_FIELD(KIND, KEY, MEMBER)                                     \
  if (MEMBER)                                                                  \
    entries.push_back(b.getNamedAttr(#KEY, writeField(b, *MEMBER)));
#include "tpopt/Dialect/TP/ModelConfig.def"
  return b.getDictionaryAttr(entries);
}
