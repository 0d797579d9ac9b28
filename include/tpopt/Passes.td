//===- Passes.td - tp-opt pass declarations ----------------*- tablegen -*-===//

#ifndef TPOPT_PASSES_TD
#define TPOPT_PASSES_TD

include "mlir/Pass/PassBase.td"

// An option a pass shares with the pipeline (TPCompileOptions: tpc's flags
// and tp-opt --tp-compile's), declared once: tools/tp-pipeline-options
// makes the pipeline's member of every one (from llvm-tblgen --dump-json), with
// the pass's type and description, and the pass's flag, C++ name and
// default unless the last three arguments say otherwise.
class TPPipelineOption<string cppName_, string arg_, string type_,
                       string default_, string desc_,
                       string pipelineArg_ = arg_,
                       string pipelineCppName_ = cppName_,
                       string pipelineDefault_ = default_>
    : Option<cppName_, arg_, type_, default_, desc_> {
  string pipelineArgument = pipelineArg_;
  string pipelineCppName = pipelineCppName_;
  string pipelineDefaultValue = pipelineDefault_;
}

// The data-parallel groups, an option of two passes.
def TPDataParallelOption
    : TPPipelineOption<"dp", "dp", "int64_t", /*default=*/"1",
                       "With --train: data-parallel copies of the "
                       "tensor-parallel group (mpirun -np dp x tp): "
                       "replicated parameters are broadcast over them at "
                       "init and every gradient is summed over them (group "
                       "\"dp\")">;

