//===- Pipeline.h - the tp-opt compilation pipeline -------------*- C++ -*-===//
//
// The passes from raised ONNX to the C++ of one rank, in order, as a
// library: `tpc` runs it on an imported model, `tp-opt --tp-compile=...`
// on any module. The options are the pipeline's; `tpc` exposes the same
// options as its own flags (exposeAsToolOptions).
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PIPELINE_PIPELINE_H
#define TPOPT_PIPELINE_PIPELINE_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace mlir::tp {

struct TPCompileOptions : public PassPipelineOptions<TPCompileOptions> {
  Option<int64_t> probeSeq{*this, "probe-seq",
                           llvm::cl::desc("Sequence length of the raising "
                                          "probe"),
                           llvm::cl::init(32)};
  Option<std::string> hfConfig{
      *this, "hf-config",
      llvm::cl::desc("HuggingFace config.json to check the detected "
                     "configuration against"),
      llvm::cl::value_desc("config.json")};
  Option<int64_t> tp{*this, "tp", llvm::cl::desc("Tensor-parallel ranks"),
                     llvm::cl::init(1)};
  Option<bool> sp{*this, "sp", llvm::cl::desc("Sequence parallelism"),
                  llvm::cl::init(false)};
  Option<bool> allowUneven{
      *this, "allow-uneven",
      llvm::cl::desc("Split what does not divide by tp unevenly (ceil/floor "
                     "shares in padded blocks) instead of an error"),
      llvm::cl::init(false)};
  Option<std::string> plan{
      *this, "plan",
      llvm::cl::desc("TP plan: auto (the architecture's), llama, qwen2, "
                     "qwen3, gemma3, nemotron_h, default, hf:CONFIG.json "
                     "(transformers' base_model_tp_plan) or file:PLAN.json"),
      llvm::cl::init("auto")};
  Option<bool> asyncTP{
      *this, "async-tp",
      llvm::cl::desc("Linears without their bias, then a bias add (the "
                     "matmul next to its collective, as async tensor "
                     "parallelism wants)"),
      llvm::cl::init(false)};
  Option<int64_t> loraRank{*this, "lora-rank",
                           llvm::cl::desc("LoRA rank (0: no LoRA)"),
                           llvm::cl::init(0)};
  Option<double> loraAlpha{*this, "lora-alpha",
                           llvm::cl::desc("LoRA alpha (scale alpha / rank)"),
                           llvm::cl::init(32.0)};
  Option<std::string> loraTargets{
      *this, "lora-targets",
      llvm::cl::desc("Linears with LoRA: all-linear or module names "
                     "(q_proj,v_proj)"),
      llvm::cl::init("all-linear")};
  Option<std::string> loraWeights{
      *this, "lora-weights",
      llvm::cl::desc("The LoRA adapter (PEFT's adapter_model.safetensors)"),
      llvm::cl::value_desc("adapter.safetensors")};
  Option<std::string> loraAdapter{
      *this, "lora-adapter",
      llvm::cl::desc("A PEFT adapter directory: its adapter_config.json "
                     "read as PEFT reads it (rank and alpha per module, "
                     "targets, rsLoRA, lora_bias, modules_to_save, ...), "
                     "its factors from adapter_model.safetensors"),
      llvm::cl::value_desc("dir")};
  Option<std::string> dtype{
      *this, "dtype",
      llvm::cl::desc("The type parameters and activations are held in: "
                     "auto (the checkpoint's), f32, bf16 or f16 (GEMMs, "
                     "norms and softmax accumulate in f32; gradients in "
                     "FP32 buffers)"),
      llvm::cl::init("auto")};
  Option<bool> train{*this, "train",
                     llvm::cl::desc("Also compile the training step "
                                    "(forward, loss, backward) and its "
                                    "optimizer"),
                     llvm::cl::init(false)};
  Option<std::string> optimizer{
      *this, "optimizer",
      llvm::cl::desc("With --train: adamw (torch.optim.AdamW) or sgd "
                     "(torch.optim.SGD with momentum)"),
      llvm::cl::init("adamw")};
  Option<std::string> masterWeights{
      *this, "master-weights",
      llvm::cl::desc("With --train: f32 keeps an FP32 master copy of each "
                     "parameter held in bf16 or f16, updated and rounded "
                     "once into it (FSDP2 with f32 parameters under a bf16 "
                     "MixedPrecisionPolicy); none updates the parameter "
                     "itself; auto (default): f32 when the program holds "
                     "parameters in bf16 or f16"),
      llvm::cl::init("auto")};
  Option<bool> recompute{
      *this, "recompute",
      llvm::cl::desc("With --train: recompute each decoder layer's forward "
                     "in its backward instead of keeping its activations"),
      llvm::cl::init(false)};
  Option<int64_t> dp{
      *this, "dp",
      llvm::cl::desc("With --train: data-parallel copies of the "
                     "tensor-parallel group (mpirun -np dp x tp)"),
      llvm::cl::init(1)};
  Option<int64_t> zero{
      *this, "zero",
      llvm::cl::desc("With --train --dp D > 1: 0 keeps the optimizer state "
                     "of every parameter on every data-parallel rank; 1 "
                     "shards it over them (ZeRO stage 1: gradients "
                     "reduce-scattered, each rank updating its 1/D, "
                     "parameters all-gathered); 2 also reduce-scatters "
                     "each decoder layer's gradients after its backward, "
                     "holding only this rank's 1/D between micro-batches "
                     "(ZeRO stage 2); 3 also holds the parameters as 1/D "
                     "runs, each decoder layer's all-gathered before its "
                     "forward and its backward (ZeRO stage 3)"),
      llvm::cl::init(0)};
  Option<double> bucketMib{
      *this, "bucket-mib",
      llvm::cl::desc("With --train: the largest replica-gradient bucket, in "
                     "MiB at FP32 size"),
      llvm::cl::init(256)};
  Option<double> streamBlockMib{
      *this, "stream-block-mib",
      llvm::cl::desc("With --zero 3: the most MiB (FP32) of rows of a "
                     "vocabulary table the loss and the embedding gradient "
                     "gather from its runs at once (tp-stream-param-runs)"),
      llvm::cl::init(8)};
  Option<bool> fuseEpilogues{
      *this, "fuse-epilogues",
      llvm::cl::desc("Fuse residual adds and gated-MLP SiLU products into "
                     "the projection before them (tp-fuse-epilogues)"),
      llvm::cl::init(true)};
  Option<bool> fuseSiblings{
      *this, "fuse-siblings",
      llvm::cl::desc("Bias-free projections of one input (q, k, v; gate, "
                     "up) as one product per rank (tp-fuse-sibling-linears; "
                     "off by default: no faster on the CPUs measured, "
                     "docs/runtime.md)"),
      llvm::cl::init(false)};
  Option<bool> fuseGradAccumulation{
      *this, "fuse-grad-accumulation",
      llvm::cl::desc("With --train: linear weight gradients added into their "
                     "buffers by the product (tp-fuse-grad-accumulation)"),
      llvm::cl::init(true)};
  Option<bool> fuseSiluMulGrad{
      *this, "fuse-silu-mul-grad",
      llvm::cl::desc("With --train: a gated MLP's SiLU and product "
                     "gradients as one pass (tp-fuse-silu-mul-grad)"),
      llvm::cl::init(true)};
  Option<bool> fuseLinearCrossEntropy{
      *this, "fuse-linear-cross-entropy",
      llvm::cl::desc("With --train: the output projection, the loss and "
                     "their gradients by blocks of positions, without the "
                     "logits (tp-fuse-linear-cross-entropy)"),
      llvm::cl::init(true)};
  Option<bool> overlapAllReduces{
      *this, "overlap-all-reduces",
      llvm::cl::desc("Split each all-reduce with independent work around it "
                     "into a start and a wait with that work between them "
                     "(tp-overlap-all-reduces)"),
      llvm::cl::init(false)};
  Option<bool> planActivations{
      *this, "plan-activations",
      llvm::cl::desc("Lay out each entry function's activations in one "
                     "arena by their lifetimes (tp-plan-activations; false: "
                     "each kernel allocates its result)"),
      llvm::cl::init(true)};
  Option<bool> layerLoops{
      *this, "layer-loops",
      llvm::cl::desc("Emit each run of equal decoder layers as one loop over "
                     "per-layer tables (false: every layer spelled out)"),
      llvm::cl::init(true)};
  Option<std::string> modelPath{
      *this, "model-path",
      llvm::cl::desc("The model file the program reads its weights from "
                     "(default: the module's onnx.file)"),
      llvm::cl::value_desc("model.onnx")};

