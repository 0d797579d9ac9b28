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
  // The options the pipeline shares with its passes, declared with them in
  // include/tpopt/Passes.td (TPPipelineOption): probe-seq, hf-config, plan,
  // tp, sp, allow-uneven, the lora-* options, dtype, async-tp, optimizer,
  // recompute, master-weights, dp, bucket-mib, stream-block-mib, model-path,
  // layer-loops.
#include "tpopt/PipelineOptions.h.inc"

  // The pipeline's own.
  Option<bool> train{*this, "train",
                     llvm::cl::desc("Also compile the training step "
                                    "(forward, loss, backward) and its "
                                    "optimizer"),
                     llvm::cl::init(false)};
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
  Option<bool> fuseEpilogues{
      *this, "fuse-epilogues",
      llvm::cl::desc("Fuse residual adds and gated-MLP SiLU products into "
                     "the projection before them (tp-fuse-epilogues)"),
      llvm::cl::init(true)};
  Option<bool> fuseAddRmsNorm{
      *this, "fuse-add-rms-norm",
      llvm::cl::desc("A residual add and the RMS norm that reads it as one "
                     "pass (tp-fuse-add-rms-norm)"),
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
  Option<bool> saveAttentionStats{
      *this, "save-attention-stats",
      llvm::cl::desc("With --train: the attention backward reads the "
                     "forward's output and log-sum-exp instead of running "
                     "the forward again (tp-save-attention-stats)"),
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
/// attention backward reading the forward's statistics
/// (tp-save-attention-stats, with `save-attention-stats`), the
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
