//===- LoRASurgery.cpp - LoRA branches added to a program's linears -------===//
//
// A targeted linear `y = x W^T` becomes `y + ((x A^T) * scale) B^T` (plus
// lora_B's scaled bias with lora_bias), with lora_A and lora_B new
// parameters read from the adapter when one is given. PEFT's adapters also
// replace the base tensors they trained.
//
//===----------------------------------------------------------------------===//

#include "LoRASurgery.h"

#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Plan/LoRAAdapter.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::plan;

std::string mlir::tp::plan::moduleOf(StringRef fqn) {
  StringRef module = fqn.rsplit('.').first;
  if (module.ends_with(".lora_A") || module.ends_with(".lora_B"))
    module = module.drop_back(7);
  return module.str();
}

bool mlir::tp::plan::isLoRAFactor(StringRef fqn) {
  return fqn.ends_with(".lora_A.weight") || fqn.ends_with(".lora_B.weight");
}

namespace {

using AdapterEntry = llvm::StringMapEntry<SafetensorsTensor>;

/// One run of insertLoRA: the configuration, the adapter's tensors and the
/// function the branches go into.
class LoRAInserter {
public:
  LoRAInserter(func::FuncOp func, const LoRAOptions &options,
               LoRABranches &branches)
      : func(func), options(options), branches(branches),
        ctx(func.getContext()), builder(ctx) {}

  LogicalResult run();

private:
  /// PEFT's configuration (lora-adapter) or the lora-* options.
  FailureOr<LoRAConfig> readConfig();
  /// Reads the adapter's safetensors index, if there is an adapter.
  LogicalResult openAdapter();
  SourceAttr sourceOf(const AdapterEntry &entry) const {
    return SourceAttr::get(ctx, entry.getKey(), adapterPath,
                           entry.second.offset, entry.second.length, false,
                           /*stored_type=*/Type(),
                           /*stored_offset=*/FloatAttr(),
                           StoredForm::Parameter);
  }
  /// The adapter tensor of a new parameter, checked against its shape;
  /// `type` takes the tensor's float type (an adapter may be saved in
  /// another type than its base model).
  FailureOr<SourceAttr> sourceFor(Operation *at, const AdapterEntry *entry,
                                  const Twine &what, RankedTensorType &type,
                                  int64_t rank);
  /// A new parameter argument named `fqn`; null when it cannot be added.
  Value addParam(Operation *at, const Twine &fqn, RankedTensorType type,
                 SourceAttr source);
  /// The branch of one linear of `module`.
  LogicalResult addBranch(LinearOp linear, StringRef module,
                          const LoRAConfig::ModuleLoRA &lora);
  /// PEFT saves the base tensors an adapter trained (biases under `bias`,
  /// modules_to_save copies) and loads them over the model's: those
  /// parameters read the adapter's tensors instead.
  LogicalResult replaceBaseTensors();
  /// What the adapter holds but the program does not use.
  LogicalResult checkEveryTensorUsed();