  /// Whether the program is partitioned: a plan applies at tp > 1, and
  /// with LoRA (a plan on one rank) at any tp.
  bool isDistributed() const {
    return tp > 1 || loraRank > 0 || !loraAdapter.empty();
  }

  /// Registers these options as flags of the running tool too (in
  /// `category`), so that a driver's flags and the pipeline's options are
  /// one list. Call before parsing the command line.
  void exposeAsToolOptions(llvm::cl::OptionCategory &category);
};

/// Raising: onnx-level IR to the checked tp program (tp-raise-onnx,
/// tp-verify-params, tp-check-hf-config with `hf-config`).
void buildTPRaisePipeline(OpPassManager &pm, const TPCompileOptions &options);

/// The tp program to the program of one rank: the plan (tp-apply-plan when
/// distributed), the linear forms (tp-lower-linear), the partition
/// (tp-partition when distributed), the training step's passes (with
/// `train`), sibling projections as one product (tp-fuse-sibling-linears,
/// with `fuse-siblings`).
void buildTPDistributePipeline(OpPassManager &pm,
                               const TPCompileOptions &options);

/// The rank's program as the runtime will run it, still in tp ops: the
/// training step's loss fused with the output projection
/// (tp-fuse-linear-cross-entropy, with `fuse-linear-cross-entropy`), a
/// gated MLP's gradients in one pass (tp-fuse-silu-mul-grad, with
/// `fuse-silu-mul-grad`), epilogues fused into their products
/// (tp-fuse-epilogues, with `fuse-epilogues`), gradients added into their
/// buffers where they are made (tp-fuse-grad-accumulation, with
/// `fuse-grad-accumulation`), the all-reduces overlapped
/// (tp-overlap-all-reduces) and the activation arenas laid out
/// (tp-plan-activations, with `plan-activations`).
void buildTPFusePipeline(OpPassManager &pm, const TPCompileOptions &options);

/// tp-to-emitc, reading weights from `model-path`.
void buildTPToEmitCPipeline(OpPassManager &pm, const TPCompileOptions &options);

/// The fuse pipeline, then the EmitC one (tpc runs them apart: the plan
/// report's activations are read between them).
void buildTPEmitPipeline(OpPassManager &pm, const TPCompileOptions &options);

/// The combinations of options the pipeline cannot run (sequence
/// parallelism on one rank, training options without --train, a PEFT
/// adapter or HF config tp-opt refuses, ...), as the message both front
/// ends print; success when there is none.
llvm::Error checkTPCompileOptions(const TPCompileOptions &options);

/// Raise, distribute, then emit: the module `tp-translate
/// --mlir-to-cpp` prints as the rank's C++.
void buildTPCompilePipeline(OpPassManager &pm, const TPCompileOptions &options);

/// Registers `--tp-compile` (tp-opt's name for buildTPCompilePipeline),
/// refusing what checkTPCompileOptions refuses.
void registerTPCompilePipeline();

} // namespace mlir::tp

#endif // TPOPT_PIPELINE_PIPELINE_H
