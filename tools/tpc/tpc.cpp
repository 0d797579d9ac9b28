//===- tpc.cpp - the tp-opt compiler driver -------------------------------===//
//
//   tpc MODEL.onnx [--arch auto|llama|qwen2|qwen3|gemma3|nemotron_h]
//       [--hf-config config.json] [--tp N] [--plan P] [--async-tp] [--report]
//       [--emit mlir|cpp|exe] -o DIR
//
// Runs import, raising, (plans and partition as they come), lowering to
// EmitC, C++ emission and the host compiler. Leaves DIR/model.mlir (the tp
// program), DIR/model.cpp and DIR/model (the executable).
//
//===----------------------------------------------------------------------===//

#include "tpc-config.h"
#include "tpopt/Import/ONNXImporter.h"
#include "tpopt/Passes.h"
#include "tpopt/Plan/LoRAAdapter.h"
#include "tpopt/Registration/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include <map>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory tpcCategory("tpc options");
static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx>"),
                                      cl::cat(tpcCategory));
static cl::opt<std::string> outputDir("o", cl::Required,
                                      cl::desc("Output directory"),
                                      cl::cat(tpcCategory),
                                      cl::value_desc("DIR"));
static cl::opt<std::string>
    arch("arch", cl::init("auto"),
         cl::desc("Expected architecture: auto, llama, qwen2, qwen3, gemma3, "
                  "nemotron_h (auto accepts what raising detects)"),
         cl::cat(tpcCategory));
static cl::opt<std::string>
    hfConfig("hf-config",
             cl::desc("HuggingFace config.json to check the "
                      "detected configuration against"),
             cl::value_desc("config.json"), cl::cat(tpcCategory));
static cl::opt<int> tpSize("tp", cl::init(1), cl::desc("Tensor-parallel ranks"),
                           cl::cat(tpcCategory));
static cl::opt<bool> sp("sp", cl::desc("Sequence parallelism"),
                        cl::cat(tpcCategory));
static cl::opt<int> loraRank("lora-rank", cl::init(0),
                             cl::desc("LoRA rank (0: no LoRA)"),
                             cl::cat(tpcCategory));
static cl::opt<double> loraAlpha("lora-alpha", cl::init(32.0),
                                 cl::desc("LoRA alpha (scale alpha / rank)"),
                                 cl::cat(tpcCategory));
static cl::opt<std::string>
    loraWeights("lora-weights",
                cl::desc("The LoRA adapter (PEFT's adapter_model.safetensors)"),
                cl::value_desc("adapter.safetensors"), cl::cat(tpcCategory));
static cl::opt<std::string> loraAdapter(
    "lora-adapter",
    cl::desc("A PEFT adapter directory: rank, alpha and targets from its "
             "adapter_config.json, factors from adapter_model.safetensors"),
    cl::value_desc("dir"), cl::cat(tpcCategory));
static cl::opt<std::string> loraTargets(
    "lora-targets", cl::init("all-linear"),
    cl::desc("Linears with LoRA: all-linear or module names (q_proj,v_proj)"),
    cl::cat(tpcCategory));
static cl::opt<std::string>
    planName("plan", cl::init("auto"),
             cl::desc("TP plan: auto (the architecture's), llama, qwen2, "
                      "qwen3, gemma3, nemotron_h, default, hf:CONFIG.json "
                      "(transformers' base_model_tp_plan) or file:PLAN.json"),
             cl::cat(tpcCategory));
enum class Emit { Mlir, Cpp, Exe };
static cl::opt<Emit> emit(
    "emit", cl::init(Emit::Exe), cl::desc("What to produce"),
    cl::values(clEnumValN(Emit::Mlir, "mlir", "DIR/model.mlir"),
               clEnumValN(Emit::Cpp, "cpp", "DIR/model.mlir and model.cpp"),
               clEnumValN(Emit::Exe, "exe", "and the executable DIR/model")),
    cl::cat(tpcCategory));
static cl::opt<bool> asyncTP(
    "async-tp",
    cl::desc("Linears without their bias, then a bias add (the matmul next "
             "to its collective, as async tensor parallelism wants)"),
    cl::cat(tpcCategory));
static cl::opt<bool> report("report",
                            cl::desc("Write DIR/plan-report.md: placements, "
                                     "per-rank bytes, collectives per layer"),
                            cl::cat(tpcCategory));
