//===- HFConfig.cpp - a transformers config.json, typed -------------------===//

#include "tpopt/Plan/HFConfig.h"
#include "tpopt/Plan/Plan.h"

using namespace mlir::tp;
using llvm::json::Object;
using llvm::json::Value;

namespace {

enum class FieldType { Integer, Number, Boolean, String, Object, Array };

struct Field {
  llvm::StringLiteral name;
  FieldType type;
};

/// The fields tp-opt reads from a config (or its text_config).
constexpr Field kModelFields[] = {
    {"model_type", FieldType::String},
    {"hidden_size", FieldType::Integer},
    {"num_hidden_layers", FieldType::Integer},
    {"num_attention_heads", FieldType::Integer},
    {"num_key_value_heads", FieldType::Integer},
    {"head_dim", FieldType::Integer},
    {"intermediate_size", FieldType::Integer},
    {"vocab_size", FieldType::Integer},
    {"max_position_embeddings", FieldType::Integer},
    {"pad_token_id", FieldType::Integer},
    {"sliding_window", FieldType::Integer},
    {"use_sliding_window", FieldType::Boolean},
    {"tie_word_embeddings", FieldType::Boolean},
    {"rms_norm_eps", FieldType::Number},
    {"rope_theta", FieldType::Number},
    {"layer_types", FieldType::Array},
    {"rope_parameters", FieldType::Object},
    {"rope_scaling", FieldType::Object},
    {"text_config", FieldType::Object},
    {"base_model_tp_plan", FieldType::Object},
};

/// The fields of rope_parameters / rope_scaling (and of their per layer
/// type objects).
constexpr Field kRopeFields[] = {
    {"rope_type", FieldType::String},
    {"type", FieldType::String},
    {"rope_theta", FieldType::Number},
    {"factor", FieldType::Number},
    {"low_freq_factor", FieldType::Number},
    {"high_freq_factor", FieldType::Number},
    {"original_max_position_embeddings", FieldType::Integer},
    {"attention_factor", FieldType::Number},
    {"beta_fast", FieldType::Number},
    {"beta_slow", FieldType::Number},
    {"mscale", FieldType::Number},
    {"mscale_all_dim", FieldType::Number},
    {"truncate", FieldType::Boolean},
    {"short_factor", FieldType::Array},
    {"long_factor", FieldType::Array},
    {"full_attention", FieldType::Object},
    {"sliding_attention", FieldType::Object},
};

llvm::StringRef typeName(FieldType type) {
  switch (type) {
  case FieldType::Integer:
    return "an integer";
  case FieldType::Number:
    return "a number";
  case FieldType::Boolean:
    return "true or false";
  case FieldType::String:
    return "a string";
  case FieldType::Object:
    return "an object";
  case FieldType::Array:
    return "an array";
  }
  return "?";
}

llvm::StringRef kindName(const Value &v) {
  switch (v.kind()) {
  case Value::Null:
    return "null";
  case Value::Boolean:
    return "a boolean";
  case Value::Number:
    return v.getAsInteger() ? "an integer" : "a number";
  case Value::String:
    return "a string";
  case Value::Array:
    return "an array";
  case Value::Object:
    return "an object";
  }
  return "?";
}

bool hasType(const Value &v, FieldType type) {
  switch (type) {
  case FieldType::Integer:
    return v.getAsInteger().has_value();
  case FieldType::Number:
    return v.getAsNumber().has_value();
  case FieldType::Boolean:
    return v.getAsBoolean().has_value();
  case FieldType::String:
    return v.getAsString().has_value();
  case FieldType::Object:
    return v.getAsObject() != nullptr;
  case FieldType::Array:
    return v.getAsArray() != nullptr;
  }
  return false;
}

llvm::Error checkFields(const Object &object, llvm::ArrayRef<Field> fields,
                        const std::string &prefix, llvm::StringRef origin) {
  for (const Field &field : fields) {
    const Value *v = object.get(field.name);
    if (!v || v->kind() == Value::Null || hasType(*v, field.type))
      continue;
    std::string shown;
    if (std::optional<llvm::StringRef> s = v->getAsString())
      shown = " (\"" + s->take_front(40).str() + "\")";
    return llvm::createStringError(origin + ": field '" + prefix + field.name +
                                   "' must be " + typeName(field.type) +
                                   ", got " + kindName(*v) + shown);
  }
  return llvm::Error::success();
}

llvm::Error checkRope(const Object &rope, const std::string &prefix,
                      llvm::StringRef origin) {
  if (llvm::Error e = checkFields(rope, kRopeFields, prefix, origin))
    return e;
  for (llvm::StringRef key : {"short_factor", "long_factor"})
    if (const llvm::json::Array *list = rope.getArray(key))
      for (auto [i, v] : llvm::enumerate(*list))
        if (!v.getAsNumber())
          return llvm::createStringError(
              origin + ": field '" + prefix + key + "[" + llvm::Twine(i) +
              "]' must be a number, got " + kindName(v));
  for (llvm::StringRef kind : {"full_attention", "sliding_attention"})
    if (const Object *sub = rope.getObject(kind))
      if (llvm::Error e =
              checkFields(*sub, kRopeFields, prefix + kind.str() + ".", origin))
        return e;
  return llvm::Error::success();
}

llvm::Error checkModel(const Object &config, const std::string &prefix,
                       llvm::StringRef origin) {
  if (llvm::Error e = checkFields(config, kModelFields, prefix, origin))
    return e;
  if (const llvm::json::Array *types = config.getArray("layer_types"))
    for (auto [i, v] : llvm::enumerate(*types))
      if (!v.getAsString())
        return llvm::createStringError(
            origin + ": field '" + prefix + "layer_types[" + llvm::Twine(i) +
            "]' must be a string, got " + kindName(v));
  for (llvm::StringRef key : {"rope_parameters", "rope_scaling"})
    if (const Object *rope = config.getObject(key))
      if (llvm::Error e = checkRope(*rope, prefix + key.str() + ".", origin))
        return e;
  return llvm::Error::success();
}

} // namespace

llvm::Error mlir::tp::checkHFConfigTypes(const Object &config,
                                         llvm::StringRef origin) {
  if (llvm::Error e = checkModel(config, "", origin))
    return e;
  if (const Object *text = config.getObject("text_config"))
    return checkModel(*text, "text_config.", origin);
  return llvm::Error::success();
}

llvm::Expected<Object> mlir::tp::readHFConfig(llvm::StringRef path) {
  llvm::Expected<Object> config = readJSONObject(path);
  if (!config)
    return config.takeError();
  if (llvm::Error e = checkHFConfigTypes(*config, "'" + path.str() + "'"))
    return std::move(e);
  return config;
}
