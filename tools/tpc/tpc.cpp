//===- tpc.cpp - the tp-opt compiler driver -------------------------------===//
//
//   tpc MODEL.onnx [--arch auto|llama|qwen2|qwen3|gemma3|nemotron_h]
//       [PIPELINE OPTIONS] [--lora-adapter DIR] [--report]
//       [--weights CHECKPOINT] [--emit mlir|cpp|exe] -o DIR
//
// File handling around the compilation pipeline (lib/Pipeline): imports
// the model, runs the pipeline (whose options are tpc's flags: --tp, --sp,
// --plan, --lora-*, --hf-config, ...), writes DIR/model.mlir (the rank's tp
// program), DIR/model.cpp, and runs the host compiler for DIR/model.
//
//===----------------------------------------------------------------------===//

#include "tpc-config.h"
#include "tpopt/Dialect/TP/ModelConfig.h"
#include "tpopt/Distribute/PlanReport.h"
#include "tpopt/Import/ONNX/ONNXImporter.h"
#include "tpopt/Passes.h"
#include "tpopt/Pipeline/Pipeline.h"
#include "tpopt/Plan/Architecture.h"
#include "tpopt/Plan/HFConfig.h"
#include "tpopt/Plan/LoRAAdapter.h"
#include "tpopt/Registration/InitAll.h"
#include "tpopt/Support/Safetensors.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <optional>

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
static const std::string archHelp = "Expected architecture: auto, " +
                                    tp::getArchitectureNames() +
                                    " (auto accepts what raising detects)";
static cl::opt<std::string> arch("arch", cl::init("auto"), cl::desc(archHelp),
                                 cl::cat(tpcCategory));
enum class Emit { Mlir, Cpp, Exe };
static cl::opt<Emit> emit(
    "emit", cl::init(Emit::Exe), cl::desc("What to produce"),
    cl::values(clEnumValN(Emit::Mlir, "mlir", "DIR/model.mlir"),
               clEnumValN(Emit::Cpp, "cpp", "DIR/model.mlir and model.cpp"),
               clEnumValN(Emit::Exe, "exe", "and the executable DIR/model")),
    cl::cat(tpcCategory));
static cl::opt<bool> report("report",
                            cl::desc("Write DIR/plan-report.md: placements, "
                                     "per-rank bytes, collectives per layer"),
                            cl::cat(tpcCategory));
static cl::opt<std::string> weights(
    "weights",
    cl::desc("The checkpoint a graph-only export's parameters are read from "
             "(tools/tp-export): an HF model directory, its "
             "model.safetensors.index.json, or a safetensors file"),
    cl::cat(tpcCategory), cl::value_desc("CHECKPOINT"));
/// The pipeline's options, which are also tpc's flags (see main).
static tp::TPCompileOptions &options() {
  static tp::TPCompileOptions options;
  return options;
}

/// The files tpc writes into its output directory.
static constexpr const char *kOutputs[] = {"model.mlir", "model.cpp", "model",
                                           "plan-report.md"};

/// Outputs of an earlier run go first: a failing run must not leave an old
/// executable beside new IR.
static LogicalResult removeStaleOutputs(StringRef dir) {
  for (const char *name : kOutputs) {
    SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    if (std::error_code ec = llvm::sys::fs::remove(path)) {
      llvm::errs() << "tpc: error: cannot remove '" << path
                   << "': " << ec.message() << "\n";
      return failure();
    }
  }
  return success();
}

/// Moves `from` to `to` (a finished output into place).
static LogicalResult publish(StringRef from, StringRef to) {
  if (std::error_code ec = llvm::sys::fs::rename(from, to)) {
    llvm::errs() << "tpc: error: cannot write '" << to << "': " << ec.message()
                 << "\n";
    llvm::sys::fs::remove(from);
    return failure();
  }
  return success();
}

