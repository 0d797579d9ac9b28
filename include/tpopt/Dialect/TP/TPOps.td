//===- TPOps.td - tp dialect operations --------------------*- tablegen -*-===//

#ifndef TPOPT_DIALECT_TP_TPOPS_TD
#define TPOPT_DIALECT_TP_TPOPS_TD

include "tpopt/Dialect/TP/TPBase.td"
include "tpopt/Dialect/TP/TPAttrs.td"
include "tpopt/Dialect/TP/TPInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def TP_FloatTensor : RankedTensorOf<[F32, F16, BF16]>;
def TP_IndexTensor : RankedTensorOf<[I32, I64]>;
def TP_MaskTensor : RankedTensorOf<[I1, I32, I64]>;

// Every op is partitioned by a rule of its own (TPPartitionRules.cpp) and
// computed by a runtime function (TPRuntimeCalls.cpp).
defvar TP_Partitioned = DeclareOpInterfaceMethods<TP_PartitionOpInterface>;
defvar TP_PartitionedLinearly =
    DeclareOpInterfaceMethods<TP_PartitionOpInterface, ["keepsPartialSums"]>;
defvar TP_RuntimeCalled = DeclareOpInterfaceMethods<TP_RuntimeCallOpInterface>;
// The ops the training step differentiates, each by its own rule
// (TPAutodiffRules.cpp).
defvar TP_Differentiable = DeclareOpInterfaceMethods<TP_AutodiffOpInterface>;

//===----------------------------------------------------------------------===//
// Parameterized blocks
//===----------------------------------------------------------------------===//

