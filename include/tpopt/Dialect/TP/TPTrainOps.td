//===- TPTrainOps.td - tp ops of the training step ---------*- tablegen -*-===//
//
// The loss, the backward of each building block and the gradient sink that
// tp-build-train-step writes. Like the forward ops they are at global shapes
// until tp-partition localizes them, each by a rule of its own.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_DIALECT_TP_TPTRAINOPS_TD
#define TPOPT_DIALECT_TP_TPTRAINOPS_TD

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def TP_CrossEntropyOp : TP_Op<"cross_entropy",
    [Pure, TP_Partitioned, TP_RuntimeCalled, TP_Differentiable]> {
  let summary = "Causal-LM token cross-entropy, summed over label tokens";
  let description = [{
    The loss `transformers` computes for `labels = input_ids` with `-100`
    where `mask` is 0, before its division by the number of label tokens:
    position `t` of row `b` predicts token `ids[b, t + 1]` and counts when
    `mask[b, t + 1]` is non-zero. `loss` is the sum over those positions of
    `lse[b, t] - logits[b, t, ids[b, t + 1]]`, where `lse` (the second
    result, kept for the backward) is `log(sum(exp(logits[b, t, :])))`.

    With `vocab_parallel` (a partitioned program whose logits are split over
    the vocabulary) each rank holds a contiguous block of the vocabulary:
    the maximum and the sum of exponentials are all-reduced over the ranks
    of `@tp` inside the op, and the target logit comes from the rank that
    owns it, so the full logits are never gathered. Both results are
    replicated. With `vocab_starts` and `vocab_sizes` (an uneven split, one
    entry per rank) rank r's logits are vocabulary entries
    `[vocab_starts[r], vocab_starts[r] + vocab_sizes[r])` followed by
    padding up to the largest size, which the loss does not read.

    ```mlir
    %loss, %lse = tp.cross_entropy %logits, %ids, %mask
        : (tensor<?x?x256xf32>, tensor<?x?xi64>, tensor<?x?xi64>)
        -> (tensor<f32>, tensor<?x?xf32>)
    ```
  }];
  let arguments = (ins TP_FloatTensor:$logits, TP_IndexTensor:$ids,
                   TP_MaskTensor:$mask, UnitAttr:$vocab_parallel,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_starts,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_sizes);
  let results = (outs 0DTensorOf<[F32]>:$loss, TP_FloatTensor:$lse);
  let assemblyFormat = [{
    $logits `,` $ids `,` $mask attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_CrossEntropyGradOp : TP_Op<"cross_entropy_grad",
    [Pure, TP_Partitioned, TP_RuntimeCalled,
     AllTypesMatch<["logits", "result"]>]> {
  let summary = "Gradient of tp.cross_entropy's loss with respect to the logits";
  let description = [{
    The derivative of the summed loss of `tp.cross_entropy` (a seed of 1):
    `exp(logits - lse) - onehot(ids[b, t + 1])` at the positions the loss
    counts, zero elsewhere. With `vocab_parallel` each rank writes its block
    of the vocabulary, without communication (`lse` is already whole); the
    padding of an uneven block (`vocab_starts`, `vocab_sizes` as in
    `tp.cross_entropy`) gets zeros.

    ```mlir
    %dl = tp.cross_entropy_grad %logits, %ids, %mask, %lse
        : (tensor<?x?x256xf32>, tensor<?x?xi64>, tensor<?x?xi64>,
           tensor<?x?xf32>) -> tensor<?x?x256xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$logits, TP_IndexTensor:$ids,
                   TP_MaskTensor:$mask, TP_FloatTensor:$lse,
                   UnitAttr:$vocab_parallel,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_starts,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_sizes);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $ids `,` $mask `,` $lse attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_LinearCrossEntropyOp : TP_Op<"linear_cross_entropy",
    [Pure, TP_RuntimeCalled, AllTypesMatch<["x", "dx"]>,
     AllTypesMatch<["weight", "dweight"]>]> {
  let summary = "The output projection, the loss and their gradients, by blocks";
  let description = [{
    `tp.linear` (`logits = x W^T`, `weight` `[vocab, hidden]`),
    `tp.cross_entropy` on its logits, `tp.cross_entropy_grad` (a seed of
    1) and the projection's two gradients `dx = dlogits W` and
    `dweight = dlogits^T x` in one op, computed a block of positions at a
    time: each block's logits are made, reduced to the block's loss and
    turned into their gradient, which both products consume before the next
    block, so no `[batch, seq, vocab]` tensor is ever held (the logits of a
    large vocabulary are the largest activation of a training step).
    `vocab_parallel` is `tp.cross_entropy`'s: `weight` is this rank's block
    of the vocabulary, each block's maxima, sums and target logits are
    all-reduced over `@tp`, and `dx` is this rank's partial sum, as
    `tp.linear_grad_input`'s is; `vocab_starts` and `vocab_sizes` are
    `tp.cross_entropy`'s (the padding rows of `weight` are zeros, and so is
    their gradient).

    `tp-fuse-linear-cross-entropy` makes it on a partitioned training step
    from the five ops; it has no partition rule or derivative.

    ```mlir
    %loss, %dx, %dw = tp.linear_cross_entropy %x, %w, %ids, %mask
        : (tensor<?x?x64xf32>, tensor<256x64xf32>, tensor<?x?xi64>,
           tensor<?x?xi64>)
        -> (tensor<f32>, tensor<?x?x64xf32>, tensor<256x64xf32>)
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$weight,
                   TP_IndexTensor:$ids, TP_MaskTensor:$mask,
                   UnitAttr:$vocab_parallel,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_starts,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_sizes);
  let results = (outs 0DTensorOf<[F32]>:$loss, TP_FloatTensor:$dx,
                      TP_FloatTensor:$dweight);
  let assemblyFormat = [{
    $x `,` $weight `,` $ids `,` $mask attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward of the parameterized blocks
//===----------------------------------------------------------------------===//

def TP_LinearGradInputOp : TP_Op<"linear_grad_input",
    [Pure, TP_Partitioned, TP_RuntimeCalled]> {
  let summary = "Input gradient of a linear layer: dx = dy W";
  let description = [{
    `dy` (`[..., out]`) times `weight` (`[out, in]`): `[..., in]`. Under a
    column split (`weight` split on `out`, `dy` split on its last
    dimension) the result is a partial sum over the ranks; under a row
    split (`weight` split on `in`) it is split on its last dimension.

    ```mlir
    %dx = tp.linear_grad_input %dy, %w
        : (tensor<?x?x128xf32>, tensor<128x64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$dy, TP_FloatTensor:$weight);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $dy `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_LinearGradWeightOp : TP_Op<"linear_grad_weight",
    [Pure, TP_Partitioned, TP_RuntimeCalled]> {
  let summary = "Weight gradient of a linear layer: dW = dy^T x";
  let description = [{
    The sum over all leading positions of `dy^T x`: `[out, in]` from `dy`
    (`[..., out]`) and `x` (`[..., in]`), in f32. Split like the weight:
    on `out` when `dy` is split on its last dimension, on `in` when `x` is;
    a partial sum when both are split on the sequence.

    ```mlir
    %dw = tp.linear_grad_weight %dy, %x
        : (tensor<?x?x128xf32>, tensor<?x?x64xf32>) -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$dy, TP_FloatTensor:$x);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $dy `,` $x attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_SumLeadingOp : TP_Op<"sum_leading",
    [Pure, TP_Partitioned, TP_RuntimeCalled]> {
  let summary = "Sum over every dimension but the last (a bias gradient)";
  let description = [{
    `[..., features] -> [features]`, the gradient of a bias added over the
    leading dimensions.

    ```mlir
    %db = tp.sum_leading %dy : (tensor<?x?x128xf32>) -> tensor<128xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def TP_EmbeddingGradOp : TP_Op<"embedding_grad",
    [Pure, TP_Partitioned, TP_RuntimeCalled,
     AllTypesMatch<["table", "result"]>]> {
  let summary = "Gradient of the embedding table: rows scatter-added";
  let description = [{
    Adds `dy[i]` (`[..., hidden]`) to row `ids[i]` of a zero `[vocab,
    hidden]` gradient, except for ids equal to `padding_idx` (PyTorch's
    `nn.Embedding(padding_idx=...)` never trains that row). `table` is the
    parameter itself, read for its shape and placement only. With
    `vocab_parallel` each rank adds only the rows of its block of the
    vocabulary (with `vocab_starts` and `vocab_sizes`, its range of an
    uneven split, as in `tp.embedding`).

    ```mlir
    %dt = tp.embedding_grad %ids, %dy, %table
        : (tensor<?x?xi64>, tensor<?x?x64xf32>, tensor<256x64xf32>)
        -> tensor<256x64xf32>
    ```
  }];
  let arguments = (ins TP_IndexTensor:$ids, TP_FloatTensor:$dy,
                   TP_FloatTensor:$table, UnitAttr:$vocab_parallel,
                   OptionalAttr<I64Attr>:$padding_idx,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_starts,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_sizes);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $dy `,` $table attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_RmsNormGradOp : TP_Op<"rms_norm_grad",
    [Pure, TP_Partitioned, TP_RuntimeCalled]> {
  let summary = "Gradients of tp.rms_norm with respect to x and the weight";
  let description = [{
    With `r = 1 / sqrt(mean(x^2) + epsilon)` and `xhat = x r` per group,
    `dx = r (g - xhat mean(g xhat))` where `g = dy (weight_offset +
    weight)`, and `dweight = sum(dy xhat)` over all rows and groups. The
    inverse RMS is recomputed from `x`. Under per-head grouping on split
    heads, or on a sequence split, `dweight` is a partial sum.

    ```mlir
    %dx, %dw = tp.rms_norm_grad %x, %w, %dy {epsilon = 1.0e-06 : f64}
        : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<?x?x64xf32>)
        -> (tensor<?x?x64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$weight,
                   TP_FloatTensor:$dy, F64Attr:$epsilon,
                   DefaultValuedAttr<F64Attr, "0.0">:$weight_offset,
                   OptionalAttr<I64Attr>:$group_size);
  let results = (outs TP_FloatTensor:$dx, TP_FloatTensor:$dweight);
  let assemblyFormat = [{
    $x `,` $weight `,` $dy attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_AttentionGradOp : TP_Op<"attention_grad",
    [Pure, TP_Partitioned, TP_RuntimeCalled, AttrSizedOperandSegments]> {
  let summary = "Gradients of tp.attention with respect to q, k and v";
  let description = [{
    The backward of `tp.attention` with the same attributes: the
    probabilities are recomputed from `q` and `k` per (batch, head), then
    `dv = P^T dout`, `dP = dout v^T`, `dS = P (dP - rowsum(dP P))` (times
    `1 - tanh^2` of the capped scores with `softcap`), `dq = scale dS k`
    and `dk = scale dS^T q`, summed over the query heads of a KV group.

    Each row's normalisation (its log-sum-exp) and `rowsum(dP P) =
    dout . out` come from a forward run again, or, with `saved`, from the
    forward's output `out` (q's type) and its `lse` result (f32
    `[batch, seq_q, num_heads]`), which tp-save-attention-stats passes.

    ```mlir
    %dq, %dk, %dv = tp.attention_grad %q, %k, %v, %do mask %m {causal,
          head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64,
          scale = 2.5e-01 : f64}
        : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>,
           tensor<?x?x64xf32>, tensor<?x?xi64>)
        -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
    %dq2, %dk2, %dv2 = tp.attention_grad %q, %k, %v, %do saved %o, %lse
          {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64,
          scale = 2.5e-01 : f64}
        : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>,
           tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x4xf32>)
        -> (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>)
    ```
  }];
  let arguments = (ins TP_FloatTensor:$q, TP_FloatTensor:$k, TP_FloatTensor:$v,
                   TP_FloatTensor:$dout, Optional<TP_MaskTensor>:$key_mask,
                   Optional<TP_FloatTensor>:$out,
                   Optional<RankedTensorOf<[F32]>>:$lse,
                   I64Attr:$num_heads, I64Attr:$num_kv_heads,
                   I64Attr:$head_dim, F64Attr:$scale, UnitAttr:$causal,
                   OptionalAttr<I64Attr>:$sliding_window,
                   OptionalAttr<F64Attr>:$softcap);
  let results = (outs TP_FloatTensor:$dq, TP_FloatTensor:$dk,
                      TP_FloatTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $dout (`mask` $key_mask^)?
    (`saved` $out^ `,` $lse)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_Mamba2MixerGradOp : TP_Op<"mamba2_mixer_grad",
    [Pure, TP_Partitioned, TP_RuntimeCalled]> {
  let summary = "Gradients of tp.mamba2_mixer's operands";
  let description = [{
    The backward of `tp.mamba2_mixer` with the same operands and
    attributes, given `dout`, the output's cotangent: the forward is
    recomputed (keeping the scan's states), then the output projection, the
    gated grouped RMS norm, the selective scan (last step first), the
    masked SiLU of the causal convolution and the input projection are
    differentiated in turn. One result per differentiable operand, in
    operand order.
  }];
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$in_proj_weight,
                   TP_FloatTensor:$conv_weight, TP_FloatTensor:$conv_bias,
                   TP_FloatTensor:$dt_bias, TP_FloatTensor:$a_log,
                   TP_FloatTensor:$d, TP_FloatTensor:$norm_weight,
                   TP_FloatTensor:$out_proj_weight, TP_FloatTensor:$dout,
                   Optional<TP_MaskTensor>:$key_mask,
                   I64Attr:$num_heads, I64Attr:$head_dim, I64Attr:$n_groups,
                   I64Attr:$state_size, I64Attr:$conv_kernel,
                   F64Attr:$norm_eps,
                   DefaultValuedAttr<F64Attr, "0.0">:$dt_min,
                   UnitAttr:$folded_a);
  let results = (outs TP_FloatTensor:$dx, TP_FloatTensor:$din_proj_weight,
                      TP_FloatTensor:$dconv_weight, TP_FloatTensor:$dconv_bias,
                      TP_FloatTensor:$ddt_bias, TP_FloatTensor:$da_log,
                      TP_FloatTensor:$dd, TP_FloatTensor:$dnorm_weight,
                      TP_FloatTensor:$dout_proj_weight);
  let assemblyFormat = [{
    $x `,` $in_proj_weight `,` $conv_weight `,` $conv_bias `,` $dt_bias `,`
    $a_log `,` $d `,` $norm_weight `,` $out_proj_weight `,` $dout
    (`mask` $key_mask^)? attr-dict `:` functional-type(operands, results)
  }];
}

def TP_FeatureSliceGradOp : TP_Op<"feature_slice_grad",
    [Pure, TP_Partitioned, TP_RuntimeCalled]> {
  let summary = "Gradient of tp.feature_slice: dy placed in zeros";
  let description = [{
    `[..., width]` zeros with `dy` (`[..., size]`) at features `[offset,
    offset + size)`: the cotangent of the sliced input. The parts of one
    `Split` each give theirs, and the training step sums them.

    ```mlir
    %dx = tp.feature_slice_grad %dq [0] width 128 : tensor<?x?x64xf32> -> tensor<?x?x128xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$dy, I64Attr:$offset, I64Attr:$width);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = [{
    $dy `[` $offset `]` `width` $width attr-dict `:` type($dy) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward of the elementwise ops: dx = dy * f'(x)
//===----------------------------------------------------------------------===//

class TP_ElementwiseGradOp<string mnemonic, string forward>
    : TP_Op<mnemonic, [Pure, SameOperandsAndResultType, TP_RuntimeCalled,
                       TP_Partitioned]> {
  let summary = "Gradient of tp." # forward # ": dy * " # forward # "'(x)";
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$dy);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($x)";
}

def TP_SiluGradOp : TP_ElementwiseGradOp<"silu_grad", "silu">;
def TP_ReluSquaredGradOp
    : TP_ElementwiseGradOp<"relu_squared_grad", "relu_squared">;

def TP_GeluGradOp : TP_ElementwiseGradOp<"gelu_grad", "gelu"> {
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$dy,
                   TP_GeluApproximationAttr:$approximate);
  let assemblyFormat = [{
    $x `,` $dy custom<GeluApproximation>($approximate) attr-dict `:` type($x)
  }];
}

def TP_SoftcapGradOp : TP_ElementwiseGradOp<"softcap_grad", "softcap"> {
  let arguments = (ins TP_FloatTensor:$x, TP_FloatTensor:$dy, F64Attr:$cap);
  let assemblyFormat = "$x `,` $dy `cap` $cap attr-dict `:` type($x)";
}

def TP_SiluMulGradOp : TP_Op<"silu_mul_grad",
    [Pure, SameOperandsAndResultType, TP_RuntimeCalled, TP_Partitioned]> {
  let summary = "Both gradients of a gated MLP's silu(gate) * up in one pass";
  let description = [{
    With `s = sigmoid(gate)`: `dup = dy * gate * s` and `dgate = dy * up *
    s * (1 + gate * (1 - s))`, what `tp.mul`'s and `tp.silu`'s gradients
    give for `tp.mul (tp.silu %gate), %up` (the SiLU recomputed from the
    gate instead of kept from the forward). `tp-fuse-silu-mul-grad` makes it
    from those three ops in a training step: one pass that reads three
    tensors and writes two instead of three passes (the two products and
    `tp.silu_grad`), and the forward's SiLU no longer kept for the backward.
    All five tensors have one type; elementwise, so split as its operands
    are.

    ```mlir
    %dgate, %dup = tp.silu_mul_grad %gate, %up, %dy : tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$gate, TP_FloatTensor:$up,
                   TP_FloatTensor:$dy);
  let results = (outs TP_FloatTensor:$dgate, TP_FloatTensor:$dup);
  let assemblyFormat = "$gate `,` $up `,` $dy attr-dict `:` type($gate)";
}

//===----------------------------------------------------------------------===//
// Layouts of cotangents
//===----------------------------------------------------------------------===//

def TP_HoldLikeOp : TP_Op<"hold_like",
    [Pure, DeclareOpInterfaceMethods<TP_PartitionOpInterface,
                                     ["keepsPartialSums", "readsOnlyLayout"]>,
     AllTypesMatch<["cotangent", "like", "result"]>]> {
  let summary = "A cotangent, held on the ranks as a forward value is";
  let description = [{
    The identity on `cotangent`, the backward of an activation's layout
    annotation (`shard.shard`): the cotangent of the annotated value's
    source, held as `like` (that source) is held in the forward. Only
    `tp-partition` knows how that is, so it is the one that gives the
    annotation its transpose: whole (`like` replicated, or a partial sum
    whose cotangent every rank's part reads) by an all-reduce of a partial
    cotangent or an all-gather of a split one; split like `like` by a
    reduce-scatter of a partial cotangent (the transpose of an all-gather)
    or a slice of a whole one (the transpose of a slice). The op is gone
    after partitioning.

    ```mlir
    %d = tp.hold_like %dy, %x : tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$cotangent, TP_FloatTensor:$like);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$cotangent `,` $like attr-dict `:` type($result)";
}

def TP_ReplicaSumOp : TP_Op<"replica_sum",
    [Pure, SameOperandsAndResultType, TP_Partitioned, TP_RuntimeCalled]> {
  let summary = "Sum of a block's gradient over the ranks that share it";
  let description = [{
    In a partitioned program where some ranks of `@tp` hold the same block
    of a parameter (KV heads fewer than the ranks), rank r holding block
    `blocks[r]`, each rank's gradient of its block is the part its own query
    heads contribute; every rank gets the sum over the ranks holding the
    same block. The blocks are numbered from 0 in the order of the ranks
    that first hold them; an uneven split's blocks may be shared by groups
    of different sizes. `tp-partition` adds it before `tp.accumulate_grad`.

    ```mlir
    %g = tp.replica_sum %dk {blocks = array<i64: 0, 0, 1, 1>}
        : tensor<16x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, DenseI64ArrayAttr:$blocks);
  let results = (outs TP_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradient sink
//===----------------------------------------------------------------------===//

def TP_AccumulateGradOp : TP_Op<"accumulate_grad",
    [TP_PartitionedLinearly, TP_RuntimeCalled, AllTypesMatch<["grad", "param"]>,
     MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Adds a parameter's gradient into its gradient buffer";
  let description = [{
    The end of the backward for parameter `param` (an argument of the entry
    function whose `tp.fqn` is `fqn`): `grad`, of the parameter's (local)
    shape, is added to the runtime's f32 gradient buffer of that FQN, which
    holds the sum over the micro-batches of an optimizer step until the
    optimizer boundary consumes it. Only trainable parameters have one.
    `split_dim` is the dimension `tp-partition` split the parameter on (-1:
    replicated), which the gradient norm needs.

    A partitioned gradient of a split parameter is held as its parameter is.
    A replicated parameter's gradient is accumulated as each rank has it,
    and `tp-partition` records its replica class, read off the backward:
    `derived_reduction = mean` when the gradient is whole on every rank
    (computed redundantly), `sum` when it is a partial sum (each rank saw
    part of the heads or of the sequence). `reduction` is the class the
    optimizer boundary applies: the derived one, or the plan's
    `tp.grad_reduction` override. The partial sums are not all-reduced
    here: `tp-replica-grad-sync` reduces them once per optimizer step, in
    buckets. `owned` (a parameter the plan excludes, `tp.exclude`): each
    rank's copy is its own, its gradient is applied as the rank has it and
    counted once per rank in the norm; it has no replica class.

    ```mlir
    tp.accumulate_grad %dw into %w {fqn = "lm_head.weight"}
        : tensor<128x64xf32>
    tp.accumulate_grad %dn into %n {fqn = "model.norm.weight",
        reduction = #tp.grad_reduction<sum>,
        derived_reduction = #tp.grad_reduction<sum>} : tensor<64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$grad, TP_FloatTensor:$param,
                   StrAttr:$fqn,
                   DefaultValuedAttr<I64Attr, "-1">:$split_dim,
                   OptionalAttr<TP_GradReductionAttr>:$reduction,
                   OptionalAttr<TP_GradReductionAttr>:$derived_reduction,
                   UnitAttr:$owned);
  let assemblyFormat = "$grad `into` $param attr-dict `:` type($grad)";
  let hasVerifier = 1;
}

def TP_AccumulateLinearGradWeightOp : TP_Op<"accumulate_linear_grad_weight",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "A linear's weight gradient, added into its buffer by the product";
  let description = [{
    `tp.accumulate_grad` of `tp.linear_grad_weight %dy, %x` in one step:
    the product `dy^T x` (summed over every leading dimension) is added to
    the runtime's f32 gradient buffer of `fqn` by the GEMM itself (beta =
    1; the step's first micro-batch overwrites it), with no gradient tensor
    of its own and no separate pass over the buffer (Megatron-LM's
    gradient-accumulation fusion). `dy` is `[..., out]`, `x` `[..., in]`
    with the same leading dimensions, `param` the `[out, in]` weight; the
    attributes are `tp.accumulate_grad`'s.

    `tp-fuse-grad-accumulation` makes it, after `tp-replica-grad-sync` has
    read every `tp.accumulate_grad`'s class: it has no partition rule or
    derivative. The runtime fuses f32 on the host; in bf16 and f16 and on
    the GPU it runs the two ops (a bf16 product into the f32 buffer writes
    twice the bytes of its bf16 result, and measured slower).

    ```mlir
    tp.accumulate_linear_grad_weight %dy, %x into %w {fqn = "lm_head.weight"}
        : tensor<?x?x128xf32>, tensor<?x?x64xf32>, tensor<128x64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$dy, TP_FloatTensor:$x,
                   TP_FloatTensor:$param, StrAttr:$fqn,
                   DefaultValuedAttr<I64Attr, "-1">:$split_dim,
                   OptionalAttr<TP_GradReductionAttr>:$reduction,
                   OptionalAttr<TP_GradReductionAttr>:$derived_reduction,
                   UnitAttr:$owned);
  let assemblyFormat = [{
    $dy `,` $x `into` $param attr-dict `:` type($dy) `,` type($x) `,`
    type($param)
  }];
  let hasVerifier = 1;
}

def TP_AccumulateLinearCrossEntropyOp
    : TP_Op<"accumulate_linear_cross_entropy",
            [TP_RuntimeCalled, AllTypesMatch<["x", "dx"]>,
             MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "tp.linear_cross_entropy with its weight gradient added into the buffer";
  let description = [{
    `tp.linear_cross_entropy %x, %param, %ids, %mask` whose `dweight` only a
    `tp.accumulate_grad` into `param` reads, in one step: each block's
    share of `dweight` is added to the runtime's f32 gradient buffer of
    `fqn` by its product (the step's first micro-batch overwrites it), so
    no `[vocab, hidden]` gradient is made: for a large vocabulary that
    tensor is the largest of the backward. Results `loss` and `dx` are
    `tp.linear_cross_entropy`'s; `vocab_parallel`, `vocab_starts` and
    `vocab_sizes` are its attributes, the others `tp.accumulate_grad`'s.

    `tp-fuse-grad-accumulation` makes it, after `tp-replica-grad-sync`: it
    has no partition rule or derivative. The runtime fuses f32 on the host;
    in bf16 and f16 and on the GPU it runs the two ops.

    With `runs_bucket` (ZeRO stage 3, `tp-stream-param-runs`), `param` is
    the training step's argument, which the runtime holds as this rank's
    data-parallel run of that bucket (its only parameter), and the op
    never reads it whole: `block_rows` rows of it at a time are
    all-gathered over `@dp` (three passes: the maxima, the sums of
    exponentials, then the gradients), and each block's share of `dweight`
    is reduce-scattered over `@dp` into the bucket's gradient run (the
    bucket's `tp.grad_bucket_reduce_scatter {streamed}` closes the
    micro-batch).

    ```mlir
    %loss, %dx = tp.accumulate_linear_cross_entropy %x, %ids, %mask
        into %w {fqn = "lm_head.weight"}
        : (tensor<?x?x64xf32>, tensor<?x?xi64>, tensor<?x?xi64>,
           tensor<256x64xf32>) -> (tensor<f32>, tensor<?x?x64xf32>)
    ```
  }];
  let arguments = (ins TP_FloatTensor:$x, TP_IndexTensor:$ids,
                   TP_MaskTensor:$mask, TP_FloatTensor:$param, StrAttr:$fqn,
                   DefaultValuedAttr<I64Attr, "-1">:$split_dim,
                   OptionalAttr<TP_GradReductionAttr>:$reduction,
                   OptionalAttr<TP_GradReductionAttr>:$derived_reduction,
                   UnitAttr:$owned, UnitAttr:$vocab_parallel,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_starts,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_sizes,
                   OptionalAttr<I64Attr>:$runs_bucket,
                   OptionalAttr<I64Attr>:$block_rows);
  let results = (outs 0DTensorOf<[F32]>:$loss, TP_FloatTensor:$dx);
  let assemblyFormat = [{
    $x `,` $ids `,` $mask `into` $param attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def TP_AccumulateEmbeddingGradOp : TP_Op<"accumulate_embedding_grad",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "An embedding table's gradient, its rows added into the buffer";
  let description = [{
    `tp.accumulate_grad` of `tp.embedding_grad %ids, %dy, %param` in one
    step: each `dy[i]` is added to row `ids[i]` of the runtime's f32
    gradient buffer of `fqn` (the step's first micro-batch zeroes the
    buffer first), skipping `padding_idx` and, with `vocab_parallel`, the
    ids outside this rank's block of the vocabulary (its range with
    `vocab_starts` and `vocab_sizes`). No `[vocab, hidden]`
    gradient is made: for a large vocabulary that tensor is the largest of
    the backward. `ids` and `dy` are `tp.embedding_grad`'s; the other
    attributes are `tp.accumulate_grad`'s.

    `tp-fuse-grad-accumulation` makes it, after `tp-replica-grad-sync`: it
    has no partition rule or derivative. On the GPU the runtime runs the
    two ops.

    With `runs_bucket` and `block_rows`, as for
    `tp.accumulate_linear_cross_entropy`: each block of `block_rows` rows'
    gradient is reduce-scattered over `@dp` into the bucket's gradient
    run, and `param` (the step's argument, held as runs) is not read.

    ```mlir
    tp.accumulate_embedding_grad %ids, %dy into %table
        {fqn = "model.embed_tokens.weight", padding_idx = 0 : i64}
        : tensor<?x?xi64>, tensor<?x?x64xf32>, tensor<256x64xf32>
    ```
  }];
  let arguments = (ins TP_IndexTensor:$ids, TP_FloatTensor:$dy,
                   TP_FloatTensor:$param, StrAttr:$fqn,
                   DefaultValuedAttr<I64Attr, "-1">:$split_dim,
                   OptionalAttr<TP_GradReductionAttr>:$reduction,
                   OptionalAttr<TP_GradReductionAttr>:$derived_reduction,
                   UnitAttr:$owned, UnitAttr:$vocab_parallel,
                   OptionalAttr<I64Attr>:$padding_idx,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_starts,
                   OptionalAttr<DenseI64ArrayAttr>:$vocab_sizes,
                   OptionalAttr<I64Attr>:$runs_bucket,
                   OptionalAttr<I64Attr>:$block_rows);
  let assemblyFormat = [{
    $ids `,` $dy `into` $param attr-dict `:` type($ids) `,` type($dy) `,`
    type($param)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Program start (func.func @init)
//===----------------------------------------------------------------------===//

def TP_BroadcastReplicaOp : TP_Op<"broadcast_replica",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Makes every rank's copy of a replicated parameter rank 0's";
  let description = [{
    In the program's `@init` (`tp.entry = "init"`), which the runtime runs
    once before the first step: `param`, a replicated parameter (the
    argument of `@init` whose `tp.fqn` is `fqn`), is overwritten in place
    on every rank of `@tp` with TP rank 0's copy (AutoModel's
    `broadcast_tp_replicas`), so that replicas start equal whatever each
    rank read. Written by `tp-broadcast-replicas`, one per replicated
    parameter in FQN order. With `group = "dp"`, over the data-parallel
    group instead, from its first rank (every parameter, this rank's block
    of a split one: data-parallel replicas start equal too).

    ```mlir
    tp.broadcast_replica %w {fqn = "model.norm.weight"} : tensor<64xf32>
    ```
  }];
  let arguments = (ins TP_FloatTensor:$param, StrAttr:$fqn,
                   DefaultValuedStrAttr<StrAttr, "tp">:$group);
  let assemblyFormat = "$param attr-dict `:` type($param)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Optimizer boundary (func.func @optimizer_step)
//===----------------------------------------------------------------------===//

def TP_OptimizerBoundaryOp : TP_Op<"optimizer_boundary",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Where the micro-batches' gradient accumulation ends";
  let description = [{
    The first op of the optimizer step (`tp.entry = "optimizer_step"`),
    which the runtime calls once per optimizer step after the training
    step has run on its K micro-batches: from here on the gradient buffers
    hold the step's sums. The runtime checks that every trainable
    parameter has one. What follows it, in order: the replica-gradient
    buckets (`tp-replica-grad-sync`), the normalization by the label
    tokens, the norm, the clipping and the update.

    ```mlir
    tp.optimizer_boundary
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def TP_GradBucketAllReduceOp : TP_Op<"grad_bucket_all_reduce",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "One all-reduce of a bucket of replicated parameters' gradients";
  let description = [{
    Synchronizes the gradient buffers of the replicated parameters `fqns`
    (in that order) over the ranks of `@tp`: they are packed into one FP32
    buffer of `bytes` bytes (gradients of another `dtype` cast to FP32 on
    the way in and back on the way out), all-reduced with a sum, divided
    by the ranks when `reduction` is `mean`, and unpacked. Written by
    `tp-replica-grad-sync`; `bucket` numbers the buckets in the order they
    run. With `group = "dp"` the reduction is over the data-parallel group
    (`@dp`: the ranks at the same position of their tensor-parallel
    groups) instead, where every gradient is a partial sum of the global
    batch.

    ```mlir
    tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 512 : i64,
        dtype = f32, fqns = ["model.layers.0.input_layernorm.weight",
                              "model.norm.weight"],
        reduction = #tp.grad_reduction<mean>}
    ```
  }];
  let arguments = (ins I64Attr:$bucket, TP_GradReductionAttr:$reduction,
                   TypeAttrOf<AnyFloat>:$dtype, StrArrayAttr:$fqns,
                   I64Attr:$bytes,
                   DefaultValuedStrAttr<StrAttr, "tp">:$group);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def TP_GradBucketReduceScatterOp : TP_Op<"grad_bucket_reduce_scatter",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "One reduce-scatter of a bucket of gradients over the "
                "data-parallel group (ZeRO)";
  let description = [{
    With `tpc --zero 1`: the gradient buffers `fqns` (in that order; `bytes`
    at FP32 size in all) are packed into one FP32 buffer of `padded_bytes`
    (zeros after the gradients, up to a multiple of `lcm(D, 128)` elements
    for `@dp` of size D: `tprt::shardedBucketElements`), which is
    reduce-scattered (sum) over `@dp`: data-parallel rank `r` keeps the
    sum of the `r`-th of D equal runs of it and owns the optimizer state
    of those elements (Megatron-LM's distributed optimizer, ZeRO stage 1).
    `tp.grad_norm {dp_sharded}` and `tp.optimizer_update {dp_sharded}` then
    read only this rank's run, and `tp.param_bucket_all_gather` of the same
    `bucket` brings every rank the updated parameters. `dtype` is the
    parameters' type. Written by `tp-replica-grad-sync` in place of the
    data-parallel `tp.grad_bucket_all_reduce`, in the optimizer step after
    `tp.optimizer_boundary`.

    With `micro_batch` (`tpc --zero 2`, ZeRO stage 2) the op is in the
    training step instead, after the last accumulation of its gradients,
    and runs once per micro-batch: the sums of this micro-batch's gradients
    in this rank's run are added to those of the step's earlier
    micro-batches (the step's first overwrites), and the whole buffer is
    released. A rank then holds, between the bucket's reduce-scatter and
    the optimizer update, only its run of the gradients: a decoder layer's
    bucket is whole only from the layer's first gradient in the backward to
    its reduce-scatter. The tensor-parallel replica buckets at the boundary
    sum the runs.

    With `streamed` as well (one parameter, read by ops with `runs_bucket`
    of this bucket: `tp-stream-param-runs`), those ops have already
    reduce-scattered its gradient block by block into the run, and no
    whole buffer is made: the op closes the micro-batch (each gradient of
    the bucket must have been added).

    ```mlir
    tp.grad_bucket_reduce_scatter {bucket = 1 : i64, bytes = 4096 : i64,
        dtype = f32, fqns = ["lm_head.weight"], padded_bytes = 4096 : i64}
    tp.grad_bucket_reduce_scatter {bucket = 2 : i64, bytes = 512 : i64,
        dtype = f32, fqns = ["model.layers.0.input_layernorm.weight"],
        micro_batch, padded_bytes = 1024 : i64}
    ```
  }];
  let arguments = (ins I64Attr:$bucket, TypeAttrOf<AnyFloat>:$dtype,
                   StrArrayAttr:$fqns, I64Attr:$bytes, I64Attr:$padded_bytes,
                   UnitAttr:$micro_batch, UnitAttr:$streamed);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def TP_ParamBucketAllGatherOp : TP_Op<"param_bucket_all_gather",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "The parameters of a data-parallel sharded bucket, "
                "all-gathered after their update";
  let description = [{
    After `tp.optimizer_update {dp_sharded}`: each rank of `@dp` updated
    the run of the parameters `fqns` it owns (the runs of
    `tp.grad_bucket_reduce_scatter` with the same `bucket`); one
    all-gather over `@dp` of `bytes` (the padded bucket's elements in the
    parameters' `dtype`) gives every rank all of them again.

    ```mlir
    tp.param_bucket_all_gather {bucket = 1 : i64, bytes = 4096 : i64,
        dtype = f32, fqns = ["lm_head.weight"]}
    ```
  }];
  let arguments = (ins I64Attr:$bucket, TypeAttrOf<AnyFloat>:$dtype,
                   StrArrayAttr:$fqns, I64Attr:$bytes);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def TP_ParamBucketGatherOp : TP_Op<"param_bucket_gather",
    [TP_RuntimeCalled, MemoryEffects<[MemRead]>]> {
  let summary = "The parameters of a data-parallel sharded bucket, "
                "all-gathered for their uses (ZeRO stage 3)";
  let description = [{
    With parameters held as data-parallel runs (`tp.param_bucket_shard`,
    ZeRO stage 3, FSDP2's `reshard_after_forward=True`): one all-gather
    over `@dp` of `bytes` (the padded bucket's elements in the parameters'
    `dtype`, the runs of `tp.grad_bucket_reduce_scatter` with the same
    `bucket`) gives this rank the whole parameters `fqns`, one result
    each, in that order, views of one buffer. The results stand for the
    parameters in the ops that read them, gradient accumulations
    included (which take the parameter's shape from it), so that the
    gathered buffer goes when the last of them has read it:
    `tp-shard-params` gathers a decoder layer's bucket once for its
    forward and once for its backward, and the bucket outside the layers
    once per step.

    ```mlir
    %w:2 = tp.param_bucket_gather {bucket = 2 : i64, bytes = 1024 : i64,
        dtype = f32, fqns = ["model.layers.0.input_layernorm.weight",
                             "model.layers.0.self_attn.q_proj.weight"]}
        : tensor<16xf32>, tensor<4x16xf32>
    ```
  }];
  let arguments = (ins I64Attr:$bucket, TypeAttrOf<AnyFloat>:$dtype,
                   StrArrayAttr:$fqns, I64Attr:$bytes);
  let results = (outs Variadic<TP_FloatTensor>:$params);
  let assemblyFormat = "attr-dict `:` type($params)";
  let hasVerifier = 1;
}

def TP_ParamBucketShardOp : TP_Op<"param_bucket_shard",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Keeps this rank's run of a bucket's parameters and drops "
                "the whole ones (ZeRO stage 3)";
  let description = [{
    In the program's init, after the parameters `fqns` were read and
    broadcast: the bucket's layout (the parameters in that order, padded
    to `bytes`, the parameters' `dtype`, in equal runs over `@dp`, the
    runs of `tp.grad_bucket_reduce_scatter` with the same `bucket`) is
    fixed, this rank keeps its run and the whole parameters are dropped.
    From then on the training step reads them through
    `tp.param_bucket_gather` and the update writes the runs.

    A run without training (the forward of a training program) keeps the
    whole parameters: the op does nothing there.

    ```mlir
    tp.param_bucket_shard {bucket = 1 : i64, bytes = 4096 : i64,
        dtype = f32, fqns = ["lm_head.weight"]}
    ```
  }];
  let arguments = (ins I64Attr:$bucket, TypeAttrOf<AnyFloat>:$dtype,
                   StrArrayAttr:$fqns, I64Attr:$bytes);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def TP_NormalizeGradsOp : TP_Op<"normalize_grads",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Divides every gradient by the step's label tokens";
  let description = [{
    The loss of an optimizer step is the sum over its micro-batches divided
    by the number of label tokens in the whole step (AutoModel's
    `num_label_tokens`); the gradients, accumulated as sums, are divided by
    the same count, which the runtime knows once the micro-batches ran.
    The CPU runtime does not pass over the buffers for it: the factor stays
    pending on each buffer, `tp.grad_norm` scales its sums by it and
    `tp.optimizer_update` multiplies each gradient element as it reads it
    (the same f32 gradient the scaled buffer would hold).

    ```mlir
    tp.normalize_grads
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def TP_GradNormOp : TP_Op<"grad_norm",
    [TP_RuntimeCalled, MemoryEffects<[MemRead]>]> {
  let summary = "The global norm of the gradients, replicas counted once";
  let description = [{
    The L2 norm (or the largest magnitude, `model --norm-type inf`) of all
    gradients as one vector of the unsharded model, squares accumulated in
    FP64: a split gradient's contributions are summed over the ranks of
    `@tp` (a block held by several ranks counted once), a replicated
    gradient (synchronized before) is counted once, not once per rank.

    ```mlir
    %norm = tp.grad_norm : tensor<f32>
    ```

    With `dp_sharded` (`tpc --zero 1`) each rank holds the reduced
    gradients only of its runs of the data-parallel buckets
    (`tp.grad_bucket_reduce_scatter`): its parts of the sums are added
    over `@dp` as well, so every element still counts once.
  }];
  let arguments = (ins UnitAttr:$dp_sharded);
  let results = (outs 0DTensorOf<[F32]>:$norm);
  let assemblyFormat = "attr-dict `:` type($norm)";
}

def TP_ClipGradsOp : TP_Op<"clip_grads",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Scales the gradients to the run's maximum norm";
  let description = [{
    `torch.nn.utils.clip_grad_norm_`: with `model --max-grad-norm M`, every
    gradient is multiplied by `M / (norm + 1e-6)` when that is below 1
    (a factor folded into the pending one of `tp.normalize_grads`, applied
    by the update). A norm that is not finite makes the runtime skip the
    update of this step (the step line says so).

    ```mlir
    tp.clip_grads %norm : tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$norm);
  let assemblyFormat = "$norm attr-dict `:` type($norm)";
}

def TP_OptimizerUpdateOp : TP_Op<"optimizer_update",
    [TP_RuntimeCalled, MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Updates every trainable parameter from its gradient";
  let description = [{
    `optimizer` is `adamw` (`torch.optim.AdamW`: FP32 moments, decoupled
    weight decay, bias correction) or `sgd` (`torch.optim.SGD` with
    momentum); the hyper-parameters are the run's (`model --lr ...`). The
    parameters are updated in place in the runtime's parameter cache, which
    the next training step reads.

    ```mlir
    tp.optimizer_update {optimizer = "adamw"}
    ```

    With `dp_sharded` (`tpc --zero 1`) a rank updates, and holds the
    optimizer state of, only its runs of the data-parallel buckets; the
    `tp.param_bucket_all_gather` ops after it complete the parameters.

    With `master_weights` (`tpc --master-weights f32`, the default for
    bf16 training) each parameter held in bf16 or f16 has an FP32 master
    copy, part of the optimizer state (`master_weight`, sharded with it
    under `dp_sharded`), first read in f32 from the parameter's source: the
    update applies to the master, which is then rounded once into the
    parameter (FSDP2's f32 parameters under a bf16 `MixedPrecisionPolicy`),
    so updates smaller than the parameter type's resolution accumulate
    instead of vanishing.
  }];
  let arguments = (ins StrAttr:$optimizer, UnitAttr:$dp_sharded,
                   UnitAttr:$master_weights);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

#endif // TPOPT_DIALECT_TP_TPTRAINOPS_TD