/// Writes `path` through a temporary name: it appears only when `write`
/// succeeded, never half written.
static LogicalResult
writeFile(StringRef path, function_ref<LogicalResult(raw_ostream &)> write) {
  std::string temp = (path + ".tmp").str();
  std::error_code ec;
  llvm::ToolOutputFile file(temp, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "tpc: error: cannot write '" << temp
                 << "': " << ec.message() << "\n";
    return failure();
  }
  if (failed(write(file.os())))
    return failure(); // the temporary is removed with `file`
  file.os().close();
  if (file.os().has_error()) {
    llvm::errs() << "tpc: error: cannot write '" << temp
                 << "': " << file.os().error().message() << "\n";
    file.os().clear_error();
    return failure();
  }
  file.keep();
  return publish(temp, path);
}

static LogicalResult compile(StringRef cpp, StringRef exe) {
  std::string include = std::string("-I") + TPC_RUNTIME_INCLUDE_DIR;
  std::string runtimeMain =
      std::string(TPC_RUNTIME_LIB_DIR) + "/libtprt_main.a";
  const char *cxxEnv = std::getenv("TPC_CXX");
  std::string cxx = cxxEnv ? cxxEnv : TPC_CXX;
  auto program = llvm::sys::findProgramByName(cxx);
  if (!program) {
    llvm::errs() << "tpc: error: cannot find the C++ compiler '" << cxx
                 << "'\n";
    return failure();
  }
  std::string tempExe = (exe + ".tmp").str();
  // -O0: the generated code is calls into the runtime (the layers one
  // loop), whose kernels are compiled optimized in libtprt.a. Optimizing
  // the calls gained nothing measurable on the medium Llama's forward
  // (docs/runtime.md, bench/compile).
  SmallVector<StringRef> args = {*program,   "-std=c++17", "-O0",
                                 "-fopenmp", include,      cpp,
                                 "-o",       tempExe,      runtimeMain};
  // The build's flag lists (tpc-config.h), space-separated.
  for (StringRef flags :
       {StringRef(TPC_RUNTIME_LINK), StringRef(TPC_GEMM_LINK),
        StringRef(TPC_SANITIZE_FLAGS), StringRef(TPC_CUDA_LINK)})
    flags.split(args, ' ', -1, /*KeepEmpty=*/false);
  std::string message;
  int status = llvm::sys::ExecuteAndWait(*program, args, std::nullopt, {}, 0, 0,
                                         &message);
  if (status != 0) {
    llvm::errs() << "tpc: error: the C++ compiler failed (status " << status
                 << ")" << (message.empty() ? "" : ": ") << message << "\n";
    llvm::sys::fs::remove(tempExe);
    return failure();
  }
  return publish(tempExe, exe);
}

/// The pipeline's option checks, and --arch.
static LogicalResult checkOptions(tp::TPCompileOptions &opts) {
  if (arch != "auto" && !tp::lookupArchitecture(arch)) {
    llvm::errs() << "tpc: error: --arch " << arch
                 << " is not an architecture tp-opt compiles (auto, "
                 << tp::getArchitectureNames() << ")\n";
    return failure();
  }
  if (llvm::Error e = tp::checkTPCompileOptions(opts)) {
    llvm::errs() << "tpc: error: " << llvm::toString(std::move(e)) << "\n";
    return failure();
  }
  return success();
}

/// --arch: the architecture raising detected, if the user named one.
static LogicalResult checkArchitecture(ModuleOp module) {
  FailureOr<tp::ModelConfig> config = tp::ModelConfig::read(module);
  if (failed(config))
    return failure();
  if (!config->architecture) {
    llvm::errs() << "tpc: error: raising recorded no architecture "
                    "(tp.config.architecture)\n";
    return failure();
  }
  if (arch != "auto" && arch != *config->architecture) {
    llvm::errs() << "tpc: error: --arch " << arch << " but the graph is a "
                 << *config->architecture << "\n";
    return failure();
  }
  return success();
}

