//===- Config.cpp - the configuration and architecture of a raised graph --===//
//
// What the raised program shows of the model's HF configuration (sizes,
// epsilons, RoPE bases, sliding windows, block types) becomes the module's
// `tp.config`; the architecture is the registry's reading of the traits the
// graph shows (include/tpopt/Plan/Architecture.h).
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"

#include "tpopt/Dialect/TP/ModelConfig.h"
#include "tpopt/Plan/Architecture.h"

#include <set>

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

namespace {

/// Reads one raised function into `tp.config` entries.
class ConfigReader {
public:
  explicit ConfigReader(func::FuncOp func) : func(func) {}

  LogicalResult read();
  const ModelConfig &getConfig() const { return config; }

private:
  StringRef fqnOf(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      if (auto fqn = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       TPDialect::kFqnAttrName))
        return fqn.getValue();
    return "";
  }
  void countLayers();
  void readAttention(AttentionOp att);
  void readDecoder();
  void readBlockTypes();
  LogicalResult readArchitecture();

  func::FuncOp func;
  ModelConfig config;
  ArchitectureTraits traits;
  bool tied = false;
  std::vector<std::string> layerTypes, blockTypes;
};

void ConfigReader::countLayers() {
  std::set<int64_t> layers;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto fqn = func.getArgAttrOfType<StringAttr>(i, TPDialect::kFqnAttrName);
    if (!fqn)
      continue;
    StringRef rest = fqn.getValue();
    traits.backboneNames |= rest.starts_with("backbone.");
    size_t pos = rest.find("layers.");
    if (pos == StringRef::npos)
      continue;
    int64_t layer;
    if (!rest.drop_front(pos + 7).split('.').first.getAsInteger(10, layer))
      layers.insert(layer);
  }
  config.numHiddenLayers = layers.size();
}

void ConfigReader::readAttention(AttentionOp att) {
  if (!config.numAttentionHeads) {
    config.numAttentionHeads = att.getNumHeads();
    config.numKeyValueHeads = att.getNumKvHeads();
    config.headDim = att.getHeadDim();
  }
  std::optional<int64_t> window = att.getSlidingWindow();
  layerTypes.push_back(window ? "sliding_attention" : "full_attention");
  if (window)
    config.slidingWindow = *window;
  if (auto rot = att.getQ().getDefiningOp<RotaryOp>()) {
    ModelConfig::Float &theta =
        window ? config.ropeLocalBaseFreq : config.ropeTheta;
    if (!theta)
      theta = rot.getTheta().convertToDouble();
    if (std::optional<StringRef> type = rot.getRopeType();
        type && !config.ropeType) {
      config.ropeType = type->str();
      // LongRoPE has per-pair factors instead.
      if (std::optional<APFloat> factor = rot.getFactor())
        config.ropeFactor = factor->convertToDouble();
    }
  }
}

void ConfigReader::readDecoder() {
  Value embedTable;
  func.walk([&](Operation *op) {
    if (auto emb = dyn_cast<EmbeddingOp>(op)) {
      auto table = emb.getTable().getType();
      config.vocabSize = table.getDimSize(0);
      config.hiddenSize = table.getDimSize(1);
      embedTable = emb.getTable();
      traits.embeddingScale |= llvm::any_of(
          emb->getUsers(), [](Operation *u) { return isa<ScaleOp>(u); });
    } else if (auto att = dyn_cast<AttentionOp>(op)) {
      readAttention(att);
    } else if (auto norm = dyn_cast<RmsNormOp>(op)) {
      if (norm.getGroupSizeAttr())
        traits.qkNorm = true;
      else if (!config.rmsNormEps)
        config.rmsNormEps = norm.getEpsilon().convertToDouble();
      traits.normWeightOffset |= norm.getWeightOffset().convertToDouble() != 0;
    } else if (auto lin = dyn_cast<LinearOp>(op)) {
      StringRef fqn = fqnOf(lin.getWeight());
      if (fqn.ends_with("q_proj.weight") && lin.getBias())
        traits.attentionBias = true;
      if (fqn.ends_with("o_proj.weight") && lin.getBias())
        traits.outputProjectionBias = true;
      if ((fqn.ends_with(".gate_proj.weight") ||
           fqn.ends_with(".up_proj.weight")) &&
          !config.intermediateSize)
        config.intermediateSize = lin.getWeight().getType().getDimSize(0);
      // The output projection reading the embedding table (before any
      // soft-capping of the logits): tied.
      if (embedTable && lin.getWeight() == embedTable && reachesReturn(lin))
        tied = true;
    }
  });
}

