//===- LoRAAdapter.cpp - PEFT LoRA adapters -------------------------------===//
//
// PEFT's LoraConfig as peft 0.21 interprets it. The matching rules follow
// peft/tuners/tuners_utils.py (check_target_module_exists) and
// peft/utils/other.py (get_pattern_key, _set_trainable); the scale follows
// peft/tuners/lora/layer.py (update_layer).
//
//===----------------------------------------------------------------------===//

#include "tpopt/Plan/LoRAAdapter.h"
#include "tpopt/Plan/Plan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Regex.h"

#include <cmath>

using namespace mlir::tp;
using llvm::StringRef;

static constexpr StringRef kPEFTPrefix = "base_model.model.";

llvm::SmallVector<std::string, 2> mlir::tp::adapterNamesOf(StringRef fqn) {
  llvm::SmallVector<std::string, 2> names{fqn.str()};
  if (fqn.consume_front("backbone."))
    names.push_back(("model." + fqn).str());
  return names;
}

const llvm::StringMapEntry<SafetensorsTensor> *
mlir::tp::findLoRAFactor(const llvm::StringMap<SafetensorsTensor> &adapter,
                         StringRef module, StringRef factor, StringRef param) {
  for (const std::string &name : adapterNamesOf(module)) {
    std::string bare = name + "." + factor.str() + "." + param.str();
    for (const std::string &key : {kPEFTPrefix.str() + bare, bare}) {
      auto it = adapter.find(key);
      if (it != adapter.end())
        return &*it;
    }
  }
  return nullptr;
}

std::string mlir::tp::replacedParameter(StringRef key) {
  key.consume_front(kPEFTPrefix);
  for (StringRef factor : {".lora_A.", ".lora_B."})
    if (key.contains(factor))
      return "";
  // PEFT's names of the wrapped base layer and of a modules_to_save copy.
  std::string name = key.str();
  for (StringRef wrapper : {".base_layer.", ".modules_to_save.default."})
    if (size_t at = name.find(wrapper.str()); at != std::string::npos)
      name.replace(at, wrapper.size(), ".");
  return name;
}

llvm::Expected<std::string> mlir::tp::pythonRegexToPOSIX(StringRef pattern) {
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError("regular expression '" + pattern +
                                   "': " + what + " has no POSIX form");
  };
  std::string out;
  bool inBracket = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\') {
      if (i + 1 == pattern.size())
        return fail("a trailing backslash");
      char e = pattern[++i];
      const char *cls = e == 'd'   ? "0-9"
                        : e == 'w' ? "A-Za-z0-9_"
                        : e == 's' ? "[:space:]"
                                   : nullptr;
      if (cls) {
        out += inBracket ? std::string(cls) : "[" + std::string(cls) + "]";
      } else if (!inBracket && (e == 'D' || e == 'W' || e == 'S')) {
        out += e == 'D'   ? "[^0-9]"
               : e == 'W' ? "[^A-Za-z0-9_]"
                          : "[^[:space:]]";
      } else if (llvm::isAlnum(e)) {
        return fail(llvm::Twine("the escape '\\") + llvm::Twine(e) + "'");
      } else if (inBracket) {
        // POSIX brackets have no escapes: a literal is itself, except the
        // characters that mean something there.
        if (e == ']' || e == '^' || e == '-' || e == '\\')
          return fail(llvm::Twine("'\\") + llvm::Twine(e) +
                      "' inside brackets");
        out += e;
      } else {
        out += '\\';
        out += e;
      }
      continue;
    }
    if (inBracket) {
      if (c == ']')
        inBracket = false;
      out += c;
      continue;
    }
    if (c == '[') {
      inBracket = true;
      out += c;
      // A leading ']' (or '^]') is a literal, not the end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^')
        out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']')
        out += pattern[++i];
      continue;
    }
    if (c == '(' && i + 1 < pattern.size() && pattern[i + 1] == '?')
      return fail("the group '(?'");
    // Lazy quantifiers: whether a full match exists does not depend on it.
    if (c == '?' && i > 0 && llvm::is_contained("*+?}", pattern[i - 1]) &&
        !(i > 1 && pattern[i - 2] == '\\'))
      continue;
    out += c;
  }
  if (inBracket)
    return fail("an unclosed '['");
  return "^(" + out + ")$";
}