  func::FuncOp func;
  const LoRAOptions &options;
  LoRABranches &branches;
  MLIRContext *ctx;
  OpBuilder builder;
  LoRAConfig config;
  bool fromPEFT = false;
  SmallString<256> adapterPath;
  std::optional<llvm::StringMap<SafetensorsTensor>> adapter;
};

FailureOr<LoRAConfig> LoRAInserter::readConfig() {
  if (options.adapterDir.empty()) {
    if (options.rank < 1)
      return func.emitError()
             << "lora-rank must be positive, got " << options.rank;
    return LoRAConfig::fromOptions(options.rank, options.alpha,
                                   options.targets);
  }
  SmallString<256> path(options.adapterDir);
  llvm::sys::path::append(path, "adapter_config.json");
  llvm::Expected<LoRAConfig> read = readPEFTConfig(path);
  if (!read)
    return func.emitError()
           << "lora-adapter: " << llvm::toString(read.takeError());
  return std::move(*read);
}

LogicalResult LoRAInserter::openAdapter() {
  fromPEFT = !options.adapterDir.empty();
  adapterPath = options.weights;
  if (fromPEFT) {
    adapterPath = options.adapterDir;
    llvm::sys::path::append(adapterPath, "adapter_model.safetensors");
  }
  if (adapterPath.empty())
    return success();
  llvm::Expected<llvm::StringMap<SafetensorsTensor>> index =
      readSafetensorsIndex(adapterPath);
  if (!index)
    return func.emitError() << (fromPEFT ? "lora-adapter: " : "lora-weights: ")
                            << llvm::toString(index.takeError());
  adapter = std::move(*index);
  llvm::sys::fs::make_absolute(adapterPath);
  return success();
}

FailureOr<SourceAttr> LoRAInserter::sourceFor(Operation *at,
                                              const AdapterEntry *entry,
                                              const Twine &what,
                                              RankedTensorType &type,
                                              int64_t rank) {
  if (!entry)
    return at->emitError() << "lora-weights '" << adapterPath << "': no "
                           << what;
  const SafetensorsTensor &t = entry->second;
  Type stored = t.dtype == "F32"    ? Type(builder.getF32Type())
                : t.dtype == "BF16" ? Type(builder.getBF16Type())
                : t.dtype == "F16"  ? Type(builder.getF16Type())
                                    : Type();
  if (!stored || ArrayRef<int64_t>(t.shape) != type.getShape()) {
    InFlightDiagnostic d = at->emitError()
                           << "lora-weights '" << adapterPath << "': tensor '"
                           << entry->getKey() << "' is " << t.dtype << " [";
    llvm::interleaveComma(t.shape, d);
    d << "], expected F32, BF16 or F16 [";
    llvm::interleaveComma(type.getShape(), d);
    return d << "] (lora-rank " << rank << ")";
  }
  type = RankedTensorType::get(type.getShape(), stored);
  return sourceOf(*entry);
}

Value LoRAInserter::addParam(Operation *at, const Twine &fqn,
                             RankedTensorType type, SourceAttr source) {
  NamedAttrList attrs;
  attrs.set(TPDialect::kFqnAttrName, builder.getStringAttr(fqn));
  if (source)
    attrs.set(TPDialect::kSourceAttrName, source);
  unsigned index = func.getNumArguments();
  if (failed(func.insertArgument(index, type, attrs.getDictionary(ctx),
                                 at->getLoc())))
    return Value();
  return func.getArgument(index);
}

LogicalResult LoRAInserter::addBranch(LinearOp linear, StringRef module,
                                      const LoRAConfig::ModuleLoRA &lora) {
  RankedTensorType wType = linear.getWeight().getType();
  Type elementType = wType.getElementType();
  int64_t rank = lora.rank;
  Value factors[2];
  static constexpr StringRef kFactors[] = {"lora_A", "lora_B"};
  for (auto [i, factor] : llvm::enumerate(kFactors)) {
    auto type = RankedTensorType::get(
        i == 0 ? ArrayRef<int64_t>{rank, wType.getDimSize(1)}
               : ArrayRef<int64_t>{wType.getDimSize(0), rank},
        elementType);
    SourceAttr source;
    if (adapter) {
      std::string lookedFor;
      for (const std::string &name : adapterNamesOf(module))
        lookedFor += (lookedFor.empty() ? "'" : " and '") +
                     ("base_model.model." + name + "." + factor +
                      ".weight' and '" + name + "." + factor + ".weight'")
                         .str();
      FailureOr<SourceAttr> found =
          sourceFor(linear, findLoRAFactor(*adapter, module, factor),
                    Twine(factor) + " for '" + module + "' (looked for " +
                        lookedFor + ")",
                    type, rank);
      if (failed(found))
        return failure();
      source = *found;
    }
    factors[i] =
        addParam(linear, module + "." + factor + ".weight", type, source);
    if (!factors[i])
      return failure();
  }
  Value bias;
  if (config.loraBias) {
    auto type = RankedTensorType::get({wType.getDimSize(0)}, elementType);
    FailureOr<SourceAttr> found = sourceFor(
        linear, findLoRAFactor(*adapter, module, "lora_B", "bias"),
        "lora_B bias for '" + module + "' (lora_bias: true)", type, rank);
    if (failed(found))
      return failure();
    bias = addParam(linear, module + ".lora_B.bias", type, *found);
    if (!bias)
      return failure();
  }
  auto xType = cast<RankedTensorType>(linear.getX().getType());
  SmallVector<int64_t> shape(xType.getShape());
  shape.back() = rank;
  Location loc = linear.getLoc();
  builder.setInsertionPointAfter(linear);
  // The branch is in its linear's decoder layer.
  DecoderLayerListener layer;
  layer.layer = decoderLayerOf(linear);
  builder.setListener(&layer);
  auto restore = llvm::make_scope_exit([&] { builder.setListener(nullptr); });
  auto down = LinearOp::create(
      builder, loc, RankedTensorType::get(shape, xType.getElementType()),
      linear.getX(), factors[0], Value(), LinearFormAttr());
  FloatAttr scale = builder.getF64FloatAttr(lora.scale);
  auto scaled = ScaleOp::create(builder, loc, down.getResult(), scale);
  auto up = LinearOp::create(builder, loc, linear.getResult().getType(),
                             scaled.getResult(), factors[1], Value(),
                             LinearFormAttr());
  auto sum = AddOp::create(builder, loc, linear.getResult(), up.getResult());
  Value output = sum.getResult();
  if (bias) {
    // PEFT scales lora_B's output, bias included. Added to the whole
    // module output (after its layout annotation), so once per token.
    auto scaledBias = ScaleOp::create(builder, loc, bias, scale);
    output = BiasAddOp::create(builder, loc, output, scaledBias);
  }
  linear.getResult().replaceAllUsesExcept(output, sum);
  branches.byBase[linear] = {down, up, sum, bias};
  branches.baseOfSum[sum] = linear;
  branches.a.insert(down);
  branches.b.insert(up);
  return success();
}

LogicalResult LoRAInserter::replaceBaseTensors() {
  // A parameter by each name an adapter may give it.
  llvm::StringMap<BlockArgument> byFqn;
  for (BlockArgument arg : func.getArguments())
    if (auto fqn = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     TPDialect::kFqnAttrName))
      for (const std::string &name : adapterNamesOf(fqn.getValue()))
        byFqn.try_emplace(name, arg);
  for (const auto &entry : *adapter) {
    std::string replaced = replacedParameter(entry.getKey());
    if (replaced.empty())
      continue;
    auto it = byFqn.find(replaced);
    if (it == byFqn.end())
      continue; // reported as unused
    BlockArgument arg = it->second;
    auto type = cast<RankedTensorType>(arg.getType());
    const SafetensorsTensor &t = entry.second;
    if (t.dtype != "F32" || ArrayRef<int64_t>(t.shape) != type.getShape()) {
      InFlightDiagnostic d = func.emitError()
                             << "lora-adapter '" << options.adapterDir
                             << "': tensor '" << entry.getKey()
                             << "' replaces parameter '" << replaced << "' "
                             << type << ", but is " << t.dtype << " [";
      llvm::interleaveComma(t.shape, d);
      return d << "]";
    }
    func.setArgAttr(arg.getArgNumber(), TPDialect::kSourceAttrName,
                    sourceOf(entry));
  }
  return success();
}