/// NemotronH's hybrid pattern: which layers are Mamba, attention or MLP.
void ConfigReader::readBlockTypes() {
  func.walk([&](Operation *op) {
    if (auto m = dyn_cast<Mamba2MixerOp>(op)) {
      blockTypes.push_back("mamba");
      config.mambaNumHeads = m.getNumHeads();
      config.mambaHeadDim = m.getHeadDim();
      config.nGroups = m.getNGroups();
      config.ssmStateSize = m.getStateSize();
      config.convKernel = m.getConvKernel();
      traits.mamba = true;
    } else if (isa<AttentionOp>(op)) {
      blockTypes.push_back("attention");
    } else if (isa<ReluSquaredOp>(op)) {
      blockTypes.push_back("mlp");
    }
  });
}

LogicalResult ConfigReader::readArchitecture() {
  const Architecture &arch = recognizeArchitecture(traits);
  if (tied && !arch.tiedEmbeddings)
    return func.emitError() << "the graph ties lm_head to the embedding, "
                               "which "
                            << arch.name << " does not";
  if (traits.qkNorm && !arch.perHeadNorms)
    return func.emitError() << "the graph has per-head q/k norms, which "
                            << arch.name << " does not";
  config.architecture = arch.name.str();
  return success();
}

LogicalResult ConfigReader::read() {
  countLayers();
  readDecoder();
  readBlockTypes();
  if (failed(readArchitecture()))
    return failure();
  if (traits.mamba)
    config.layersBlockType = blockTypes;
  // One theta for all layers is rope_theta, whatever their kind.
  if (!config.ropeTheta && config.ropeLocalBaseFreq) {
    config.ropeTheta = config.ropeLocalBaseFreq;
    config.ropeLocalBaseFreq.reset();
  }
  if (config.slidingWindow)
    config.layerTypes = layerTypes;
  config.tieWordEmbeddings = tied;
  config.attentionBias = traits.attentionBias;
  config.qkNorm = traits.qkNorm;
  return success();
}

} // namespace

/// An architecture whose norms scale by `1 + w` (Gemma) exported with the
/// sum folded into the stored weight (TorchScript's constant folding, the
/// dynamo exporter): the norm shows no offset and its parameter holds
/// `w + 1`. The parameter becomes `w` again, read from those bytes minus 1
/// (`stored_offset`), and the norm gets its offset back: the forward is the
/// same, and training, weight decay and checkpoints see the HF parameter.
static void unfoldNormOffsets(func::FuncOp func, const ModelConfig &config) {
  const Architecture *arch =
      config.architecture ? lookupArchitecture(*config.architecture) : nullptr;
  if (!arch || !arch->offsetNorms)
    return;
  func.walk([&](RmsNormOp norm) {
    auto arg = dyn_cast<BlockArgument>(norm.getWeight());
    if (norm.getWeightOffset().convertToDouble() != 0.0 || !arg ||
        arg.getOwner() != &func.getBody().front())
      return;
    unsigned index = arg.getArgNumber();
    auto source =
        func.getArgAttrOfType<SourceAttr>(index, TPDialect::kSourceAttrName);
    // A weight another op also reads is not the norm's alone to change.
    if (!source || !arg.hasOneUse())
      return;
    func.setArgAttr(
        index, TPDialect::kSourceAttrName,
        SourceAttr::get(func.getContext(), source.getInitializer(),
                        source.getFile(), source.getOffset(),
                        source.getLength(), source.getTransposed(),
                        source.getStoredType(),
                        FloatAttr::get(Float64Type::get(func.getContext()),
                                       source.getStoredOffsetValue() + 1.0),
                        source.getStoredForm()));
    OpBuilder b(norm);
    norm.setWeightOffsetAttr(b.getF64FloatAttr(1.0));
  });
}

LogicalResult Raiser::recordConfig(ModuleOp module, func::FuncOp func) {
  ConfigReader reader(func);
  if (failed(reader.read()))
    return failure();
  reader.getConfig().write(module);
  unfoldNormOffsets(func, reader.getConfig());
  return success();
}