namespace {

/// Whether `name` matches Python regex `pattern` in full; PEFT's rules
/// wrap a user's pattern in `prefix`...`suffix` first.
bool fullMatch(StringRef pattern, StringRef name, StringRef prefix = "",
               StringRef suffix = "") {
  llvm::Expected<std::string> posix =
      pythonRegexToPOSIX((prefix + "(" + pattern + ")" + suffix).str());
  if (!posix) {
    // Patterns are checked when the configuration is read.
    llvm::consumeError(posix.takeError());
    return false;
  }
  return llvm::Regex(*posix).match(name);
}

bool isAllDigits(StringRef s) {
  return !s.empty() && llvm::all_of(s, llvm::isDigit);
}

/// PEFT's layer index of a module name: the first numbered component after
/// a component named by `patterns` (any component when empty).
std::optional<int64_t> layerIndex(StringRef module,
                                  llvm::ArrayRef<std::string> patterns) {
  llvm::SmallVector<StringRef> parts;
  module.split(parts, '.');
  auto indexAfter = [&](auto prefixMatches) -> std::optional<int64_t> {
    for (size_t i = 1; i + 1 < parts.size(); ++i) {
      if (!isAllDigits(parts[i]))
        continue;
      std::string prefix = llvm::join(llvm::ArrayRef(parts).take_front(i), ".");
      if (prefixMatches(prefix)) {
        int64_t index = 0;
        if (!parts[i].getAsInteger(10, index))
          return index;
      }
    }
    return std::nullopt;
  };
  if (patterns.empty())
    // `.*?\.[^.]*\.(\d+)\.`: a component, then the number.
    return indexAfter([](StringRef prefix) { return prefix.contains('.'); });
  for (const std::string &pattern : patterns)
    if (auto index = indexAfter([&](StringRef prefix) {
          return fullMatch(pattern, prefix, "(.*\\.)?");
        }))
      return index;
  return std::nullopt;
}

} // namespace

LoRAConfig LoRAConfig::fromOptions(int64_t rank, double alpha,
                                   StringRef targets) {
  LoRAConfig config;
  config.rank = rank;
  config.alpha = alpha;
  config.origin = "lora-targets '" + targets.str() + "'";
  if (targets == "all-linear")
    return config;
  config.targetKind = Targets::LastComponentGlobs;
  llvm::SmallVector<StringRef> names;
  targets.split(names, ',', -1, /*KeepEmpty=*/false);
  for (StringRef name : names)
    config.targets.push_back(name.trim().str());
  return config;
}

bool LoRAConfig::isModuleToSave(StringRef module) const {
  return llvm::any_of(
      modulesToSave, [&](const std::string &m) { return module.ends_with(m); });
}

llvm::Expected<std::optional<LoRAConfig::ModuleLoRA>>
LoRAConfig::lookup(StringRef module, bool isOutputLayer) const {
  auto endsWithComponent = [&](StringRef name) {
    return module == name || module.ends_with(("." + name).str());
  };
  if (excludeIsRegex ? fullMatch(exclude.front(), module)
                     : llvm::any_of(exclude, endsWithComponent))
    return std::nullopt;
  // PEFT never puts an adapter on a modules_to_save module.
  if (llvm::any_of(modulesToSave, [&](const std::string &m) {
        return fullMatch(m, module, "(.*\\.)?", "(\\..*)?");
      }))
    return std::nullopt;

  bool found = false;
  switch (targetKind) {
  case Targets::AllLinear:
    found = !isOutputLayer;
    break;
  case Targets::Regex:
    found = fullMatch(targets.front(), module);
    break;
  case Targets::LastComponentGlobs: {
    StringRef last = module.rsplit('.').second;
    if (last.empty())
      last = module;
    found = llvm::any_of(targets, [&](const std::string &name) {
      llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(name);
      if (!glob) {
        llvm::consumeError(glob.takeError());
        return name == last;
      }
      return glob->match(last);
    });
    break;
  }
  case Targets::Names:
    if (llvm::is_contained(targets, module)) {
      // A full name is taken as it is, whatever layers_to_transform says.
      found = true;
      break;
    }
    found = llvm::any_of(targets, [&](const std::string &name) {
      return module.ends_with(("." + name));
    });
    if (found && !layers.empty()) {
      std::optional<int64_t> index = layerIndex(module, layersPattern);
      found = index && llvm::is_contained(layers, *index);
    }
    break;
  }
  if (!found)
    return std::nullopt;

  // The first pattern key matching the name's tail wins in PEFT; a JSON
  // object's order is not kept, so two keys that disagree are an error.
  auto byPattern = [&](const auto &patterns, auto fallback,
                       StringRef field) -> llvm::Expected<decltype(fallback)> {
    std::optional<std::pair<std::string, decltype(fallback)>> chosen;
    for (const auto &[key, value] : patterns) {
      if (!fullMatch(key, module, "(.*\\.)?"))
        continue;
      if (chosen && chosen->second != value)
        return llvm::createStringError(
            origin + ": " + field + " keys '" + chosen->first + "' and '" +
            key + "' both match module '" + module +
            "' with different values (PEFT takes the first in file order; "
            "keep one)");
      chosen = {key, value};
    }
    return chosen ? chosen->second : fallback;
  };
  llvm::Expected<int64_t> r = byPattern(rankPattern, rank, "rank_pattern");
  if (!r)
    return r.takeError();
  llvm::Expected<double> a = byPattern(alphaPattern, alpha, "alpha_pattern");
  if (!a)
    return a.takeError();
  if (*r < 1)
    return llvm::createStringError(origin + ": the rank of module '" + module +
                                   "' is " + llvm::Twine(*r) +
                                   ", not positive");
  double scale = useRslora ? *a / std::sqrt(static_cast<double>(*r)) : *a / *r;
  return std::optional<ModuleLoRA>(ModuleLoRA{*r, *a, scale});
}