static cl::opt<int> probeSeq("probe-seq", cl::init(32),
                             cl::desc("Sequence length of the raising probe"),
                             cl::cat(tpcCategory));

static LogicalResult writeFile(StringRef path,
                               function_ref<void(raw_ostream &)> write) {
  std::error_code ec;
  llvm::ToolOutputFile file(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "tpc: error: cannot write '" << path
                 << "': " << ec.message() << "\n";
    return failure();
  }
  write(file.os());
  file.keep();
  return success();
}

static LogicalResult compile(StringRef cpp, StringRef exe) {
  std::string include = std::string("-I") + TPC_RUNTIME_INCLUDE_DIR;
  std::string blasInclude = std::string("-I") + TPC_OPENBLAS_INCLUDE_DIR;
  std::string runtimeMain =
      std::string(TPC_RUNTIME_LIB_DIR) + "/libtprt_main.a";
  std::string runtime = std::string(TPC_RUNTIME_LIB_DIR) + "/libtprt.a";
  const char *cxxEnv = std::getenv("TPC_CXX");
  std::string cxx = cxxEnv ? cxxEnv : TPC_CXX;
  auto program = llvm::sys::findProgramByName(cxx);
  if (!program) {
    llvm::errs() << "tpc: error: cannot find the C++ compiler '" << cxx
                 << "'\n";
    return failure();
  }
  SmallVector<StringRef> args = {*program, "-std=c++17", "-O2", "-fopenmp",
                                 include, blasInclude, cpp, "-o", exe,
                                 runtimeMain, runtime, TPC_OPENBLAS_LIBRARY,
                                 // The OpenMP build, not the pthread one
                                 // the system alternative points at.
                                 TPC_OPENBLAS_RPATH};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(*program, args, std::nullopt, {}, 0, 0,
                                         &message);
  if (status != 0) {
    llvm::errs() << "tpc: error: the C++ compiler failed (status " << status
                 << ")" << (message.empty() ? "" : ": ") << message << "\n";
    return failure();
  }
  return success();
}

/// "model.layers.3.mlp.up_proj.weight" -> "layer 3"; others by module.
static std::string layerOf(StringRef fqn) {
  size_t pos = fqn.find("layers.");
  if (pos == StringRef::npos)
    return fqn.rsplit('.').first.str();
  return "layer " + fqn.drop_front(pos + 7).split('.').first.str();
}

