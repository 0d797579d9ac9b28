//===- TPAttrs.td - tp dialect attributes ------------------*- tablegen -*-===//

#ifndef TPOPT_DIALECT_TP_TPATTRS_TD
#define TPOPT_DIALECT_TP_TPATTRS_TD

include "tpopt/Dialect/TP/TPBase.td"

def TP_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "approximation used by tp.gelu", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Tanh", 1, "tanh">
    ]> {
  let cppNamespace = "::mlir::tp";
  let genSpecializedAttr = 0;
}

def TP_GeluApproximationAttr
    : EnumAttr<TP_Dialect, TP_GeluApproximation, "gelu_approximation">;

def TP_LinearForm : I32EnumAttr<"LinearForm",
    "how tp.linear runs (TPLinear dispatch)", [
      I32EnumAttrCase<"Linear", 0, "linear">,
      I32EnumAttrCase<"Bmm", 1, "bmm">,
      I32EnumAttrCase<"Mm", 2, "mm">
    ]> {
  let cppNamespace = "::mlir::tp";
  let genSpecializedAttr = 0;
}

def TP_LinearFormAttr : EnumAttr<TP_Dialect, TP_LinearForm, "linear_form">;

def TP_Epilogue : I32EnumAttr<"Epilogue",
    "what tp.linear_epilogue applies to its product", [
      I32EnumAttrCase<"Add", 0, "add">,
      I32EnumAttrCase<"SiluMul", 1, "silu_mul">,
      I32EnumAttrCase<"AddOnce", 2, "add_once">
    ]> {
  let cppNamespace = "::mlir::tp";
  let genSpecializedAttr = 0;
}

def TP_EpilogueAttr : EnumAttr<TP_Dialect, TP_Epilogue, "epilogue">;

def TP_GradReduction : I32EnumAttr<"GradReduction",
    "how the TP ranks' gradients of a replicated parameter combine", [
      I32EnumAttrCase<"Mean", 0, "mean">,
      I32EnumAttrCase<"Sum", 1, "sum">
    ]> {
  let cppNamespace = "::mlir::tp";
  let genSpecializedAttr = 0;
}

def TP_GradReductionAttr : EnumAttr<TP_Dialect, TP_GradReduction,
                                    "grad_reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

def TP_StoredForm : I32EnumAttr<"StoredForm",
    "what a parameter's stored elements hold of the parameter", [
      I32EnumAttrCase<"Parameter", 0, "parameter">,
      I32EnumAttrCase<"NegExp", 1, "neg_exp">
    ]> {
  let cppNamespace = "::mlir::tp";
  let genSpecializedAttr = 0;
}

def TP_PlacementAttr : TP_Attr<"Placement", "placement"> {
  let summary = "How the tensor-parallel ranks hold a parameter";
  let description = [{
    The placement a plan gives a parameter (argument attribute
    `tp.placement`), written by `tp-apply-plan` and completed by
    `tp-partition`:

    - `replicated, grad = mean|sum`: every rank holds the whole parameter.
      `grad` is its gradient class: `mean` when every rank computes the full
      gradient (the TP-replica all-reduce averages identical copies), `sum`
      when each rank computes a partial one (norms on sequence shards,
      per-head norms after a column-split projection: HF's
      `replicated_with_grad_allreduce`).
    - `split(d)`: dimension `d` is cut into equal blocks over the ranks;
      with `replicas = r` (KV heads shared by a query group) each block is
      held by `r` consecutive ranks. After `tp-partition`, `blocks = n` says
      the argument is one of `n` blocks and its type is the block's.
    - `starts = [..], sizes = [..]` (an uneven split, `tpc --allow-uneven`):
      rank r holds elements `[starts[r], starts[r] + sizes[r])` of dimension
      `d`, one entry per rank, in a block of the largest size whose tail
      past `sizes[r]` is zeros (padding no result reads). Ranks with equal
      ranges hold replicas (KV heads shared by query groups of any size);
      `replicas` stays 1.
    - `key`: the plan key that placed it (empty when no key matched).

    ```mlir
    %w: tensor<32x64xf32> {tp.placement = #tp.placement<split(0), replicas = 2, key = "model.layers.*.self_attn.k_proj">}
    %n: tensor<16xf32> {tp.placement = #tp.placement<replicated, grad = sum, key = "model.layers.*.self_attn.q_norm">}
    %u: tensor<224x64xf32> {tp.placement = #tp.placement<split(0), starts = [0, 75, 150], sizes = [75, 75, 74], key = "model.layers.*.mlp.up_proj">}
    ```
  }];
  let parameters = (ins
    "int64_t":$splitDim,
    "int64_t":$blocks,
    "int64_t":$replicas,
    "GradReduction":$grad,
    StringRefParameter<"plan key">:$key,
    OptionalArrayRefParameter<"int64_t", "each rank's first element">:$starts,
    OptionalArrayRefParameter<"int64_t", "each rank's element count">:$sizes);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    bool isSplit() const { return getSplitDim() >= 0; }
    /// Whether the ranks hold ranges of different sizes or positions
    /// (starts/sizes) rather than equal blocks.
    bool isUneven() const { return !getSizes().empty(); }
    /// The elements of the split dimension one rank holds, padding
    /// included: the largest range.
    int64_t getUnevenExtent() const;
    /// The global size of the split dimension of an argument whose split
    /// dimension is `local` long on this rank.
    int64_t getGlobalSize(int64_t local) const;
    /// Whether tp-partition made the argument this rank's block.
    bool isPartitioned() const { return getBlocks() > 1; }
    /// When some blocks are held by several ranks (KV heads fewer than the
    /// ranks, evenly or not) of a partitioned placement: the block rank r
    /// holds, numbered from 0 in the order the ranks first hold them
    /// (tp.replica_sum's `blocks`). Empty when every rank holds its own.
    ::llvm::SmallVector<int64_t> getSharedBlocks() const;
    static PlacementAttr getReplicated(::mlir::MLIRContext *ctx,
                                       GradReduction grad,
                                       ::llvm::StringRef key) {
      return get(ctx, -1, 1, 1, grad, key, {}, {});
    }
    static PlacementAttr getSplit(::mlir::MLIRContext *ctx, int64_t dim,
                                  int64_t replicas, ::llvm::StringRef key) {
      return get(ctx, dim, 1, replicas, GradReduction::Mean, key, {}, {});
    }
    static PlacementAttr getUneven(::mlir::MLIRContext *ctx, int64_t dim,
                                   ::llvm::ArrayRef<int64_t> starts,
                                   ::llvm::ArrayRef<int64_t> sizes,
                                   ::llvm::StringRef key) {
      return get(ctx, dim, 1, 1, GradReduction::Mean, key, starts, sizes);
    }
    /// This placement once partitioned into `blocks` blocks.
    PlacementAttr withBlocks(int64_t blocks) const {
      return get(getContext(), getSplitDim(), blocks, getReplicas(),
                 getGrad(), getKey(), getStarts(), getSizes());
    }
  }];
  let genVerifyDecl = 1;
}