/// LoraConfig fields tp-opt refuses unless they hold PEFT's default (off),
/// with what they would turn on.
static constexpr std::pair<StringRef, StringRef> kUnsupportedUnlessOff[] = {
    {"use_dora", "DoRA"},
    {"use_qalora", "QALoRA"},
    {"ensure_weight_tying", "tying modules_to_save copies"},
    {"trainable_token_indices", "training embedding rows (trainable tokens)"},
    {"target_parameters", "LoRA on parameters (MoE experts)"},
    {"layer_replication", "layer replication"},
    {"alora_invocation_tokens", "activated LoRA (aLoRA)"},
    {"megatron_config", "Megatron parallel linears"},
    {"loftq_config", "this LoRA variant"},
    {"eva_config", "this LoRA variant"},
    {"corda_config", "this LoRA variant"},
    {"lora_ga_config", "this LoRA variant"},
    {"velora_config", "this LoRA variant"},
    {"monteclora_config", "this LoRA variant"},
    {"arrow_config", "this LoRA variant"},
    {"kasa_config", "this LoRA variant"},
    {"use_bdlora", "this LoRA variant"},
};

namespace {

/// Reads the fields of PEFT's adapter_config.json into a LoRAConfig, one
/// group of fields per method; every error names the file and the field.
class PEFTConfigReader {
public:
  explicit PEFTConfigReader(StringRef path) {
    config.origin = "'" + path.str() + "'";
  }

  llvm::Error read(const llvm::json::Object &json);
  LoRAConfig take() { return std::move(config); }

private:
  llvm::Error fail(const llvm::Twine &what) const {
    return llvm::createStringError(config.origin + ": " + what);
  }
  llvm::Error notSupported(StringRef field, const llvm::Twine &what) const {
    return fail(field + ": " + what + " is not supported");
  }
  /// A list of strings, or one string (`isString`).
  llvm::Error strings(StringRef field, const llvm::json::Value &v,
                      std::vector<std::string> &out, bool &isString) const;
  llvm::Error checkRegex(StringRef field, StringRef pattern) const;

  llvm::Error readField(StringRef key, const llvm::json::Value &value);
  /// r, lora_alpha, use_rslora, lora_dropout, bias, init_lora_weights.
  llvm::Error readScalar(StringRef key, const llvm::json::Value &value,
                         bool &known);
  /// target_modules, exclude_modules, layers_to_transform,
  /// layers_pattern, modules_to_save.
  llvm::Error readModules(StringRef key, const llvm::json::Value &value,
                          bool &known);
  llvm::Error readTargets(const llvm::json::Value &value);
  /// rank_pattern, alpha_pattern.
  llvm::Error readPatterns(StringRef key, const llvm::json::Object &patterns);