/// The parameter whose op produced `v` (a collective's input); through a
/// sum, that of its first operand (a module's base linear under LoRA).
static StringRef producerParam(func::FuncOp func, Value v) {
  for (int depth = 0; depth < 4; ++depth) {
    Operation *op = v.getDefiningOp();
    if (!op || op->getNumOperands() == 0)
      return "";
    for (Value operand : op->getOperands())
      if (auto arg = dyn_cast<BlockArgument>(operand))
        if (auto fqn =
                func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tp.fqn"))
          return fqn.getValue();
    v = op->getOperand(0);
  }
  return "";
}

/// DIR/plan-report.md of a partitioned program; returns the summary line.
static std::string writeReport(ModuleOp module, StringRef path, int ranks) {
  auto func = module.lookupSymbol<func::FuncOp>("forward");
  std::string table, summary;
  llvm::raw_string_ostream os(table);
  uint64_t localBytes = 0, globalBytes = 0;
  int sharded = 0, replicated = 0;
  os << "| parameter | global shape | placement | class | plan key | bytes "
        "per rank |\n|---|---|---|---|---|---|\n";
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto fqn = func.getArgAttrOfType<StringAttr>(i, "tp.fqn");
    if (!fqn)
      continue;
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    auto dim = func.getArgAttrOfType<IntegerAttr>(i, "tp.shard_dim");
    auto shards = func.getArgAttrOfType<IntegerAttr>(i, "tp.shards");
    auto key = func.getArgAttrOfType<StringAttr>(i, "tp.plan_key");
    auto grad = func.getArgAttrOfType<StringAttr>(i, "tp.grad_reduction");
    SmallVector<int64_t> global(type.getShape());
    if (dim)
      global[dim.getInt()] *= shards.getInt();
    uint64_t bytes = type.getNumElements() *
                     (type.getElementType().getIntOrFloatBitWidth() / 8);
    localBytes += bytes;
    globalBytes += dim ? bytes * shards.getInt() : bytes;
    (dim ? sharded : replicated)++;
    os << "| `" << fqn.getValue() << "` | [";
    llvm::interleaveComma(global, os);
    auto replicas = func.getArgAttrOfType<IntegerAttr>(i, "tp.shard_replicas");
    std::string placement =
        dim ? "split(" + std::to_string(dim.getInt()) + ")" : "replicated";
    if (replicas && replicas.getInt() > 1)
      placement +=
          ", each block on " + std::to_string(replicas.getInt()) + " ranks";
    os << "] | " << placement << " | "
       << (dim ? std::string("sharded")
               : "replicated, grad " +
                     (grad ? grad.getValue().str() : std::string("mean")))
       << " | " << (key ? key.getValue() : "") << " | " << bytes << " |\n";
  }
  // Collectives per layer, in bytes per token (f32 activations).
  std::map<std::string, std::pair<int, uint64_t>> perLayer;
  int collectives = 0;
  func.walk([&](Operation *op) {
    StringRef kind =
        llvm::TypeSwitch<Operation *, StringRef>(op)
            .Case([](shard::AllReduceOp) { return "all_reduce"; })
            .Case([](shard::AllGatherOp) { return "all_gather"; })
            .Case([](shard::ReduceScatterOp) { return "reduce_scatter"; })
            .Default([](Operation *) { return ""; });
    if (kind.empty())
      return;
    auto type = cast<ShapedType>(op->getResult(0).getType());
    std::string layer = layerOf(producerParam(func, op->getOperand(0)));
    auto &entry = perLayer[kind.str() + ", " + layer];
    entry.first++;
    entry.second += type.getShape().back() * 4;
    collectives++;
  });
  os << "\n| collective, where | count | bytes per token |\n|---|---|---|\n";
  for (auto &[where, v] : perLayer)
    os << "| " << where << " | " << v.first << " | " << v.second << " |\n";
  summary = llvm::formatv("tp={0}: {1} parameters split, {2} replicated; "
                          "{3:F3} MiB of {4:F3} MiB of parameters per rank; "
                          "{5} collectives per forward pass",
                          ranks, sharded, replicated, localBytes / 1048576.0,
                          globalBytes / 1048576.0, collectives)
                .str();
  std::error_code ec;
  llvm::raw_fd_ostream file(path, ec);
  if (!ec)
    file << "# Plan report\n\n" << summary << "\n\n" << table;
  return summary;
}