static LogicalResult run(MLIRContext &context) {
  tp::TPCompileOptions &opts = options();
  if (failed(checkOptions(opts)))
    return failure();
  SmallString<256> absModel(modelPath);
  if (llvm::sys::fs::make_absolute(absModel)) {
    llvm::errs() << "tpc: error: cannot resolve '" << modelPath << "'\n";
    return failure();
  }
  if (opts.modelPath.empty())
    opts.modelPath = absModel.str().str();
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir)) {
    llvm::errs() << "tpc: error: cannot create '" << outputDir
                 << "': " << ec.message() << "\n";
    return failure();
  }
  if (failed(removeStaleOutputs(outputDir)))
    return failure();

  tp::ImportOptions importOptions;
  llvm::StringMap<tp::SafetensorsTensor> checkpoint;
  if (!weights.empty()) {
    llvm::Expected<llvm::StringMap<tp::SafetensorsTensor>> index =
        tp::readCheckpointIndex(weights);
    if (!index) {
      llvm::errs() << "tpc: error: --weights: "
                   << llvm::toString(index.takeError()) << "\n";
      return failure();
    }
    checkpoint = std::move(*index);
    importOptions.checkpoint = &checkpoint;
    importOptions.checkpointPath = weights;
  }
  OwningOpRef<ModuleOp> module =
      tp::importONNXFile(absModel, &context, importOptions);
  if (!module)
    return failure();
  // The pipeline in its three stages, with tpc's checks and files between.
  PassManager raise(&context);
  tp::buildTPRaisePipeline(raise, opts);
  if (failed(raise.run(*module)) || failed(checkArchitecture(*module)))
    return failure();
  PassManager distribute(&context);
  tp::buildTPDistributePipeline(distribute, opts);
  if (failed(distribute.run(*module)))
    return failure();

  SmallString<256> mlirPath(outputDir), cppPath(outputDir), exePath(outputDir);
  llvm::sys::path::append(mlirPath, "model.mlir");
  llvm::sys::path::append(cppPath, "model.cpp");
  llvm::sys::path::append(exePath, "model");
  if (failed(writeFile(mlirPath, [&](raw_ostream &os) {
        module->print(os);
        return success();
      })))
    return failure();
  // The report reads the partitioned program; its memory section, the
  // fused one (written once the fusions ran, or without them for --emit
  // mlir).
  std::optional<tp::PlanReport> planReport;
  auto writeReport = [&](StringRef activations) {
    SmallString<256> reportPath(outputDir);
    llvm::sys::path::append(reportPath, "plan-report.md");
    return writeFile(reportPath, [&](raw_ostream &os) {
      os << planReport->markdown << activations;
      return success();
    });
  };
  if (report) {
    FailureOr<tp::PlanReport> built = tp::buildPlanReport(*module, opts.tp);
    if (failed(built))
      return failure();
    planReport = std::move(*built);
    llvm::outs() << planReport->summary << "\n";
  }
  if (emit == Emit::Mlir)
    return planReport ? writeReport(tp::writeMemoryPlan(*module)) : success();

  PassManager fuse(&context);
  tp::buildTPFusePipeline(fuse, opts);
  if (failed(fuse.run(*module)) ||
      (planReport && failed(writeReport(tp::writeMemoryPlan(*module)))))
    return failure();
  PassManager lower(&context);
  tp::buildTPToEmitCPipeline(lower, opts);
  if (failed(lower.run(*module)))
    return failure();
  if (failed(writeFile(cppPath, [&](raw_ostream &os) {
        os << "// Generated by tpc from " << absModel << "\n";
        return emitc::translateToCpp(*module, os);
      })))
    return failure();
  if (emit == Emit::Cpp)
    return success();
  return compile(cppPath, exePath);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  options().exposeAsToolOptions(tpcCategory);
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
  // An op raised from an ONNX node carries the node's name; the printed
  // file location alone would say line 0. Runs first, then lets the
  // handler above print.
  ScopedDiagnosticHandler nodeNames(&context, [](Diagnostic &diag) {
    if (auto name = dyn_cast<NameLoc>(diag.getLocation())) {
      StringRef node = name.getName().getValue();
      if (!node.empty() && !StringRef(diag.str()).contains(node))
        diag.attachNote() << "at ONNX node '" << node << "'";
    }
    return failure();
  });
  if (succeeded(run(context)))
    return 0;
  // No partial result: what this run wrote before it failed goes too.
  (void)removeStaleOutputs(outputDir);
  return 1;
}