def TPVerifyParams : Pass<"tp-verify-params", "ModuleOp"> {
  let summary = "Check the model's parameter arguments";
  let description = [{
    Checks the invariants every later pass relies on for parameters (function
    arguments that carry `tp.fqn`):
    - no two parameters of one function share an FQN (a tied embedding is one
      parameter with two uses, never two arguments);
    - no two sources of one function overlap in one file unless they are the
      same byte range of the same size (identical bytes read twice).
    Each violation is an error at the argument, naming the FQN. (Per-argument
    checks, such as a source's byte length matching the argument's type, are
    done by the dialect's argument-attribute verifier.)
  }];
  let dependentDialects = ["::mlir::tp::TPDialect"];
}

def TPRaiseONNX : Pass<"tp-raise-onnx", "ModuleOp"> {
  let summary = "Raise onnx-level IR to tp building blocks";
  let description = [{
    Rewrites each function of `onnx.node` ops (the output of
    `--import-onnx`) into a function `@forward` of `tp` ops whose arguments
    are the graph inputs and the model parameters, each parameter named by its
    HuggingFace FQN (`tp.fqn`) in canonical orientation (linear weights
    `[out, in]`; a weight the exporter stored `[in, out]` keeps its bytes and
    gets `transposed = true` in its `#tp.source`).

    Raising follows dataflow, not node order or names: activations are tracked
    with their head layout through reshapes and transposes, and the
    exporter's sub-graphs are recognized by what they compute. Side
    computations that depend only on shapes and on the attention mask (RoPE
    tables, causal and padding masks, head-reshape targets) are evaluated at a
    small probe shape (`probe-batch` x `probe-seq`, with left padding in the
    first row of the probe mask and right padding in the last) and their
    meaning is read off the values: the rotary theta, whether attention is
    causal, windowed or uses the padding mask. A sliding window shows only if
    it is narrower than about `probe-seq - 3`; two different mask tensors
    that look the same at the probe are an error asking for a longer probe. Parameter FQNs come from
    initializer names when the exporter kept them and from node scopes
    (`/model/layers.0/self_attn/q_proj/MatMul`) otherwise.

    The detected architecture and configuration are recorded in the module's
    `tp.config` dictionary. A node that cannot be raised is an error naming
    the node, its op type and its module scope. A module with no `onnx.node`
    to raise is an error ("nothing to raise"), unless it was raised before
    (it has its `tp.config`). For an architecture whose norms scale by
    `1 + w` (Gemma3), a norm the exporter folded into its weight gets its
    offset back and its parameter reads `w` (`stored_offset` on its
    `#tp.source`).
  }];
  let options = [
    Option<"probeBatch", "probe-batch", "int64_t", /*default=*/"2",
           "Batch size at which side computations are evaluated">,
    TPPipelineOption<"probeSeq", "probe-seq", "int64_t", /*default=*/"32",
           "Sequence length at which side computations are evaluated">,
    Option<"trace", "trace", "bool", /*default=*/"false",
           "A remark on every node saying which recogniser raised it as what">,
    TPPipelineOption<"hfConfig", "hf-config", "std::string", /*default=*/"\"\"",
           "A transformers config.json: its rope_parameters give the RoPE "
           "scaling types the tables cannot tell (yarn); the pipeline also "
           "checks the detected configuration against it "
           "(tp-check-hf-config)">,
  ];
  let dependentDialects = ["::mlir::tp::TPDialect", "::mlir::func::FuncDialect"];
}

def TPCheckHFConfig : Pass<"tp-check-hf-config", "ModuleOp"> {
  let summary = "Check (and complete) the detected configuration against a HF config.json";
  let description = [{
    Reads a HuggingFace `config.json` (its `text_config` when it has one) and
    compares it with the module's `tp.config` and the raised ops: layers,
    hidden size, heads, KV heads, head_dim, intermediate size, vocabulary,
    RMS norm epsilon, RoPE thetas (`rope_theta` or `rope_parameters`),
    sliding window and layer types, tied embeddings. A conflict is an error
    naming the key and both values. The config supplies what the graph does
    not show: a sliding window wider than the raising probe is set on the
    attention ops of the layers `layer_types` marks `sliding_attention`.
  }];
  let options = [
    Option<"path", "path", "std::string", /*default=*/"\"\"",
           "config.json">,
  ];
}

def TPApplyPlan : Pass<"tp-apply-plan", "ModuleOp"> {
  let summary = "Annotate parameters with the placements of a tensor-parallel plan";
  let description = [{
    Applies a plan (`auto`: the built-in plan of the architecture in
    `tp.config`; or `llama`, `qwen2`, `qwen3`, `gemma3`, `nemotron_h`,
    `default`; or `hf:CONFIG.json`, transformers' `base_model_tp_plan`
    translated as NeMo does; or `file:PLAN.json`, a user plan of FQN globs)
    for `tp` ranks: adds `shard.grid @tp(shape = tp)` and puts
    every parameter of `@forward` behind a `shard.shard ... annotate_for_users`
    with its split (a Colwise linear splits its weight and bias on dim 0, a
    Rowwise linear its weight on dim 1, a Rowwise embedding its vocabulary
    on dim 0; everything else is replicated), and each planned module's
    output behind a result `shard.shard` with its output layout (Rowwise
    `[[]]`, Colwise split on the last dimension, gathered Colwise `[[]]`).
    Each parameter also records its placement, `tp.placement =
    #tp.placement<...>`: `split(d)` or `replicated`, the plan `key` that
    placed it and, when replicated, its gradient class `grad`: `sum` for
    the per-head q/k norms that read head-sharded activations (their
    gradients are partial) and for `replicated_with_grad_allreduce`
    modules, `mean` otherwise. When `tp` exceeds the KV heads and is a
    multiple of them, the k and v projections are `split(0)` with
    `replicas = tp / kv` (each KV head on the ranks of its query group).

    With `sp=true` (or a JSON plan with `sequence_parallel` modules and
    `shard(1)` layouts), sequence parallelism: the embedding and the
    row-split projections whose entry says `output_layouts=Shard(1)` get
    their result annotated `shard.shard %r to <@tp, [[], [0]]>`, each value
    that column-split linears read is annotated replicated for its users
    (once per value), and SequenceParallel norms are replicated with
    `grad = sum`. NemotronH and HF plans have no SP form
    (error).

    With `lora-rank=R`, every targeted `tp.linear` `y = x W^T` becomes
    `y + ((x A^T) * alpha / R) B^T` with new parameters
    `<module>.lora_A.weight` [R, in] and `<module>.lora_B.weight` [out, R]
    (sources in `lora-weights`). With `lora-adapter=DIR`, PEFT's
    `adapter_config.json` decides instead, by PEFT's rules: which linears
    (`target_modules` as names, suffixes, a regular expression or
    `all-linear`; `exclude_modules`; `layers_to_transform`), the rank and
    alpha of each (`rank_pattern`, `alpha_pattern`), the scale (alpha / r,
    or alpha / sqrt(r) with `use_rslora`), a `lora_B` bias (`lora_bias`,
    added as `tp.bias_add` of the scaled bias after the module's output
    layout), and the base tensors the adapter replaces (trained biases,
    `modules_to_save` copies: their sources point into the adapter); an
    adapter tensor the program does not use is an error. The factors are
    placed as NeMo's LoRA styles do: under a
    Colwise module A and B are both split on dim 0 and `x A^T` is annotated
    replicated for its users (all-gathered over R); under a Rowwise module
    both are split on dim 1 and `x A^T` is annotated split on its last
    dimension (its partial sum reduce-scattered over R), so base and LoRA
    partial sums meet in one reduction; otherwise they are replicated.

    Validation, with diagnostics naming the plan key and the numbers:
    attention heads and KV heads, MLP widths, the vocabulary and the LoRA
    rank must divide by `tp`, unless `allow-uneven=true`: then a split that
    does not divide gives the ranks ceil/floor shares in whole units (KV
    heads, with the query heads of their groups, when tp does not exceed
    them; query heads within each KV head's group of ranks when it does;
    single features and vocabulary rows otherwise), recorded as the
    placement's `starts` and `sizes`; a tied embedding and lm_head must get the same
    split; a plan key that matches no module is a warning; a LoRA factor
    missing from the adapter, or of another shape or dtype, is an error
    naming the key and the file.
  }];
  let options = [
    TPPipelineOption<"plan", "plan", "std::string", /*default=*/"\"auto\"",
           "auto, llama, qwen2, qwen3, gemma3, nemotron_h, default, "
           "hf:CONFIG.json or file:PLAN.json">,
    TPPipelineOption<"tp", "tp", "int64_t", /*default=*/"2",
                     "Tensor-parallel ranks", "tp", "tp",
                     /*pipeline default=*/"1">,
    TPPipelineOption<"sp", "sp", "bool", /*default=*/"false", "Sequence parallelism">,
    TPPipelineOption<"allowUneven", "allow-uneven", "bool", /*default=*/"false",
           "Split heads, KV heads, features and the vocabulary unevenly "
           "where they do not divide by tp (padded blocks)">,
    TPPipelineOption<"loraRank", "lora-rank", "int64_t", /*default=*/"0",
           "LoRA rank r (0: no LoRA)">,
    TPPipelineOption<"loraAlpha", "lora-alpha", "double", /*default=*/"32.0",
           "LoRA alpha: the LoRA branch is scaled by alpha / r">,
    TPPipelineOption<"loraTargets", "lora-targets", "std::string",
           /*default=*/"\"all-linear\"",
           "Linears that get LoRA: all-linear (every linear but the output "
           "projection) or a comma-separated list of globs over module "
           "names (the last FQN component, e.g. q_proj,v_proj or *_proj)">,
    TPPipelineOption<"loraWeights", "lora-weights", "std::string", /*default=*/"\"\"",
           "The adapter's safetensors file (PEFT's "
           "adapter_model.safetensors); the LoRA parameters read from it">,
    TPPipelineOption<"loraAdapter", "lora-adapter", "std::string", /*default=*/"\"\"",
           "A PEFT adapter directory (adapter_config.json and "
           "adapter_model.safetensors): rank, alpha, targets and weights "
           "as PEFT reads them (instead of the lora-* options)">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def TPBuildTrainStep : Pass<"tp-build-train-step", "ModuleOp"> {
  let summary = "Add the training step: forward, loss and backward";
  let description = [{
    Adds `func.func @train_step` (`tp.entry = "train_step"`) beside the
    forward: a copy of `@forward` (with its plan annotations), the causal-LM
    loss `tp.cross_entropy` of its logits against the input ids shifted by
    one (positions whose attention mask is 0 ignored), and the reverse-mode
    derivative of that summed loss, built by asking each op for its VJP
    (`AutodiffOpInterface`) from the last op to the first, and summing the
    cotangents of a value read several times with `tp.add`. Each trainable
    parameter's gradient ends in a `tp.accumulate_grad`, which adds it to
    the runtime's gradient buffer of that FQN, right after the gradient's
    last contribution (so the step never holds all its weight gradients at
    once); the step returns the loss sum.

    It also adds `func.func @optimizer_step` (`tp.entry =
    "optimizer_step"`), which the runtime runs once per optimizer step,
    after the training step has run on each of its micro-batches: the
    explicit boundary `tp.optimizer_boundary` (where
    `tp-replica-grad-sync` puts the replica-gradient buckets), then
    `tp.normalize_grads` (the division by the step's label tokens),
    `tp.grad_norm`, `tp.clip_grads` and `tp.optimizer_update`; it returns
    the norm.

    Runs on the global program, after `tp-apply-plan` and before
    `tp-partition`, which then partitions forward and backward with the same
    rules, so every backward collective comes from the plan. The backward
    reads the forward values its rules need (`getSavedForBackward`): the
    forward ops that compute them are marked `tp.saved`, and the backward
    ops use them. With `recompute`, each decoder layer (the ops whose
    location names `layers.N`) keeps only what enters it: right before the
    first backward op that reads one of the layer's forward values, the
    ops computing those values are cloned (`tp.recomputed`) from the
    layer's inputs, and the backward reads the clones, so the layer's
    activations die after its forward (activation checkpointing per
    layer, as `torch.utils.checkpoint` around each decoder layer).

    Trainable are all parameters, or only the LoRA factors (`lora_A`,
    `lora_B`) when the program has them, as PEFT trains; the others get no
    gradient. With `master-weights` f32 (the default `auto` when a
    trainable parameter is held in bf16 or f16) the update is marked
    `master_weights`. Training needs f32 parameters; an op without a backward
    (`tp.mamba2_mixer`) or an activation annotation of sequence parallelism
    is refused, naming it.
  }];
  let options = [
    TPPipelineOption<"optimizer", "optimizer", "std::string", /*default=*/"\"adamw\"",
           "The optimizer the step feeds: adamw (torch.optim.AdamW) or sgd "
           "(torch.optim.SGD with momentum)">,
    TPPipelineOption<"recompute", "recompute", "bool", /*default=*/"false",
           "Activation recomputation per layer: the backward of each "
           "decoder layer recomputes the layer's forward from its input "
           "instead of keeping its activations">,
    TPPipelineOption<"masterWeights", "master-weights", "std::string",
           /*default=*/"\"auto\"",
           "FP32 master weights for parameters held in bf16 or f16: f32 "
           "(the update on an f32 copy, rounded once into the parameter), "
           "none (the update on the parameter itself) or auto (f32 when a "
           "trainable parameter is held in bf16 or f16)">,
  ];
}

def TPPartition : Pass<"tp-partition", "ModuleOp"> {
  let summary = "Partition an annotated program into the program of one rank";
  let description = [{
    Takes the output of `tp-apply-plan` and writes the SPMD program every
    rank of grid `@tp` runs: parameters get their local shapes and their
    placement's `blocks` (what `load_param` reads); activations are
    tracked as replicated, split on their last dimension, split on the
    sequence (dim 1), or partial sums.
    Column-split linears keep their output split; row-split linears produce
    partial sums followed by one `shard.all_reduce`, or by a
    `shard.reduce_scatter` on dim 1 when their result is annotated
    sequence-split; a sequence-split value annotated replicated for its
    users is `shard.all_gather`ed on dim 1; norms, residual adds and
    replicated linears run on sequence shards, attention refuses them; attention on split
    q/k/v runs this rank's heads (head counts divided); a vocabulary-split
    embedding becomes `vocab_parallel` plus an all-reduce; a split output is
    `shard.all_gather`ed on its last dimension. Anything else on split data
    is an error naming the op. The partitioned program is verified.

    A training step is partitioned by the same rules. Each replicated
    parameter's `tp.accumulate_grad` gets its replica class from the
    partitioned backward: `mean` when the gradient is whole on every rank,
    `sum` when it is a partial sum (which is accumulated as it is, not
    all-reduced: `tp-replica-grad-sync` reduces it at the optimizer
    boundary). A `tp.grad_reduction` argument attribute (a JSON plan's
    `"grad_reduction"`) overrides the derived class.
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect",
                           "::mlir::tp::TPDialect"];
}

def TPShardParams : Pass<"tp-shard-params", "ModuleOp"> {
  let summary = "Each decoder layer's parameters all-gathered over the "
                "data-parallel group where they are read (ZeRO stage 3)";
  let description = [{
    On a training program whose data-parallel buckets are reduced per
    micro-batch (`tp-replica-grad-sync` with `zero = 2`: one bucket per
    decoder layer and dtype, one for the parameters outside the layers),
    the parameters become data-parallel runs held between uses: each
    bucket's parameters are read in `@train_step` through a
    `tp.param_bucket_gather` of that bucket instead of the function's
    arguments.

    - A decoder layer's bucket is gathered twice per micro-batch: before
      the first op of the forward that reads one of its parameters (the
      forward: the ops before `tp.cross_entropy`), for the forward's
      reads, and before the first op of the backward that reads one (its
      recomputation included), for the backward's. What the forward
      gathered is freed after its last forward reader.
    - The bucket outside the layers (the embedding, the final norm, the
      head) is gathered once, before its first reader, for all of them
      (FSDP2 keeps the root module's parameters through the backward).
    - Prefetch: in each pass, the next layer's gather is issued right
      after the current layer's first op, before the rest of its compute,
      so that a layer's all-gather can run while the previous layer
      computes (and every layer's calls hold the next one's gather: the
      layer loops roll them).
    - Gradient accumulations take the gathered value too (they read only
      its shape): nothing in the training step reads a whole parameter
      any more, so the emitted step loads none.
    - In `@init`, each bucket's `tp.param_bucket_shard` follows the last
      op that reads one of its parameters (their broadcasts): from there
      on each rank holds its runs only. The optimizer step's
      `tp.param_bucket_all_gather` ops are removed: the update writes the
      runs, which are all there is of a parameter between steps.
    - A layer whose parameters fill more than one bucket (`--bucket-mib`)
      is gathered bucket by bucket, each before its first reader and the
      next one's after it (the same order of prefetch); so is the part
      outside the layers. `--bucket-mib` bounds the largest gather.

    `tpc --zero 3` runs it after `tp-replica-grad-sync{zero=2}` and
    `tp-broadcast-replicas`.

    ```mlir
    %w:2 = tp.param_bucket_gather {bucket = 2 : i64, ...} : ...
    %y = tp.rms_norm %x, %w#0 ...
    ```
  }];
}

def TPStreamParamRuns : Pass<"tp-stream-param-runs", "ModuleOp"> {
  let summary = "A vocabulary table held as data-parallel runs read a block "
                "of rows at a time by the loss and the embedding gradient "
                "(ZeRO stage 3)";
  let description = [{
    After `tp-shard-params` and the fusions: a bucket of `@train_step`
    that holds one parameter (`tp.grad_bucket_reduce_scatter
    {micro_batch}` with one FQN; a table larger than `--bucket-mib` always
    is one), gathered whole by a `tp.param_bucket_gather`, whose gathered
    value `tp.accumulate_linear_cross_entropy` (the output projection and
    the loss) or `tp.accumulate_embedding_grad` reads, is read by those
    ops from the runs instead: they get `runs_bucket` and `block_rows`
    (rows of at most `block-mib` MiB of f32) and take the step's argument,
    so that the runtime all-gathers a block of rows at a time and
    reduce-scatters each block's gradient into the bucket's run; the
    bucket's reduce-scatter gets `streamed`. What else reads the gathered
    value (the embedding lookup) keeps the gather, which is then freed
    after its last reader (the lookup, at the start of the forward): from
    the loss to the end of the backward a rank holds neither the table nor
    its gradient whole, only a block of each.

    Only f32 tables on the host stream; the runtime gathers others whole
    for the ordinary call (docs/training.md).

    `tpc --zero 3` runs it after the fusions.

    ```mlir
    %loss, %dx = tp.accumulate_linear_cross_entropy %h, %ids, %mask
        into %arg2 {block_rows = 4096 : i64, fqn = "lm_head.weight",
        runs_bucket = 0 : i64} : ...
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, ..., micro_batch,
        streamed}
    ```
  }];
  let options = [
    TPPipelineOption<"blockMib", "block-mib", "double", /*default=*/"8",
                     "With --zero 3: the most MiB (FP32) of rows of a "
                     "vocabulary table the loss and the embedding gradient "
                     "gather from its runs at once",
                     /*pipeline flag=*/"stream-block-mib", "streamBlockMib">,
  ];
}

def TPBroadcastReplicas : Pass<"tp-broadcast-replicas", "ModuleOp"> {
  let summary = "Start every rank from rank 0's copy of each replicated "
                "parameter";
  let description = [{
    On a partitioned program with `@tp`: adds `func.func @init`
    (`tp.entry = "init"`), which the runtime runs once before the first
    step. It takes every replicated parameter of `@forward` (frozen ones
    included; split ones are each rank's own block) with its attributes,
    and broadcasts each from TP rank 0, in FQN order, with
    `tp.broadcast_replica` (AutoModel's `broadcast_tp_replicas`), so that
    replicas start equal whatever each rank read. With `dp = D > 1`, every
    parameter (a split one: this rank's block) is then also broadcast over
    the data-parallel group (`group = "dp"`). A program with neither `@tp`
    nor data parallelism is left as it is.

    ```mlir
    func.func @init(%n: tensor<64xf32> {tp.fqn = "model.norm.weight", ...})
        attributes {tp.entry = "init"} {
      tp.broadcast_replica %n {fqn = "model.norm.weight"} : tensor<64xf32>
      return
    }
    ```
  }];
  let options = [
    TPDataParallelOption,
  ];
}

def TPReplicaGradSync : Pass<"tp-replica-grad-sync", "ModuleOp"> {
  let summary = "Synchronize replicated parameters' gradients in FP32 buckets "
                "at the optimizer boundary";
  let description = [{
    On a partitioned training program: the gradients of the replicated
    parameters (every `tp.accumulate_grad` of `@train_step` with a replica
    class) are synchronized over `@tp` once per optimizer step, right after
    `tp.optimizer_boundary` of `@optimizer_step` and so before the
    normalization, the norm, the clipping and the update, by
    `tp.grad_bucket_all_reduce` ops: one all-reduce (sum) per bucket,
    divided by the ranks for the `mean` class (AutoModel's
    `synchronize_tp_replica_gradients`).

    Buckets group gradients by (class, dtype) (`mean` before `sum`), in
    FQN order (rank-stable: every rank compiles the same list), and are
    filled up to `bucket-mib` MiB counted at FP32 size (gradients of
    another dtype are cast to FP32 for the reduction); a gradient larger
    than that is a bucket of its own. Split parameters are not touched.
    Without `@tp` (one rank per group) there are no replicas.

    With `dp = D > 1` the ranks form D data-parallel copies of the
    tensor-parallel group (`shard.grid @dp`, added): after the replica
    buckets, every gradient (split ones included, each rank's block) is
    summed over the data-parallel group in buckets of the same kind
    (`group = "dp"`), the loss being normalized by the global batch's
    label tokens.

    With `zero = 1` as well, the data-parallel buckets are
    `tp.grad_bucket_reduce_scatter` ops instead (each padded to equal runs
    per data-parallel rank), the norm and the update are marked
    `dp_sharded` (a rank reads and updates only its runs, and holds the
    optimizer state of only those), and one `tp.param_bucket_all_gather`
    per data-parallel bucket follows the update:

    ```mlir
    tp.optimizer_boundary
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 1536 : i64,
        dtype = f32, fqns = ["model.norm.weight", ...],
        padded_bytes = 2048 : i64}
    tp.normalize_grads
    %norm = tp.grad_norm {dp_sharded} : tensor<f32>
    tp.clip_grads %norm : tensor<f32>
    tp.optimizer_update {dp_sharded, optimizer = "adamw"}
    tp.param_bucket_all_gather {bucket = 0 : i64, bytes = 2048 : i64,
        dtype = f32, fqns = ["model.norm.weight", ...]}
    ```

    With `zero = 2`, the data-parallel buckets are formed per decoder
    layer (`tp.layer` of the accumulations; the gradients outside the
    layers form their own) and each `tp.grad_bucket_reduce_scatter
    {micro_batch}` goes into `@train_step`, right after the last
    accumulation of its gradients: a layer's gradients are reduced after
    its backward, in every micro-batch, and a rank holds only its runs of
    them between micro-batches and up to the update. The replica buckets
    over `@tp` stay at the boundary (they sum the runs); the rest is
    stage 1's.

    ```mlir
    tp.optimizer_boundary
    tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 512 : i64,
        dtype = f32, fqns = ["model.layers.0.input_layernorm.weight",
                              "model.norm.weight"],
        reduction = #tp.grad_reduction<mean>}
    ```
  }];
  let options = [
    TPPipelineOption<"bucketMib", "bucket-mib", "double", /*default=*/"256",
           "The largest bucket, in MiB at FP32 size">,
    TPDataParallelOption,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage over the data-parallel group: 0 sums every gradient "
           "over it (all-reduce); 1 reduce-scatters the data-parallel "
           "buckets, updates each rank's run of them and all-gathers the "
           "parameters; 2 also reduce-scatters each decoder layer's "
           "buckets in the training step after its backward">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def TPPlanReport : Pass<"tp-plan-report", "ModuleOp"> {
  let summary = "Print the plan report of a partitioned program";
  let description = [{
    Prints, in Markdown on standard output, what each rank of a partitioned
    program (the output of `tp-partition`) holds and exchanges: a summary
    line (parameters split and replicated, MiB per rank of the whole, the
    collectives of one forward pass), every parameter's global shape,
    placement (`split(d)`, `replicated`, KV blocks shared by several ranks),
    gradient class, plan key and bytes per rank, and the collectives per
    layer with their bytes per token (f32 activations). The program is not
    changed. `tpc --report` writes the same report to `plan-report.md`.
  }];
}

def TPComputeType : Pass<"tp-compute-type", "ModuleOp"> {
  let summary = "Choose the float type a program holds parameters and "
                "activations in";
  let description = [{
    PyTorch runs a model in the type of its parameters (`from_pretrained`'s
    `torch_dtype`, or `model.to(dtype)`): every activation is of that type,
    and each op computes in f32 inside (norm statistics, softmax, GEMM
    accumulation) and rounds its output once. This pass makes the choice
    explicit: every float activation of each function (op results and
    arguments that are not parameters) gets `type`, and each parameter (an
    argument with `tp.fqn` and `#tp.source`) the type the program holds it
    in, with the type of its stored bytes as the source's `stored_type` when
    the two differ (loading converts). The kernels read from their operands'
    types what to compute in.

    `type` is `f32`, `bf16`, `f16` or `auto`: the float type that stores the
    most parameter bytes (a bf16 checkpoint computes in bf16). When some
    parameter is stored in `type`, every parameter keeps its stored type, as
    transformers and PEFT keep them (NemotronH's f32 `A_log` and `D` beside
    bf16 weights, an f32 LoRA adapter on a bf16 model); otherwise every float
    parameter is held in `type` (an f32 checkpoint run in bf16, a bf16 one in
    f32).

    ```mlir
    // tp-compute-type{type=bf16} on an f32 checkpoint:
    func.func @forward(%ids: tensor<2x8xi64>,
        %w: tensor<64x64xbf16> {tp.fqn = "model.layers.0.mlp.up_proj.weight",
          tp.source = #tp.source<initializer = "w", file = "m.onnx",
            offset = 0, length = 16384, transposed = false,
            stored_type = f32>}) -> tensor<2x8x64xbf16>
    ```

    Runs after `tp-apply-plan` (LoRA's parameters exist) and before
    `tp-build-train-step`, whose backward takes its types from the forward
    (each gradient of its value's type; the runtime sums and reduces them in
    FP32 buffers). Ops other than `tp`, `shard` and `func.return` are an
    error, as is a name other than the four.
  }];
  let options = [
    TPPipelineOption<"type", "type", "std::string", /*default=*/"\"auto\"",
                     "The type parameters and activations are held in: "
                     "auto (the checkpoint's), f32, bf16 or f16 (GEMMs, "
                     "norms and softmax accumulate in f32; gradients in "
                     "FP32 buffers)",
                     /*pipeline flag=*/"dtype", "dtype">
  ];
}

def TPLowerLinear : Pass<"tp-lower-linear", "func::FuncOp"> {
  let summary = "Choose each linear's form: the TPLinear bmm-or-linear dispatch";
  let description = [{
    Sets `form` on every `tp.linear` that has none, from the sharding of its
    input (a `shard.shard` of the input, as `tp-apply-plan` or a user writes
    it): a 3-D input sharded on its batch or sequence dimension takes `bmm`
    (flattening `[batch, seq]` would merge a sharded dimension); replicated,
    unannotated or last-dimension-sharded 3-D inputs take `linear`; 2-D
    inputs take `mm`. With `async-tp`, every non-`bmm` linear with a bias
    becomes the `linear` form without it plus a `tp.bias_add`, so that the
    matmul stays the direct neighbour of its collective. A row-split linear
    (weight annotated split on dim 1) always loses its bias that way: its
    output is a partial sum, and the bias is added once, after the
    reduction (after the output's layout annotation, where sequence
    parallelism reduce-scatters), as PyTorch's RowwiseParallel does; after
    the `tp.add`s of partial sums before that annotation too (a LoRA
    branch's `base + B(A(x))`), so that base and branch are reduced
    together. Runs before `tp-partition`, which keeps the forms.
  }];
  let options = [
    TPPipelineOption<"asyncTP", "async-tp", "bool", /*default=*/"false",
           "Split biases off non-bmm linears (async tensor parallelism)">
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def TPFuseEpilogues : Pass<"tp-fuse-epilogues", "func::FuncOp"> {
  let summary = "Fuse a linear's elementwise successors into its product";
  let description = [{
    Rewrites the elementwise ops that alone read a bias-free `tp.linear`'s
    result into one `tp.linear_epilogue`, whose product applies them before
    storing its output (oneDNN's post-ops in the runtime; elsewhere the
    runtime runs the separate ops):

    - `tp.add %y, %r` (a residual connection) becomes
      `tp.linear_epilogue add %x, %w, %r`;
    - `tp.mul (tp.silu %y), %u`, where the SiLU alone reads `%y` and the
      product alone reads the SiLU (a gated MLP's gate), becomes
      `tp.linear_epilogue silu_mul %x, %w, %u`;
    - `tp.add (shard.all_reduce %y), %r` (sum), where the all-reduce alone
      reads `%y` and the add alone reads the all-reduce (a row-split
      projection's residual under tensor parallelism), becomes
      `shard.all_reduce (tp.linear_epilogue add_once %x, %w, %r)`: the
      first rank adds `%r` into its partial sum, so the reduction yields
      the residual stream and no rank passes over it again. `%r` must be
      defined before the product (it is the residual stream, replicated);
    - `tp.mul (tp.silu %s#0), %s#1`, where `%s` is a `tp.linear_siblings`
      of two weights (a gated MLP's gate and up after
      `tp-fuse-sibling-linears`) whose results only these read, becomes
      `tp.linear_swiglu %x, %wg, %wu`.

    "Alone" keeps every value the program still reads: a training step's
    backward reads the gate's product and its SiLU, so there only the
    residual adds fuse. Runs on the partitioned program, after the training
    step is built, just before `tp-to-emitc`; the fused op has no partition
    rule or derivative.

    ```mlir
    %y = tp.linear %a, %wo : (tensor<1x16x64xf32>, tensor<64x64xf32>)
        -> tensor<1x16x64xf32>
    %h = tp.add %y, %r : tensor<1x16x64xf32>
    // becomes
    %h = tp.linear_epilogue add %a, %wo, %r
        : (tensor<1x16x64xf32>, tensor<64x64xf32>, tensor<1x16x64xf32>)
        -> tensor<1x16x64xf32>
    ```
  }];
}

def TPFuseSiblingLinears : Pass<"tp-fuse-sibling-linears", "func::FuncOp"> {
  let summary = "Bias-free linears of one input as one product";
  let description = [{
    Rewrites the bias-free `tp.linear`s of a block that read the same input
    (with the same `form` and weight element type), such as an attention
    block's q, k and v projections or a gated MLP's gate and up, into one
    `tp.linear_siblings`: one GEMM over the weights concatenated along
    their `out` dimension, which reads the input once. Two or three make
    one op; four make two pairs; more, groups of three then the rest. The
    op goes where the first of them was (each weight must be defined
    there; the parameters, function arguments, always are).

    Runs on the partitioned program (after `tp-partition` and the training
    step's passes), so each rank fuses its own blocks of the weights and
    the plan's split and collectives are unchanged; `tp-fuse-epilogues`
    after it makes a fused gate and up, with the SiLU and the product after
    them, one `tp.linear_swiglu`. A linear with a bias (Qwen2's q, k, v)
    stays as it is. `tpc --fuse-siblings` (the `tp-compile` pipeline's
    `fuse-siblings`) runs it; it is off by default because on the CPUs
    measured the one product was no faster than the separate ones
    (docs/runtime.md).

    ```mlir
    %q = tp.linear %h, %wq : (tensor<1x16x128xf32>, tensor<64x128xf32>)
        -> tensor<1x16x64xf32>
    %k = tp.linear %h, %wk : (tensor<1x16x128xf32>, tensor<32x128xf32>)
        -> tensor<1x16x32xf32>
    // become
    %q, %k = tp.linear_siblings %h, %wq, %wk
        : (tensor<1x16x128xf32>, tensor<64x128xf32>, tensor<32x128xf32>)
        -> (tensor<1x16x64xf32>, tensor<1x16x32xf32>)
    ```
  }];
}

def TPFuseGradAccumulation : Pass<"tp-fuse-grad-accumulation", "func::FuncOp"> {
  let summary = "Weight and embedding gradients added into their buffers "
                "without a gradient tensor";
  let description = [{
    In a training step, a `tp.accumulate_grad` of a `tp.linear_grad_weight`
    that nothing else reads becomes one `tp.accumulate_linear_grad_weight`:
    the runtime's product adds `dy^T x` into the parameter's f32 gradient
    buffer itself (beta = 1, the step's first micro-batch overwriting), so
    the micro-batch's weight gradient is never a tensor of its own and the
    buffer is not read and written again to add it (Megatron-LM's
    gradient-accumulation fusion). A gradient that goes through a
    collective or `tp.replica_sum` first (a k/v projection whose KV heads
    several ranks hold) stays as it is. A `tp.embedding_grad` of the
    accumulated table likewise becomes one `tp.accumulate_embedding_grad`,
    which adds `dy`'s rows into the buffer: no `[vocab, hidden]` gradient.

    First, an accumulation of a `tp.add` that nothing else reads (a
    parameter used twice, as a tied embedding is by the embedding and the
    LM head) becomes one accumulation of each operand, placed just after
    the operand is made: the LM head's gradient is then added to the buffer
    (or fused into its product) at the start of the backward instead of
    being held until the embedding's is done, and the sum is never a tensor.
    The buffer then sums the terms in another order (f32 rounding only).

    Runs on the partitioned program after `tp-replica-grad-sync` (which
    rejects the fused ops: it reads the replica class of every
    `tp.accumulate_grad`, once per parameter), before `tp-to-emitc`.

    ```mlir
    %dw = tp.linear_grad_weight %dy, %x : (tensor<?x?x128xf32>,
        tensor<?x?x64xf32>) -> tensor<128x64xf32>
    tp.accumulate_grad %dw into %w {fqn = "lm_head.weight"}
        : tensor<128x64xf32>
    // becomes
    tp.accumulate_linear_grad_weight %dy, %x into %w {fqn = "lm_head.weight"}
        : tensor<?x?x128xf32>, tensor<?x?x64xf32>, tensor<128x64xf32>
    ```
  }];
}

def TPFuseAddRmsNorm : Pass<"tp-fuse-add-rms-norm", "func::FuncOp"> {
  let summary = "A residual add and the RMS norm that reads it as one pass";
  let description = [{
    Where a `tp.rms_norm` over the whole last dimension (no `group_size`)
    reads a `tp.add` of the same block and decoder layer, the two become one
    `tp.add_rms_norm`, whose `sum` takes the add's other uses: one pass
    that reads the addends and writes the sum and its norm, instead of
    writing the sum and reading it back. The fused op stands at the norm,
    or at the add when something reads the sum before the norm (then the
    norm's weight must be defined before the add; otherwise nothing
    fuses). A sum that two norms read fuses with the first.

    Runs on the rank's program after `tp-fuse-epilogues`, which takes the
    adds that follow a projection into its product; the adds left are the
    ones after Gemma3's post-norms, a sequence-parallel reduce-scatter, or
    an all-reduce. An add and a norm of different decoder layers (`tp.layer`)
    stay apart, so that each layer still hands the next only the residual
    stream.

    ```mlir
    %h = tp.add %residual, %update : tensor<1x16x64xf32>
    %n = tp.rms_norm %h, %w {epsilon = 1.0e-06 : f64}
        : (tensor<1x16x64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>
    // becomes
    %h, %n = tp.add_rms_norm %residual, %update, %w {epsilon = 1.0e-06 : f64}
        : (tensor<1x16x64xf32>, tensor<1x16x64xf32>, tensor<64xf32>)
        -> (tensor<1x16x64xf32>, tensor<1x16x64xf32>)
    ```
  }];
}

def TPFuseSiluMulGrad : Pass<"tp-fuse-silu-mul-grad", "func::FuncOp"> {
  let summary = "A gated MLP's backward as one elementwise pass";
  let description = [{
    In a training step, the gradient of `tp.mul (tp.silu %gate), %up` is
    two `tp.mul`s (`dy * up`, `dy * silu`) and a `tp.silu_grad` of the
    first: three passes over [tokens, intermediate] tensors, memory-bound,
    and the forward's SiLU kept for the backward. Where a `tp.silu_grad
    %gate, (tp.mul %dy, %up)` has a sibling `tp.mul %dy, (tp.silu %gate)`
    (the same `%dy` and `%gate`, the first product read by nothing else),
    the three become one `tp.silu_mul_grad %gate, %up, %dy`, which
    recomputes the sigmoid; a SiLU nothing reads any more goes. Runs on
    the rank's program (after `tp-partition`; the ops are elementwise, so
    each rank's slices fuse alike), before `tp-to-emitc`.

    ```mlir
    %s = tp.silu %gate : tensor<2x8x64xf32>
    %h = tp.mul %s, %up : tensor<2x8x64xf32>
    ...
    %ds = tp.mul %dh, %up : tensor<2x8x64xf32>
    %du = tp.mul %dh, %s : tensor<2x8x64xf32>
    %dg = tp.silu_grad %gate, %ds : tensor<2x8x64xf32>
    // the backward becomes
    %dg, %du = tp.silu_mul_grad %gate, %up, %dh : tensor<2x8x64xf32>
    ```
  }];
}

def TPSaveAttentionStats : Pass<"tp-save-attention-stats", "func::FuncOp"> {
  let summary = "The attention backward reads the forward's softmax "
                "statistics instead of running the forward again";
  let description = [{
    Without them `tp.attention_grad` recomputes each query's softmax
    normalisation and `dout . out` by running the forward again. Where a
    `tp.attention_grad` has its `tp.attention` (the same q, k, v, key mask
    and attributes, dominating it), the forward also gives its log-sum-exp
    (`lse`, f32 `[batch, seq_q, num_heads]`) and the backward takes it and
    the forward's output (`saved`), as FlashAttention's backward does: the
    output stays alive until the backward (the output projection's weight
    gradient usually keeps it anyway) and the log-sum-exp is one float per
    query and head. A backward without its forward (recomputed q, k or v)
    stays as it is. Runs on the rank's program, before `tp-to-emitc`.

    ```mlir
    %o = tp.attention %q, %k, %v {...} : ...
    ...
    %dq, %dk, %dv = tp.attention_grad %q, %k, %v, %do {...} : ...
    // becomes
    %o, %lse = tp.attention %q, %k, %v {...} : ...
    ...
    %dq, %dk, %dv = tp.attention_grad %q, %k, %v, %do saved %o, %lse {...}
    ```
  }];
}

def TPFuseLinearCrossEntropy
    : Pass<"tp-fuse-linear-cross-entropy", "func::FuncOp"> {
  let summary = "The output projection, the loss and their gradients as one "
                "op that never holds the logits";
  let description = [{
    In a training step, replaces a bias-free `tp.linear` (the output
    projection), the `tp.cross_entropy` of its logits, the loss's
    `tp.cross_entropy_grad` and the projection's `tp.linear_grad_input` and
    `tp.linear_grad_weight` by one `tp.linear_cross_entropy` at the loss,
    which computes the loss, `dx` and `dweight` a block of positions at a
    time (the fused linear cross-entropy of Liger-Kernel and of
    torchtune's chunked loss): the `[batch, seq, vocab]` logits and their
    gradient are never held. It applies when nothing else reads the
    logits, the loss's `lse` or the logits' gradient, and the projection
    has both gradients: a softcapped head (Gemma3) or a frozen one (LoRA)
    stays as it is. Works on the partitioned program (the
    vocabulary-parallel loss keeps its all-reduces, per block, and `dx` its
    all-reduce after the op); runs before `tp-to-emitc`.

    ```mlir
    %logits = tp.linear %h, %w : ...
    %loss, %lse = tp.cross_entropy %logits, %ids, %mask : ...
    %dl = tp.cross_entropy_grad %logits, %ids, %mask, %lse : ...
    %dh = tp.linear_grad_input %dl, %w : ...
    %dw = tp.linear_grad_weight %dl, %h : ...
    // becomes
    %loss, %dh, %dw = tp.linear_cross_entropy %h, %w, %ids, %mask : ...
    ```
  }];
}

def TPOverlapAllReduces : Pass<"tp-overlap-all-reduces", "func::FuncOp"> {
  let summary = "Run the work an all-reduce does not feed while it is in flight";
  let description = [{
    Splits each sum `shard.all_reduce` that has independent work around it
    into `tp.all_reduce_start` and `tp.all_reduce_wait`, and orders the
    block so that the work runs between the two: the ops since the last
    collective that the sum reads move up (when none has side effects),
    the start goes right after them, and the wait right before the first
    reader of the sum or the next collective. Which ops are independent is
    read off the SSA def-use chains; collectives and the relative order of
    ops with side effects do not change. In a training step's backward this
    puts a column-split projection's weight gradient, and the gradient
    accumulation, between the all-reduce of its input gradient and its
    wait (Megatron-LM's overlap); a forward, whose every op feeds the next
    all-reduce, is left as it is.

    ```mlir
    %dx = tp.linear_grad_input %dy, %w : ...
    %dw = tp.linear_grad_weight %dy, %x : ...
    %s = shard.all_reduce %dx on @tp grid_axes = [0] : ...
    ```
    becomes
    ```mlir
    %dx = tp.linear_grad_input %dy, %w : ...
    %p = tp.all_reduce_start %dx on @tp grid_axes = [0] : ...
    %dw = tp.linear_grad_weight %dy, %x : ...
    %s = tp.all_reduce_wait %p : ...
    ```

    On the CPU the start publishes the rank's contribution (shared memory)
    or calls `MPI_Iallreduce`, and the wait sums or waits; on the GPU the
    sum runs on a side stream beside the work queued after the start. `tpc
    --overlap-all-reduces` (the `tp-compile` pipeline's
    `overlap-all-reduces`) runs it, before `tp-plan-activations`.
  }];
  let dependentDialects = ["::mlir::tp::TPDialect"];
}

def TPPlanActivations : Pass<"tp-plan-activations", "func::FuncOp"> {
  let summary = "Lay out a function's activations in one arena by lifetime";
  let description = [{
    Gives each result a kernel can place (its runtime function takes a
    `RuntimeArg::Slot`: `tp.embedding`, `tp.linear`, the SiLU-product
    `tp.linear_epilogue`, `tp.rms_norm`, `tp.rotary`, `tp.attention`,
    `tp.silu`) of a `[?, ?, ...]` activation type a buffer in one arena:
    results whose lifetimes overlap get disjoint bytes, the others may
    share them. Sizes and offsets are bytes per token of the input (the
    elements of `input_ids`), since every such activation is proportional
    to batch x sequence; the runtime's `tprt::ActivationArena` makes the
    arena for each call, and the context keeps it from call to call.

    A value's lifetime runs from its op to the last op that reads it or
    anything that may share its storage. The runtime's kernels return new
    tensors, except that a consuming form may return the operand it takes
    (the residual of `tp.linear_epilogue` `add`, an all-reduce's input):
    such a result extends its operand's lifetime. What the function
    returns, or what may share storage with it, keeps memory of its own
    (no kernel keeps an operand after its call). Offsets are greedy by size,
    largest first, each at the lowest offset (a multiple of 64 bytes per
    token) free for its whole lifetime. Functions without `input_ids`, or
    with ops that have regions, are left as they are.

    The plan is attributes the emitter reads: on the function
    `tp.activation_bytes_per_token` (the arena) and `tp.activation_buffers`
    ((offset, bytes) per token, one pair per slot), on each placed op
    `tp.activation_slot`. Equal buffers share a slot.

    ```mlir
    func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}, ...)
        attributes {tp.activation_buffers = array<i64: 0, 2048, 2048, 2048>,
                    tp.activation_bytes_per_token = 4096 : i64} {
      %h = tp.embedding %ids, %table {tp.activation_slot = 0 : i64} ...
      %n = tp.rms_norm %h, %w {tp.activation_slot = 1 : i64, ...} ...
      %q = tp.linear %n, %wq {tp.activation_slot = 0 : i64, ...} ...
    ```

    `tpc --plan-activations=false` (the `tp-compile` pipeline's
    `plan-activations`) leaves every result to its kernel's allocation.
  }];
}

def TPToEmitC : Pass<"tp-to-emitc", "ModuleOp"> {
  let summary = "Lower the tp program of a rank to EmitC calls into tprt";
  let description = [{
    Turns `func.func @forward` (tp ops on tensors, parameters as arguments
    with `tp.fqn` and `#tp.source`) into `emitc.func @tprt_model_forward`, the
    entry point the runtime's `main` calls:

    ```c++
    tprt::Tensor tprt_model_forward(tprt::Context &ctx, tprt::Tensor input_ids,
                                    tprt::Tensor attention_mask);
    ```

    A dialect conversion: tensors become `tprt::Tensor` handles; each
    parameter becomes a `tprt::load_param` call that names it by FQN and
    locates its bytes; each op with a `RuntimeCallOpInterface` (the tp ops,
    and the shard collectives through external models) becomes the call of
    the tprt function it names, with its attributes as literal arguments
    and the ONNX node it came from in a comment (escaped: no byte of a name
    can leave the comment). What cannot be lowered (an op without a runtime
    call, an unlocated parameter) is diagnosed before anything is
    rewritten. The module also defines `tprt_model_path`, the model file the
    program reads its weights from unless `--weights` says otherwise.

    With `layer-loops` (the default), each run of consecutive decoder
    layers that make the same calls becomes one `emitc.for`: the layers are
    found from the parameters their calls read (`...layers.N...`), each
    iteration loads its layer's parameters and reads the arguments that
    differ between layers (FQNs, offsets, epsilons, windows) from constant
    tables `tprt_layers<id>_<column>`, and the values one layer hands the
    next are carried in variables. A training step's backward loop reads
    what its layer's forward computed from arrays the forward loop fills
    (emptied as they are read), and so do the gradient accumulations after
    it. The C++ is then as long for 80 layers as for 2. Layers that make
    different calls (NemotronH's Mamba, attention and MLP layers) stay
    straight-line, as does everything when the option is off.

    ```c++
    static const char *const tprt_layers0_2[] = {
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.1.self_attn.q_proj.weight"};
    ...
    for (size_t i = 0; i < 2; i += 1) {
      tprt::Tensor x = residual;
      tprt::Tensor wq = tprt::load_param(ctx, tprt_layers0_2[i], ...);
      ...
      residual = out;
    }
    ```

    Every tensor is released after its last reader. `tp-translate
    --mlir-to-cpp` then prints the C++.
  }];
  let options = [
    TPPipelineOption<"modelPath", "model-path", "std::string", /*default=*/"\"\"",
           "The model file (default: the module's onnx.file)">,
    TPPipelineOption<"layerLoops", "layer-loops", "bool", /*default=*/"true",
           "Roll runs of equal decoder layers into loops over per-layer "
           "tables">,
  ];
  let dependentDialects = ["::mlir::emitc::EmitCDialect"];
}

#endif // TPOPT_PASSES_TD