  LoRAConfig config;
  std::optional<int64_t> rank;
  std::optional<double> alpha;
  bool sawTargets = false;
};

llvm::Error PEFTConfigReader::strings(StringRef field,
                                      const llvm::json::Value &v,
                                      std::vector<std::string> &out,
                                      bool &isString) const {
  isString = false;
  if (std::optional<StringRef> s = v.getAsString()) {
    out.push_back(s->str());
    isString = true;
    return llvm::Error::success();
  }
  const llvm::json::Array *list = v.getAsArray();
  if (!list)
    return fail(field + " must be a string or a list of strings");
  for (const llvm::json::Value &item : *list) {
    std::optional<StringRef> s = item.getAsString();
    if (!s)
      return fail(field + " holds a non-string");
    out.push_back(s->str());
  }
  return llvm::Error::success();
}

llvm::Error PEFTConfigReader::checkRegex(StringRef field,
                                         StringRef pattern) const {
  if (llvm::Expected<std::string> posix = pythonRegexToPOSIX(pattern); !posix)
    return fail(field + ": " + llvm::toString(posix.takeError()));
  return llvm::Error::success();
}

llvm::Error PEFTConfigReader::read(const llvm::json::Object &json) {
  for (const auto &[key, value] : json)
    if (llvm::Error e = readField(key, value))
      return e;
  if (!rank)
    return fail("r must be a positive integer");
  config.rank = *rank;
  config.alpha = alpha.value_or(8); // PEFT's default lora_alpha
  if (!sawTargets)
    return fail("no target_modules");
  return llvm::Error::success();
}

llvm::Error PEFTConfigReader::readField(StringRef key,
                                        const llvm::json::Value &value) {
  bool isNull = value.kind() == llvm::json::Value::Null;
  bool known = true;
  if (llvm::Error e = readScalar(key, value, known); e || known)
    return e;
  known = true;
  if (llvm::Error e = readModules(key, value, known); e || known)
    return e;
  if (key == "peft_type") {
    if (value.getAsString() != StringRef("LORA"))
      return fail("peft_type is not LORA");
  } else if (key == "task_type") {
    if (!isNull && value.getAsString() != StringRef("CAUSAL_LM"))
      return notSupported(key, "a task other than CAUSAL_LM");
  } else if (llvm::is_contained({"auto_mapping", "peft_version",
                                 "base_model_name_or_path", "revision",
                                 "inference_mode", "megatron_core",
                                 "qalora_group_size", "fan_in_fan_out"},
                                key)) {
    // Provenance, or settings of features that are off (checked below).
    // fan_in_fan_out: only GPT-2's Conv1D stores weights transposed; on
    // nn.Linear, PEFT resets it to false, and the factors are saved as
    // usual.
  } else if (key == "rank_pattern" || key == "alpha_pattern") {
    if (isNull)
      return llvm::Error::success();
    const llvm::json::Object *patterns = value.getAsObject();
    if (!patterns)
      return fail(key + " must be an object");
    return readPatterns(key, *patterns);
  } else if (const auto *off =
                 llvm::find_if(kUnsupportedUnlessOff,
                               [&](const auto &f) { return f.first == key; });
             off != std::end(kUnsupportedUnlessOff)) {
    // PEFT's default for the features tp-opt does not implement: null,
    // false, or an empty object or list.
    bool isOff = isNull || value.getAsBoolean() == false;
    if (const llvm::json::Object *o = value.getAsObject())
      isOff = o->empty();
    if (const llvm::json::Array *a = value.getAsArray())
      isOff = a->empty();
    if (!isOff)
      return notSupported(key, off->second);
  } else {
    return fail("unknown field '" + key +
                "' (not a field of peft 0.21's LoraConfig)");
  }
  return llvm::Error::success();
}

llvm::Error PEFTConfigReader::readScalar(StringRef key,
                                         const llvm::json::Value &value,
                                         bool &known) {
  bool isNull = value.kind() == llvm::json::Value::Null;
  if (key == "r") {
    rank = value.getAsInteger();
    if (!rank || *rank < 1)
      return fail("r must be a positive integer");
  } else if (key == "lora_alpha") {
    alpha = value.getAsNumber();
    if (!alpha)
      return fail("lora_alpha must be a number");
  } else if (key == "use_rslora") {
    if (!isNull && !value.getAsBoolean())
      return fail("use_rslora must be true or false");
    config.useRslora = value.getAsBoolean().value_or(false);
  } else if (key == "lora_dropout") {
    if (!isNull && !value.getAsNumber())
      return fail("lora_dropout must be a number");
    config.dropout = value.getAsNumber().value_or(0);
  } else if (key == "lora_bias") {
    config.loraBias = value.getAsBoolean().value_or(false);
  } else if (key == "bias") {
    std::optional<StringRef> b = value.getAsString();
    if (!b || !llvm::is_contained({"none", "all", "lora_only"}, *b))
      return fail("bias must be \"none\", \"all\" or \"lora_only\"");
    config.bias = b->str();
  } else if (key == "init_lora_weights") {
    if (std::optional<bool> b = value.getAsBoolean()) {
      config.initLoraWeights = *b ? "true" : "false";
    } else if (value.getAsString() == StringRef("gaussian")) {
      config.initLoraWeights = "gaussian";
    } else {
      std::string what = value.getAsString().value_or("?").str();
      return notSupported(
          key, "'" + what +
                   "' (initializations other than true, false and "
                   "gaussian; PiSSA, OLoRA, CorDA and LoftQ also change "
                   "the base weights)");
    }
  } else {
    known = false;
  }
  return llvm::Error::success();
}

llvm::Error PEFTConfigReader::readModules(StringRef key,
                                          const llvm::json::Value &value,
                                          bool &known) {
  bool isNull = value.kind() == llvm::json::Value::Null;
  bool isString;
  if (key == "target_modules")
    return readTargets(value);
  if (!llvm::is_contained({"exclude_modules", "layers_to_transform",
                           "layers_pattern", "modules_to_save"},
                          key)) {
    known = false;
    return llvm::Error::success();
  }
  if (isNull)
    return llvm::Error::success();
  if (key == "exclude_modules") {
    if (llvm::Error e =
            strings(key, value, config.exclude, config.excludeIsRegex))
      return e;
    if (config.excludeIsRegex)
      return checkRegex(key, config.exclude.front());
  } else if (key == "layers_to_transform") {
    if (std::optional<int64_t> layer = value.getAsInteger()) {
      config.layers.push_back(*layer);
    } else if (const llvm::json::Array *list = value.getAsArray()) {
      for (const llvm::json::Value &item : *list) {
        std::optional<int64_t> layer = item.getAsInteger();
        if (!layer)
          return fail("layers_to_transform holds a non-integer");
        config.layers.push_back(*layer);
      }
    } else {
      return fail("layers_to_transform must be an integer or a list");
    }
  } else if (key == "layers_pattern") {
    if (llvm::Error e = strings(key, value, config.layersPattern, isString))
      return e;
    for (const std::string &p : config.layersPattern)
      if (llvm::Error e = checkRegex(key, p))
        return e;
  } else {
    return strings(key, value, config.modulesToSave, isString);
  }
  return llvm::Error::success();
}

llvm::Error PEFTConfigReader::readTargets(const llvm::json::Value &value) {
  if (value.kind() == llvm::json::Value::Null)
    return fail("no target_modules");
  sawTargets = true;
  bool isString;
  if (llvm::Error e =
          strings("target_modules", value, config.targets, isString))
    return e;
  if (isString &&
      StringRef(config.targets.front()).equals_insensitive("all-linear")) {
    config.targetKind = LoRAConfig::Targets::AllLinear;
    config.targets.clear();
  } else if (isString) {
    config.targetKind = LoRAConfig::Targets::Regex;
    return checkRegex("target_modules", config.targets.front());
  } else {
    config.targetKind = LoRAConfig::Targets::Names;
    if (config.targets.empty())
      return fail("target_modules is empty");
  }
  return llvm::Error::success();
}

llvm::Error PEFTConfigReader::readPatterns(StringRef key,
                                           const llvm::json::Object &patterns) {
  for (const auto &[pattern, v] : patterns) {
    if (llvm::Error e = checkRegex(key, pattern))
      return e;
    if (key == "rank_pattern") {
      std::optional<int64_t> r = v.getAsInteger();
      if (!r || *r < 1)
        return fail("rank_pattern '" + pattern.str() +
                    "' must map to a positive integer");
      config.rankPattern.push_back({pattern.str(), *r});
    } else {
      std::optional<double> a = v.getAsNumber();
      if (!a)
        return fail("alpha_pattern '" + pattern.str() +
                    "' must map to a number");
      config.alphaPattern.push_back({pattern.str(), *a});
    }
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<LoRAConfig> mlir::tp::readPEFTConfig(StringRef path) {
  llvm::Expected<llvm::json::Object> json = readJSONObject(path);
  if (!json)
    return json.takeError();
  PEFTConfigReader reader(path);
  if (llvm::Error e = reader.read(*json))
    return std::move(e);
  return reader.take();
}