def TP_ConsumingFormAttr : TP_Attr<"ConsumingForm", "consuming_form"> {
  let summary = "The consuming form of a runtime call, until tp-to-emitc chooses";
  let description = [{
    On an `emitc.call_opaque` whose runtime signature has a consuming form
    (`RuntimeSignature::consuming`): that form's `callee` and the call
    operand (`operand`, an index into the call's operands) it takes over.
    `tp-to-emitc` sets it when it emits the call and, once it knows the
    call is that operand's last reader, calls the consuming form instead;
    it removes the attribute before the program is printed. It travels with
    the call when the layer loops clone it.

    Example: `#tp.consuming_form<callee = "tprt::all_reduce_sum_consuming",
    operand = 1>`
  }];
  let parameters = (ins StringRefParameter<"the consuming form's callee">:$callee,
                        "unsigned":$operand);
  let assemblyFormat = [{
    `<` `callee` `=` $callee `,` `operand` `=` $operand `>`
  }];
}

def TP_SourceAttr : TP_Attr<"Source", "source"> {
  let summary = "Where a parameter's bytes are stored";
  let description = [{
    Locates the bytes of a parameter without loading them. `initializer` is
    the ONNX initializer name the exporter wrote. `file` is the file that holds
    the bytes, relative to the model's directory (the model file itself for
    inline `raw_data`, the `location` of ONNX external data otherwise).
    `offset` and `length` are the byte range in that file. `transposed` is set
    when the stored layout is the transpose of the canonical one (a linear
    weight stored `[in, out]` instead of `[out, in]`): the stored tensor then
    has the reversed shape of the argument's type. `stored_type` is the
    element type of the stored bytes when the program holds the parameter in
    another one (`tp-compute-type`: a bf16 checkpoint computed in f32, or an
    f32 one in bf16); absent, the bytes are of the argument's element type.
    Loading converts. `stored_offset` (default 0) is a value the stored
    elements hold on top of the parameter's: an exporter that folded
    Gemma's `1 + w` into a norm's weight stores `w + 1` (`stored_offset =
    1.0`); loading from that file subtracts it, so the parameter is `w` as
    the HF checkpoint names it (a checkpoint read by FQN holds `w` itself).
    `stored_form` (default `parameter`) is what the stored elements are of
    the parameter: `neg_exp` where an exporter folded Mamba2's
    `A = -exp(A_log)` into the constant it stores; loading from that file
    takes `log(-x)`, so the parameter is `A_log` again.

    Example: `#tp.source<initializer = "onnx::MatMul_602", file = "llama_tiny.onnx",
    offset = 1024, length = 16384, transposed = true, stored_type = bf16>`
  }];
  let parameters = (ins
    StringRefParameter<"ONNX initializer name">:$initializer,
    StringRefParameter<"file holding the bytes">:$file,
    "uint64_t":$offset,
    "uint64_t":$length,
    "bool":$transposed,
    OptionalParameter<"::mlir::Type", "element type of the stored bytes">:$stored_type,
    OptionalParameter<"::mlir::FloatAttr", "value the stored elements add to the parameter's">:$stored_offset,
    DefaultValuedParameter<"::mlir::tp::StoredForm", "::mlir::tp::StoredForm::Parameter", "what the stored elements are of the parameter">:$stored_form);
  // `key = value` in this order, the optional ones left out when absent or
  // default (each parsed by its key, so any can come without the others).
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// `stored_offset` as a number; 0 when absent.
    double getStoredOffsetValue() const {
      return getStoredOffset() ? getStoredOffset().getValueAsDouble() : 0.0;
    }
  }];
}

#endif // TPOPT_DIALECT_TP_TPATTRS_TD