def TP_EmbeddingOp : TP_Op<"embedding",
    [Pure, TP_Partitioned, TP_RuntimeCalled, TP_Differentiable]> {
  let summary = "Token embedding lookup";
  let description = [{
    Gathers rows of `table` (`[vocab, hidden]`) at `ids`. The result has the
    shape of `ids` with `hidden` appended. Ids outside `[0, vocab)` are an
    error at run time.

    With `vocab_parallel` (a partitioned program) the table is this rank's
    contiguous block of the vocabulary over the ranks of grid `@tp`: ids
    outside the block give zero rows, so the result is one rank's part of a
    sum that a `shard.all_reduce` completes. With `vocab_starts` and
    `vocab_sizes` (an uneven split, one entry per rank) rank r's table holds
    rows `[vocab_starts[r], vocab_starts[r] + vocab_sizes[r])` followed by
    padding up to the largest size.

    With `runs_bucket` and `block_rows` (ZeRO stage 3,
    `tp-stream-param-runs`) `table` is the training step's argument, which
    the runtime holds as this rank's data-parallel run of that bucket (its
    only parameter): the lookup all-gathers `block_rows` rows at a time
    and never holds the table whole.

    ```mlir
    %h = tp.embedding %ids, %table
        : (tensor<?x?xi64>, tensor<256x64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins TP_IndexTensor:$ids, TP_FloatTensor:$table,
                   UnitAttr:$vocab_parallel,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_starts,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_sizes,
                   OptionalAttr<I64Attr>:$runs_bucket,
                   OptionalAttr<I64Attr>:$block_rows);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_LinearOp : TP_Op<"linear",
    [Pure, TP_Partitioned, TP_RuntimeCalled, TP_Differentiable]> {
  let summary = "Linear layer y = x W^T + b";
  let description = [{
    Applies a linear layer with `weight` in canonical `[out, in]` orientation
    to the last dimension of `x` (`[..., in]`), adding the optional `bias`
    (`[out]`). The result is `[..., out]`, of `x`'s element type; `weight`
    and `bias` may be stored in another float type (a float32 LoRA adapter
    on a bf16 checkpoint), the product being computed in f32.

    `form`, chosen by `tp-lower-linear` (the TPLinear dispatch), says how it
    runs: `linear` flattens the leading dimensions, multiplies and restores
    them; `bmm` multiplies each `[seq, in]` slice of a 3-D input by the
    broadcast `weight^T` (batch- or sequence-sharded inputs); `mm` is the
    plain 2-D product. Absent means `linear`.

    ```mlir
    %y = tp.linear %x, %w, %b {form = #tp<linear_form bmm>}
        : (tensor<?x?x64xf32>, tensor<128x64xf32>, tensor<128xf32>)
        -> tensor<?x?x128xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$weight,
                   Optional<TP_FloatTensor>:$bias,
                   OptionalAttr<TP_LinearFormAttr>:$form);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_LinearEpilogueOp : TP_Op<"linear_epilogue",
    [Pure, TP_RuntimeCalled, AllTypesMatch<["other", "result"]>]> {
  let summary = "A linear whose product ends in an elementwise epilogue";
  let description = [{
    `tp.linear` (`x W^T`, `weight` `[out, in]`, no bias, `form` as there)
    followed by an elementwise op on its result, computed as one product
    whose epilogue applies the op to each output tile while it is still in
    registers (oneDNN's post-ops), instead of writing the product and reading
    it back:

    - `add`: `x W^T + other` (a residual connection after the output
      projection);
    - `silu_mul`: `silu(x W^T) * other` (a gated MLP: the gate projection,
      its SiLU and the product with the up projection);
    - `add_once`: `x W^T + other` on the tensor-parallel group's first rank,
      `x W^T` on the others. The result is a partial sum whose all-reduce
      adds `other` once: a residual connection moved before the reduction
      of a row-split projection, so no rank reads the reduced sum again to
      add it (`other` is the same on every rank; at one rank it is `add`).

    `other` has the result's type. In f32 the result is the unfused ops'
    value bit for bit; in bf16 the product is not rounded before the
    epilogue (one rounding instead of one per op, as torch.compile's fused
    kernels compute). `tp-fuse-epilogues` makes it after partitioning and
    after the training step is built, so it has no partition rule and no
    derivative.

    ```mlir
    %h = tp.linear_epilogue add %a, %wo, %residual
        : (tensor<1x16x64xf32>, tensor<64x64xf32>, tensor<1x16x64xf32>)
        -> tensor<1x16x64xf32>
    // A row-split o_proj on a rank of two: its partial sum carries the
    // residual on rank 0, and the all-reduce is the residual stream.
    %p = tp.linear_epilogue add_once %a, %wo, %residual
        : (tensor<1x16x32xf32>, tensor<64x32xf32>, tensor<1x16x64xf32>)
        -> tensor<1x16x64xf32>
    %h = shard.all_reduce %p on @tp grid_axes = [0]
        : tensor<1x16x64xf32> -> tensor<1x16x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$weight,
                   TP_FloatTensor:$other, TP_EpilogueAttr:$epilogue,
                   OptionalAttr<TP_LinearFormAttr>:$form);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    custom<Epilogue>($epilogue) $x `,` $weight `,` $other attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_LinearSiblingsOp : TP_Op<"linear_siblings",
    [Pure, TP_RuntimeCalled]> {
  let summary = "Bias-free linears of one input, computed as one product";
  let description = [{
    `tp.linear %x, %w_i` (no bias, `form` as there) for each of two or
    three `weights` that read the same `x`, computed as one product over
    the weights concatenated along their `out` dimension: one GEMM that
    reads `x` once, instead of one per projection. Result `i` is
    `x W_i^T`. The weights share one element type; each result has `x`'s
    type with the last dimension `out_i`.

    `tp-fuse-sibling-linears` makes it from the projections of an
    attention block (q, k, v) or of a gated MLP (gate, up) on the
    partitioned program, each rank over its own blocks of the weights, so
    the tensor-parallel split is the one the plan gave; it has no partition
    rule or derivative. The runtime concatenates the weights once per
    program where they are constant (a forward-only program) and splits
    the product into the results; elsewhere it runs the separate products.

    ```mlir
    // q, k and v of one rank at tp=2: 4 query heads and 2 kv heads of 16.
    %q, %k, %v = tp.linear_siblings %h, %wq, %wk, %wv
        : (tensor<1x16x128xf32>, tensor<64x128xf32>, tensor<32x128xf32>,
           tensor<32x128xf32>)
        -> (tensor<1x16x64xf32>, tensor<1x16x32xf32>, tensor<1x16x32xf32>)
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, Variadic<TP_FloatTensor>:$weights,
                   OptionalAttr<TP_LinearFormAttr>:$form);
  let results = (outs Variadic<TP_FloatTensor>:$results);
  let assemblyFormat = [{
    $x `,` $weights attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_LinearSwigluOp : TP_Op<"linear_swiglu", [Pure, TP_RuntimeCalled]> {
  let summary = "A gated MLP's SiLU-gated projections as one op";
  let description = [{
    `silu(x Wg^T) * (x Wu^T)` (SwiGLU), `gate` and `up` `[out, in]` with
    one `out`, no biases, `form` as `tp.linear`'s: the gate and up
    projections of a gated MLP with the SiLU and the product after them.
    The runtime computes it as one GEMM over the two weights concatenated
    followed by one blockwise SiLU-and-multiply pass where its GEMM library
    has no post-ops (MKL, OpenBLAS), and as the up product followed by the
    gate's product with the SiLU and the multiplication as oneDNN post-ops
    where it has.

    `tp-fuse-epilogues` makes it from a `tp.linear_siblings` of two weights
    whose results only `tp.mul (tp.silu %r#0), %r#1` reads; like the other
    fused ops it has no partition rule or derivative.

    ```mlir
    %h = tp.linear_swiglu %x, %wg, %wu
        : (tensor<1x16x64xf32>, tensor<128x64xf32>, tensor<128x64xf32>)
        -> tensor<1x16x128xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$gate,
                   TP_FloatTensor:$up, OptionalAttr<TP_LinearFormAttr>:$form);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $gate `,` $up attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_AddRmsNormOp : TP_Op<"add_rms_norm", [Pure, TP_RuntimeCalled]> {
  let summary = "A residual add and the RMS norm of its sum, in one pass";
  let description = [{
    `sum = lhs + rhs` and `normed = tp.rms_norm sum, weight` with `epsilon`
    and `weight_offset` as there, over the whole last dimension (no
    groups): the residual stream's add and the norm of the next block that
    reads it, computed row by row in one pass that reads the two addends
    once and writes both results, instead of writing the sum and reading
    it back. `lhs`, `rhs`, `sum` and `normed` have one type; the weight may
    keep another float type, as `tp.rms_norm`'s. Both results are the two
    ops' values bit for bit (in bf16 the sum is rounded before the norm
    reads it, as when they are apart).

    `tp-fuse-add-rms-norm` makes it after partitioning and after the
    training step is built (a backward that reads the sum reads `sum`), so
    it has no partition rule and no derivative. The adds it finds are the
    ones no projection took as its epilogue: after a post-norm (Gemma3),
    a reduce-scatter (sequence parallelism) or an all-reduce that other
    work already reads.

    ```mlir
    %sum, %normed = tp.add_rms_norm %residual, %update, %w
        {epsilon = 1.0e-06 : f64}
        : (tensor<1x16x64xf32>, tensor<1x16x64xf32>, tensor<64xf32>)
        -> (tensor<1x16x64xf32>, tensor<1x16x64xf32>)
    ```
  }];
  let arguments = (ins TP_FloatTensor:$lhs, TP_FloatTensor:$rhs,
                   TP_FloatTensor:$weight, F64Attr:$epsilon,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_offset);
  let results = (outs TP_FloatTensor:$sum, TP_FloatTensor:$normed);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_BiasAddOp : TP_Op<"bias_add", [Pure, AllTypesMatch<["x", "result"]>,
                                     TP_Partitioned, TP_RuntimeCalled,
                                     TP_Differentiable]> {
  let summary = "Adds a bias to the last dimension";
  let description = [{
    `x + bias` with `bias` (`[features]`) broadcast over the leading
    dimensions of `x`. `tp-lower-linear` with `async-tp` splits a linear's
    bias into this op, so that the matmul directly feeds (or is fed by) its
    collective, the pattern async tensor parallelism fuses.

    ```mlir
    %z = tp.bias_add %y, %b : tensor<?x?x128xf32>, tensor<128xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$bias);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $bias attr-dict `:` type($x) `,` type($bias)
  }];
  let hasVerifier = 1;
}

def TP_RmsNormOp : TP_Op<"rms_norm",
    [Pure, TP_Partitioned, TP_RuntimeCalled, TP_Differentiable]> {
  let summary = "RMS normalization with weight offset and optional grouping";
  let description = [{
    Computes `x / sqrt(mean(x^2) + epsilon) * (weight_offset + weight)` over
    groups of `group_size` consecutive elements of the last dimension (the
    whole last dimension when `group_size` is absent). The mean is taken in
    f32 whatever the element type. The weight may be of another float type
    than `x` (a bf16 checkpoint's weight scaling a row its export computes
    in f32).

    `weight_offset = 1.0` is Gemma's `(1 + w)` form; `group_size = head_dim`
    is the per-head q_norm / k_norm of Qwen3 and Gemma3 applied to packed
    heads. `weight` has `group_size` elements (or the last dimension's size).

    ```mlir
    %n = tp.rms_norm %x, %w {epsilon = 1.0e-06 : f64}
        : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$weight,
                   F64Attr:$epsilon,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_offset,
                   OptionalAttr<I64Attr>:$group_size);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_RotaryOp : TP_Op<"rotary", [Pure, SameOperandsAndResultType,
                                 TP_Partitioned, TP_RuntimeCalled,
                                 TP_Differentiable]> {
  let summary = "Rotary position embedding on packed heads";
  let description = [{
    Rotates each head of `x` (`[batch, seq, heads * head_dim]`) by the rotary
    position embedding of its sequence position (0, 1, ...). Only the first
    `rotary_dim` features of each head rotate (all of them when absent). The
    pairing is the HuggingFace `rotate_half` one (feature `i` with
    `i + rotary_dim / 2`) unless `interleaved` is set (pairs `2i, 2i + 1`).
    Frequencies are `theta ^ (-2i / rotary_dim)`, scaled as transformers'
    `rope_type` says (its ROPE_INIT_FUNCTIONS, float32, `tprt/Rope.h`):
    - absent (`default`): unscaled;
    - `linear`: every frequency divided by `factor`;
    - `llama3`: with wavelength `2 pi / f`, frequencies whose wavelength
      exceeds `original_max_position_embeddings / low_freq_factor` are
      divided by `factor`, those below `.. / high_freq_factor` kept, and
      those between blended with `s = (original_max_position_embeddings /
      wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)`
      as `(1 - s) f / factor + s f`;
    - `yarn`: with `low` and `high` the dimensions where a frequency makes
      `beta_fast` and `beta_slow` turns over
      `original_max_position_embeddings` positions (floored and ceiled
      unless `truncate = false`), a ramp `r = clamp((i - low) / (high -
      low), 0, 1)` blends `f` into `f / factor` as `r f / factor + (1 - r)
      f`; cos and sin are multiplied by `attention_factor`;
    - `dynamic` (dynamic NTK): unscaled while the sequence length `L` is at
      most `original_max_position_embeddings` (the config's
      `max_position_embeddings`), else with the base `theta * (factor * L /
      original_max_position_embeddings - (factor - 1)) ^ (d / (d - 2))`
      (`d` the rotated width): the frequencies follow the length of each
      call, as transformers recomputes them per forward;
    - `longrope` (LongRoPE): frequency `i` divided by `short_factor[i]`
      while the sequence length is at most
      `original_max_position_embeddings`, by `long_factor[i]` beyond (one
      factor per rotated pair); cos and sin multiplied by
      `attention_factor`.

    With `transpose` the rotation is by the opposite angle (its transpose,
    the backward of the rotation; `attention_factor` still scales).

    ```mlir
    %q2 = tp.rotary %q {head_dim = 16 : i64, theta = 1.0e+04 : f64}
        : tensor<?x?x64xf32>
    %k2 = tp.rotary %k {head_dim = 16 : i64, theta = 5.0e+05 : f64,
        rope_type = "llama3", factor = 8.0 : f64, low_freq_factor = 1.0 : f64,
        high_freq_factor = 4.0 : f64,
        original_max_position_embeddings = 8192 : i64} : tensor<?x?x32xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, I64Attr:$head_dim, F64Attr:$theta,
                   OptionalAttr<I64Attr>:$rotary_dim,
                   UnitAttr:$interleaved,
                   OptionalAttr<StrAttr>:$rope_type,
                   OptionalAttr<F64Attr>:$factor,
                   OptionalAttr<F64Attr>:$low_freq_factor,
                   OptionalAttr<F64Attr>:$high_freq_factor,
                   OptionalAttr<I64Attr>:$original_max_position_embeddings,
                   OptionalAttr<F64Attr>:$beta_fast,
                   OptionalAttr<F64Attr>:$beta_slow,
                   OptionalAttr<BoolAttr>:$truncate,
                   OptionalAttr<F64Attr>:$attention_factor,
                   UnitAttr:$transpose,
                   OptionalAttr<DenseF64ArrayAttr>:$short_factor,
                   OptionalAttr<DenseF64ArrayAttr>:$long_factor);
  let results = (outs TP_FloatTensor:$result);
  let builders = [
    // Unscaled RoPE.
    OpBuilder<(ins "Type":$type, "Value":$x, "IntegerAttr":$head_dim,
                   "FloatAttr":$theta, "IntegerAttr":$rotary_dim,
                   "UnitAttr":$interleaved), [{
      build($_builder, $_state, type, x, head_dim, theta, rotary_dim,
            interleaved, StringAttr(), FloatAttr(), FloatAttr(), FloatAttr(),
            IntegerAttr(), FloatAttr(), FloatAttr(), BoolAttr(), FloatAttr(),
            UnitAttr(), DenseF64ArrayAttr(), DenseF64ArrayAttr());
    }]>
  ];
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def TP_AttentionOp : TP_Op<"attention",
    [Pure, TP_Partitioned, TP_RuntimeCalled, TP_Differentiable]> {
  let summary = "Grouped-query scaled dot-product attention on packed heads";
  let description = [{
    Multi-head attention with grouped KV heads. `q` is
    `[batch, seq_q, num_heads * head_dim]`, `k` and `v` are
    `[batch, seq_kv, num_kv_heads * head_dim]`; query head `h` reads KV head
    `h / (num_heads / num_kv_heads)`. Scores are `scale * q k^T`, then
    `softcap * tanh(scores / softcap)` when `softcap` is set, then masked:
    with `causal`, key `j` is visible to query `i` only if `j <= i`; with
    `sliding_window = W` also only if `i - j < W`; with `key_mask`
    (`[batch, seq_kv]`, non-zero = keep) masked keys are invisible. A query
    that sees no key yields zeros. The result has the shape of `q`.

    With a second result `lse` (f32 `[batch, seq_q, num_heads]`, as
    tp-save-attention-stats adds it for the backward) the op also gives
    each query's log-sum-exp, per head, of the scores of the keys it sees
    (after the scale and the cap; natural log), from which
    `tp.attention_grad` recomputes the probabilities without running the
    forward again. For a query that sees no key its value is the runtime's
    (the backward gives such a query no gradient whatever it holds).

    ```mlir
    %o = tp.attention %q, %k, %v mask %m {causal, head_dim = 16 : i64,
          num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64}
        : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>,
           tensor<?x?xi64>) -> tensor<?x?x64xf32>
    %o2, %lse = tp.attention %q, %k, %v {head_dim = 16 : i64,
          num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64}
        : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
        -> (tensor<?x?x64xf32>, tensor<?x?x4xf32>)
    ```
  }];
  let arguments = (ins TP_FloatTensor:$q, TP_FloatTensor:$k, TP_FloatTensor:$v,
                   Optional<TP_MaskTensor>:$key_mask,
                   I64Attr:$num_heads, I64Attr:$num_kv_heads,
                   I64Attr:$head_dim, F64Attr:$scale, UnitAttr:$causal,
                   OptionalAttr<I64Attr>:$sliding_window,
                   OptionalAttr<F64Attr>:$softcap);
  let results = (outs TP_FloatTensor:$result,
                      Optional<RankedTensorOf<[F32]>>:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`mask` $key_mask^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_Mamba2MixerOp : TP_Op<"mamba2_mixer",
    [Pure, TP_Partitioned, TP_RuntimeCalled, TP_Differentiable]> {
  let summary = "Mamba2 mixer (selective state space model) of NemotronH";
  let description = [{
    The whole Mamba2 mixer as HuggingFace's `NemotronHMamba2Mixer` computes
    it without a cache, on `x` `[batch, seq, hidden]`, with
    `I = num_heads * head_dim` and `C = I + 2 * n_groups * state_size`:

    1. `x *= key_mask` (padding positions zeroed) when the mask is given;
    2. `[gate (I), xBC (C), dt (num_heads)] = in_proj(x)` (`in_proj_weight`
       `[I + C + num_heads, hidden]`);
    3. `xBC = silu(causal depthwise conv1d(xBC))` with `conv_weight`
       `[C, 1, conv_kernel]` and `conv_bias` `[C]`, then masked again;
    4. `xBC = [x (I), B (n_groups * state_size), C (n_groups * state_size)]`;
       `dt = max(softplus(dt + dt_bias), dt_min)`, `A = -exp(a_log)`; per
       head `h` (group `g = h / (num_heads / n_groups)`), with state
       `S [head_dim, state_size]` starting at zero:
       `S = exp(dt A_h) S + dt x_h B_g^T`, `y_h = S C_g + d_h x_h`;
    5. `y = rms_norm(y * silu(gate))` over groups of `I / n_groups`, times
       `norm_weight`, with `norm_eps`;
    6. `out_proj(y)` (`out_proj_weight` `[hidden, I]`).

    With `folded_a`, the `a_log` operand holds `A = -exp(A_log)` itself: an
    exporter folded the expression into the stored constant. The parameters
    may be of different float types (a bf16 checkpoint keeps `a_log` and `d`
    in f32); the computation is f32.
  }];
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$in_proj_weight,
                   TP_FloatTensor:$conv_weight, TP_FloatTensor:$conv_bias,
                   TP_FloatTensor:$dt_bias, TP_FloatTensor:$a_log,
                   TP_FloatTensor:$d, TP_FloatTensor:$norm_weight,
                   TP_FloatTensor:$out_proj_weight,
                   Optional<TP_MaskTensor>:$key_mask,
                   I64Attr:$num_heads, I64Attr:$head_dim, I64Attr:$n_groups,
                   I64Attr:$state_size, I64Attr:$conv_kernel,
                   F64Attr:$norm_eps,
                   DefaultValuedAttr<F64Attr, "0.0">:$dt_min,
                   UnitAttr:$folded_a);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $in_proj_weight `,` $conv_weight `,` $conv_bias `,` $dt_bias `,`
    $a_log `,` $d `,` $norm_weight `,` $out_proj_weight
    (`mask` $key_mask^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class TP_UnaryElementwiseOp<string mnemonic, list<Trait> traits = []>
    : TP_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType,
                                       TP_RuntimeCalled, TP_Differentiable])> {
  let arguments = (ins TP_FloatTensor:$x);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  // Per element: the result is held as the operand is.
  let extraClassDefinition = [{
    ::llvm::LogicalResult
    $cppClass::partition(::mlir::tp::PartitionState &state) {
      state.propagate(getX(), getResult());
      return ::mlir::success();
    }
  }];
}

class TP_BinaryElementwiseOp<string mnemonic, list<Trait> traits = []>
    : TP_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType,
                                       TP_RuntimeCalled, TP_Differentiable])> {
  let arguments = (ins TP_FloatTensor:$lhs, TP_FloatTensor:$rhs);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs)";
}

def TP_AddOp : TP_BinaryElementwiseOp<"add", [Commutative,
                                                TP_PartitionedLinearly]> {
  let summary = "Elementwise addition (residual connections)";
}

def TP_MulOp : TP_BinaryElementwiseOp<"mul", [Commutative, TP_Partitioned]> {
  let summary = "Elementwise multiplication (gated MLP)";
}

def TP_SiluOp : TP_UnaryElementwiseOp<"silu", [TP_Partitioned]> {
  let summary = "SiLU activation x * sigmoid(x)";
}

def TP_ReluSquaredOp
    : TP_UnaryElementwiseOp<"relu_squared", [TP_Partitioned]> {
  let summary = "Squared ReLU activation max(x, 0)^2 (NemotronH MLP)";
}

def TP_GeluOp : TP_UnaryElementwiseOp<"gelu", [TP_Partitioned]> {
  let summary = "GELU activation, exact or tanh-approximated";
  let description = [{
    `approximate = none` is `0.5 x (1 + erf(x / sqrt(2)))`; `tanh` is
    `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))` (Gemma's
    `gelu_pytorch_tanh`).
  }];
  let arguments = (ins TP_FloatTensor:$x,
                   TP_GeluApproximationAttr:$approximate);
  let assemblyFormat = [{
    $x custom<GeluApproximation>($approximate) attr-dict `:` type($x)
  }];
}

def TP_SoftcapOp : TP_UnaryElementwiseOp<"softcap", [TP_Partitioned]> {
  let summary = "Soft-capping cap * tanh(x / cap)";
  let description = [{
    Squashes `x` smoothly into `(-cap, cap)`: Gemma's final logit
    soft-capping (`final_logit_softcapping`) on the logits.

    ```mlir
    %c = tp.softcap %logits cap 3.0e+01 : tensor<?x?x256xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, F64Attr:$cap);
  let assemblyFormat = "$x `cap` $cap attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def TP_ScaleOp : TP_UnaryElementwiseOp<"scale", [TP_PartitionedLinearly]> {
  let summary = "Multiplication by a compile-time constant";
  let description = [{
    `x * factor`, e.g. Gemma's embedding scale `sqrt(hidden_size)`. The factor
    is rounded to the element type first, as the exporters do.
  }];
  let arguments = (ins TP_FloatTensor:$x, F64Attr:$factor);
  let assemblyFormat = "$x `by` $factor attr-dict `:` type($x)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Feature slices
//===----------------------------------------------------------------------===//

def TP_FeatureSliceOp : TP_Op<"feature_slice",
    [Pure, TP_Partitioned, TP_RuntimeCalled, TP_Differentiable]> {
  let summary = "Features [offset, offset + size) of every token";
  let description = [{
    `x[..., offset : offset + size]`: one part of a fused projection's
    output (`qkv_proj`'s queries, `gate_up_proj`'s gate), as an ONNX
    `Split` or `Slice` of the last dimension cuts it. The leading
    dimensions and the element type are kept; the last dimension of `x` is
    static and holds the slice.

    On ranks, a replicated or sequence-split `x` is sliced locally; one
    split on its features is gathered first (the slice needs the whole
    row). Its gradient is `tp.feature_slice_grad`.

    ```mlir
    %q = tp.feature_slice %qkv [0, 64] : tensor<?x?x128xf32> -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, I64Attr:$offset, I64Attr:$size);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $x `[` $offset `,` $size `]` attr-dict `:` type($x) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// An all-reduce in flight (tp-overlap-all-reduces)
//===----------------------------------------------------------------------===//

def TP_AllGatherUnevenOp : TP_Op<"all_gather_uneven",
    [Pure, TP_RuntimeCalled]> {
  let summary = "All-gather of blocks that hold different numbers of elements";
  let description = [{
    `shard.all_gather` over `grid_axes` of `grid` along `gather_axis` for an
    uneven split (`tpc --allow-uneven`): rank r's `input` holds `sizes[r]`
    elements of the axis followed by padding up to the largest size, the
    length of the axis in `input`; `result` holds the ranks' elements one
    after the other (the axis is the sum of `sizes`) and no padding.
    `tp-partition` makes it where a value split unevenly is wanted whole
    (the logits over a vocabulary that does not divide by tp).

    ```mlir
    %l = tp.all_gather_uneven %x on @tp grid_axes = [0] gather_axis = 2
        sizes = [81, 80, 80, 80] : tensor<2x8x81xf32> -> tensor<2x8x321xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes, I64Attr:$gather_axis,
                   DenseI64ArrayAttr:$sizes);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes `gather_axis` `=`
    $gather_axis `sizes` `=` $sizes attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def TP_ReduceScatterUnevenOp : TP_Op<"reduce_scatter_uneven",
    [Pure, TP_RuntimeCalled]> {
  let summary = "Reduce-scatter into blocks of different numbers of elements";
  let description = [{
    `shard.reduce_scatter` (a sum) over `grid_axes` of `grid` along
    `scatter_axis` for an uneven split: rank r keeps elements
    `[sizes[0] + ... + sizes[r - 1], + sizes[r])` of the axis of the sum,
    in a block of the largest size whose tail is zeros; the axis of `input`
    is the sum of `sizes`. `tp-partition` makes it where a partial sum is
    wanted split over ranges that do not divide (x A^T of a row-split
    module's LoRA, its rank unevenly split).

    ```mlir
    %p = tp.reduce_scatter_uneven %x on @tp grid_axes = [0] scatter_axis = 2
        sizes = [3, 3, 2] : tensor<?x?x8xf32> -> tensor<?x?x3xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes, I64Attr:$scatter_axis,
                   DenseI64ArrayAttr:$sizes);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes `scatter_axis` `=`
    $scatter_axis `sizes` `=` $sizes attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def TP_AllSliceUnevenOp : TP_Op<"all_slice_uneven",
    [Pure, TP_RuntimeCalled]> {
  let summary = "This rank's uneven range of a replicated value";
  let description = [{
    `shard.all_slice` for an uneven split, without communication: rank r
    keeps elements `[starts[r], starts[r] + sizes[r])` of `slice_axis` of
    the replicated `input`, in a block of the largest size whose tail is
    zeros. `tp-partition` makes it where a row-split linear over uneven
    ranges reads a replicated value (transformers' rowwise_split_input
    after a fused projection's parts).

    ```mlir
    %b = tp.all_slice_uneven %x on @tp grid_axes = [0] slice_axis = 2
        starts = [0, 3, 5] sizes = [3, 2, 2]
        : tensor<?x?x7xf32> -> tensor<?x?x3xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes, I64Attr:$slice_axis,
                   DenseI64ArrayAttr:$starts, DenseI64ArrayAttr:$sizes);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes `slice_axis` `=`
    $slice_axis `starts` `=` $starts `sizes` `=` $sizes attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def TP_AllReduceStartOp : TP_Op<"all_reduce_start",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>,
     AllTypesMatch<["input", "pending"]>]> {
  let summary = "Begins a sum over a grid axis that tp.all_reduce_wait ends";
  let description = [{
    The first half of `shard.all_reduce` (sum over `grid_axes` of `grid`):
    every rank contributes `input`; `pending` holds the sum only once the
    one `tp.all_reduce_wait` that reads it has run, in the same block.
    What lies between runs while the ranks exchange (or while the ranks
    that arrive later catch up): `tp-overlap-all-reduces` puts there the
    work the sum does not feed. One all-reduce is in flight at a time: no
    other start comes before the wait, and a collective in between
    completes it first (the runtime's promise). It communicates, so
    nothing moves it.

    ```mlir
    %p = tp.all_reduce_start %dx on @tp grid_axes = [0] : tensor<?x?x64xf32>
    %dw = tp.linear_grad_weight %dy, %x : (...) -> tensor<64x64xf32>
    %s = tp.all_reduce_wait %p : tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$input, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes);
  let results = (outs TP_FloatTensor:$pending);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def TP_AllReduceWaitOp : TP_Op<"all_reduce_wait",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>,
     AllTypesMatch<["pending", "result"]>]> {
  let summary = "Ends the sum tp.all_reduce_start began";
  let description = [{
    `result` is the sum over the ranks of the start's input. `pending`
    must be a `tp.all_reduce_start`'s result in this block, with no other
    start between the two.
  }];
  let arguments = (ins TP_FloatTensor:$pending);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$pending attr-dict `:` type($pending)";
  let hasVerifier = 1;
}

include "tpopt/Dialect/TP/TPTrainOps.td"

#endif // TPOPT_DIALECT_TP_TPOPS_TD