static LogicalResult run(MLIRContext &context) {
  if (tpSize < 1) {
    llvm::errs() << "tpc: error: --tp must be at least 1\n";
    return failure();
  }
  if (asyncTP && !sp) {
    // AutoModel raises the same: async-TP fuses the matmuls with the
    // sequence all-gathers and reduce-scatters.
    llvm::errs() << "tpc: error: --async-tp requires sequence parallelism "
                    "(--sp)\n";
    return failure();
  }
  if (sp && tpSize < 2) {
    llvm::errs() << "tpc: error: --sp shards the sequence over the tensor-"
                    "parallel ranks: it needs --tp 2 or more\n";
    return failure();
  }
  if (!loraAdapter.empty()) {
    if (loraRank.getNumOccurrences() || loraAlpha.getNumOccurrences() ||
        loraWeights.getNumOccurrences() || loraTargets.getNumOccurrences()) {
      llvm::errs()
          << "tpc: error: --lora-adapter takes rank, alpha, targets "
             "and weights from the adapter; do not also give "
             "--lora-rank/--lora-alpha/--lora-weights/--lora-targets\n";
      return failure();
    }
    SmallString<256> config(loraAdapter), weights(loraAdapter);
    llvm::sys::path::append(config, "adapter_config.json");
    llvm::sys::path::append(weights, "adapter_model.safetensors");
    std::string error;
    std::optional<tp::LoRAConfig> lora = tp::readPEFTConfig(config, error);
    if (!lora) {
      llvm::errs() << "tpc: error: --lora-adapter: " << error << "\n";
      return failure();
    }
    loraRank = lora->rank;
    loraAlpha = lora->alpha;
    loraTargets = lora->targets;
    loraWeights = std::string(weights);
  }
  if (loraRank < 0 || (loraRank > 0) != !loraWeights.empty()) {
    llvm::errs() << "tpc: error: LoRA needs both --lora-rank R (positive) and "
                    "--lora-weights adapter_model.safetensors\n";
    return failure();
  }
  SmallString<256> absModel(modelPath);
  if (llvm::sys::fs::make_absolute(absModel)) {
    llvm::errs() << "tpc: error: cannot resolve '" << modelPath << "'\n";
    return failure();
  }
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir)) {
    llvm::errs() << "tpc: error: cannot create '" << outputDir
                 << "': " << ec.message() << "\n";
    return failure();
  }

  OwningOpRef<ModuleOp> module = tp::importONNXFile(absModel, &context);
  if (!module)
    return failure();

  PassManager raise(&context);
  tp::TPRaiseONNXOptions raiseOptions;
  raiseOptions.probeSeq = probeSeq;
  raise.addPass(tp::createTPRaiseONNX(raiseOptions));
  raise.addPass(tp::createTPVerifyParams());
  if (failed(raise.run(*module)))
    return failure();

  auto config = (*module)->getAttrOfType<DictionaryAttr>("tp.config");
  StringRef detected =
      config ? config.getAs<StringAttr>("architecture").getValue() : "";
  if (arch != "auto" && arch != detected) {
    llvm::errs() << "tpc: error: --arch " << arch << " but the graph is a "
                 << (detected.empty() ? "model of unknown architecture"
                                      : detected)
                 << "\n";
    return failure();
  }
  if (!hfConfig.empty()) {
    PassManager check(&context);
    tp::TPCheckHFConfigOptions options;
    options.path = hfConfig;
    check.addPass(tp::createTPCheckHFConfig(options));
    if (failed(check.run(*module)))
      return failure();
  }

  // Plan, linear forms (they read the plan's annotations), partition.
  // LoRA is added by the plan pass, so a tp=1 program with LoRA is a plan
  // on one rank.
  bool distributed = tpSize > 1 || loraRank > 0;
  PassManager distribute(&context);
  if (distributed) {
    tp::TPApplyPlanOptions planOptions;
    planOptions.plan = planName;
    planOptions.tp = tpSize;
    planOptions.sp = sp;
    planOptions.loraRank = loraRank;
    planOptions.loraAlpha = loraAlpha;
    planOptions.loraTargets = loraTargets;
    planOptions.loraWeights = loraWeights;
    distribute.addPass(tp::createTPApplyPlan(planOptions));
  }
  tp::TPLowerLinearOptions linearOptions;
  linearOptions.asyncTP = asyncTP;
  distribute.addNestedPass<func::FuncOp>(
      tp::createTPLowerLinear(linearOptions));
  if (distributed)
    distribute.addPass(tp::createTPPartition());
  if (failed(distribute.run(*module)))
    return failure();

  SmallString<256> mlirPath(outputDir), cppPath(outputDir), exePath(outputDir);
  llvm::sys::path::append(mlirPath, "model.mlir");
  llvm::sys::path::append(cppPath, "model.cpp");
  llvm::sys::path::append(exePath, "model");
  if (failed(writeFile(mlirPath, [&](raw_ostream &os) { module->print(os); })))
    return failure();
  if (report) {
    SmallString<256> reportPath(outputDir);
    llvm::sys::path::append(reportPath, "plan-report.md");
    llvm::outs() << writeReport(*module, reportPath, tpSize) << "\n";
  }
  if (emit == Emit::Mlir)
    return success();

  PassManager lower(&context);
  tp::TPToEmitCOptions lowerOptions;
  lowerOptions.modelPath = absModel.str().str();
  lower.addPass(tp::createTPToEmitC(lowerOptions));
  if (failed(lower.run(*module)))
    return failure();
  LogicalResult emitted = success();
  if (failed(writeFile(cppPath,
                       [&](raw_ostream &os) {
                         os << "// Generated by tpc from " << absModel << "\n";
                         emitted = emitc::translateToCpp(*module, os);
                       })) ||
      failed(emitted))
    return failure();
  if (emit == Emit::Cpp)
    return success();
  return compile(cppPath, exePath);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(tpcCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "tpc: compile an ONNX decoder LM for tensor-"
                              "parallel execution\n");
  DialectRegistry registry;
  tp::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // A diagnostic names its ONNX node or plan key; the whole module printed
  // after it would bury that.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  return failed(run(context)) ? 1 : 0;
}