LogicalResult LoRAInserter::checkEveryTensorUsed() {
  // DoRA and embedding LoRA would change the result; with PEFT's
  // configuration, any tensor PEFT loads would.
  llvm::StringSet<> used;
  for (BlockArgument arg : func.getArguments())
    if (auto source = func.getArgAttrOfType<SourceAttr>(
            arg.getArgNumber(), TPDialect::kSourceAttrName))
      if (source.getFile() == adapterPath)
        used.insert(source.getInitializer());
  SmallVector<StringRef> unused;
  for (const auto &entry : *adapter) {
    StringRef key = entry.getKey();
    if (key.contains("lora_magnitude") || key.contains("lora_embedding"))
      return func.emitError()
             << "lora-weights '" << adapterPath << "': tensor '" << key
             << "' is DoRA or embedding LoRA, which is not supported";
    if (!used.contains(key))
      unused.push_back(key);
  }
  if (unused.empty())
    return success();
  llvm::sort(unused);
  if (fromPEFT)
    return func.emitError()
           << "lora-adapter '" << options.adapterDir << "': " << unused.size()
           << " tensors that PEFT would load are not used (first: '"
           << unused.front()
           << "'): the configuration does not describe this file, or it "
              "adapts what tp-opt does not (a non-linear module, a Mamba2 "
              "mixer projection, a copy of a tied lm_head)";
  func.emitWarning() << "lora-weights '" << adapterPath
                     << "': " << unused.size() << " tensors adapt no targeted "
                     << "linear (first: '" << unused.front() << "')";
  return success();
}

LogicalResult LoRAInserter::run() {
  FailureOr<LoRAConfig> read = readConfig();
  if (failed(read) || failed(openAdapter()))
    return failure();
  config = std::move(*read);
  SmallVector<LinearOp> linears;
  func.walk([&](LinearOp linear) { linears.push_back(linear); });
  for (LinearOp linear : linears) {
    auto w = dyn_cast<BlockArgument>(linear.getWeight());
    auto fqn = w ? func.getArgAttrOfType<StringAttr>(w.getArgNumber(),
                                                     TPDialect::kFqnAttrName)
                 : StringAttr();
    if (!fqn)
      continue;
    std::string module = moduleOf(fqn.getValue());
    bool isOutput = module == "lm_head" || reachesReturn(linear);
    llvm::Expected<std::optional<LoRAConfig::ModuleLoRA>> lora =
        config.lookup(module, isOutput);
    if (!lora)
      return linear.emitError() << llvm::toString(lora.takeError());
    if (*lora && failed(addBranch(linear, module, **lora)))
      return failure();
  }
  if (branches.byBase.empty())
    func.emitWarning() << config.origin << " match no linear";
  if (!adapter)
    return success();
  if (fromPEFT && failed(replaceBaseTensors()))
    return failure();
  return checkEveryTensorUsed();
}

} // namespace

LogicalResult mlir::tp::plan::insertLoRA(func::FuncOp func,
                                         const LoRAOptions &options,
                                         LoRABranches &branches) {
  return LoRAInserter(func, options, branches).run();
}
