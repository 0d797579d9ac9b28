//===- LoRAAdapter.h - PEFT LoRA adapters -----------------------*- C++ -*-===//
//
// PEFT saves a LoRA adapter as adapter_config.json (LoraConfig) and
// adapter_model.safetensors (the factors, plus any base tensors the adapter
// trained: biases under `bias`, modules_to_save copies; see
// Support/Safetensors.h). LoRAConfig answers, with PEFT's own matching rules
// (peft 0.21 check_target_module_exists, get_pattern_key), which linears an
// adapter adapts and at what rank and scale. Every option is either
// implemented or refused by name (docs/tp.md has the table).
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PLAN_LORAADAPTER_H
#define TPOPT_PLAN_LORAADAPTER_H

#include "tpopt/Support/Safetensors.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::tp {

/// The names a module or parameter FQN may have in an adapter: itself and,
/// for NemotronH's `backbone.` names, the same under `model.`
/// (transformers builds its modules as `model.` and saves them, as NVIDIA's
/// checkpoints name them, as `backbone.`; PEFT names them as the model it
/// wrapped did).
llvm::SmallVector<std::string, 2> adapterNamesOf(llvm::StringRef fqn);

/// The LoRA tensor `<module>.<factor>.<param>` (factor "lora_A" or
/// "lora_B", param "weight" or "bias") in an adapter: PEFT's
/// "base_model.model." prefixed name, or the bare name, of each of the
/// module's adapterNamesOf. Returns the entry found, or nullptr.
const llvm::StringMapEntry<SafetensorsTensor> *
findLoRAFactor(const llvm::StringMap<SafetensorsTensor> &adapter,
               llvm::StringRef module, llvm::StringRef factor,
               llvm::StringRef param = "weight");

/// The model parameter an adapter tensor that is not a LoRA factor
/// replaces (PEFT saves trained biases as "<module>.base_layer.bias" and
/// modules_to_save copies as "<module>.<param>"), without the
/// "base_model.model." prefix; empty for a LoRA factor.
std::string replacedParameter(llvm::StringRef adapterKey);

/// A LoRA configuration: PEFT's LoraConfig, or tp-opt's own `lora-rank`,
/// `lora-alpha`, `lora-targets` options.
struct LoRAConfig {
  /// How target_modules selects linears.
  enum class Targets {
    /// PEFT's "all-linear": every linear but the output layer.
    AllLinear,
    /// A list: a module is targeted when its name is in the list, or ends
    /// with "." + an entry (then subject to layers_to_transform).
    Names,
    /// A string: a regular expression the whole module name must match.
    Regex,
    /// tp-opt's `lora-targets`: globs over the last name component.
    LastComponentGlobs,
  };

  int64_t rank = 0;
  double alpha = 0;
  bool useRslora = false;
  Targets targetKind = Targets::AllLinear;
  std::vector<std::string> targets;
  /// exclude_modules: a list (names or suffixes) or one regex.
  std::vector<std::string> exclude;
  bool excludeIsRegex = false;
  /// layers_to_transform / layers_pattern.
  std::vector<int64_t> layers;
  std::vector<std::string> layersPattern;
  /// rank_pattern / alpha_pattern: regex over the module name's tail.
  std::vector<std::pair<std::string, int64_t>> rankPattern;
  std::vector<std::pair<std::string, double>> alphaPattern;
  /// lora_B has a bias (scaled with the branch).
  bool loraBias = false;
  /// modules_to_save: modules whose names end with an entry are replaced
  /// by the adapter's trained copies and get no LoRA.
  std::vector<std::string> modulesToSave;
  /// "none", "all" or "lora_only": which base biases the adapter trained.
  std::string bias = "none";
  /// init_lora_weights as written ("true", "false", "gaussian"): how a
  /// training program initializes a fresh adapter.
  std::string initLoraWeights = "true";
  /// lora_dropout (training only).
  double dropout = 0;
  /// Where it came from, for diagnostics ("'DIR/adapter_config.json'" or
  /// "lora-targets").
  std::string origin;

  /// What PEFT puts on one linear.
  struct ModuleLoRA {
    int64_t rank;
    double alpha;
    /// alpha / rank, or alpha / sqrt(rank) with use_rslora.
    double scale;
  };

  /// tp-opt's options: `targets` is "all-linear" or comma-separated globs.
  static LoRAConfig fromOptions(int64_t rank, double alpha,
                                llvm::StringRef targets);

  /// Whether PEFT adapts linear `module` (`isOutputLayer`: the output
  /// projection, which all-linear leaves out), and with which rank and
  /// scale. An error when two rank_pattern or alpha_pattern keys match the
  /// module with different values (PEFT takes the first in file order,
  /// which a JSON object does not keep).
  llvm::Expected<std::optional<ModuleLoRA>> lookup(llvm::StringRef module,
                                                   bool isOutputLayer) const;

  /// Whether `module` is one of modules_to_save (PEFT: its name ends with
  /// an entry).
  bool isModuleToSave(llvm::StringRef module) const;
};

/// Reads PEFT's adapter_config.json. Every LoraConfig field is read; a
/// field tp-opt does not implement (DoRA, embedding or expert targets,
/// PiSSA-style initializations that change the base weights, ...) with a
/// value other than PEFT's default is an error naming the file and the
/// field, as is an unknown field.
llvm::Expected<LoRAConfig> readPEFTConfig(llvm::StringRef path);

/// Python `re` pattern to an llvm::Regex (extended POSIX) that matches the
/// whole of a name: `\d`, `\w`, `\s` and lazy quantifiers are translated
/// (laziness does not change whether a full match exists); constructs
/// POSIX lacks (`(?...)`, `\b`, back-references) are an error.
llvm::Expected<std::string> pythonRegexToPOSIX(llvm::StringRef pattern);

} // namespace mlir::tp

#endif // TPOPT_PLAN_LORAADAPTER_H
