//===- TPBase.td - tp dialect definition -------------------*- tablegen -*-===//
//
// The `tp` dialect: decoder-LM building blocks at the granularity that
// tensor-parallel plans, sharding rules, autodiff rules and runtime kernels
// are written at.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_DIALECT_TP_TPBASE_TD
#define TPOPT_DIALECT_TP_TPBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def TP_Dialect : Dialect {
  let name = "tp";
  let cppNamespace = "::mlir::tp";
  let summary = "Transformer building blocks for tensor-parallel compilation";
  let description = [{
    The `tp` dialect models a decoder language model one transformer building
    block per op: embedding lookup, linear layers, RMS normalization, rotary
    position embedding, grouped-query attention, gated-MLP activations and
    residual arithmetic. Tensors are at global (unpartitioned) shapes until a
    partition pass localizes them; activations are `[batch, seq, features]`
    and attention heads stay packed in the feature dimension
    (`num_heads * head_dim`), so head sharding is a split of the last
    dimension.

    Model parameters are function arguments. Each carries its HuggingFace
    fully qualified name in the `tp.fqn` argument attribute and, when it comes
    from a file, where its bytes are in the `tp.source` argument attribute
    (`#tp.source<...>`). The compiler never loads weight bytes.

    Ops of a decoder layer carry its index in the `tp.layer` attribute
    (`i64`, set by raising from the module scope of the ONNX node and kept
    by every op made from one): recomputation, the plan report and the
    layer loops group by it, never by names.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Argument attribute naming a parameter by its HuggingFace FQN.
    static constexpr llvm::StringLiteral kFqnAttrName = "tp.fqn";
    /// Argument attribute locating a parameter's bytes (#tp.source).
    static constexpr llvm::StringLiteral kSourceAttrName = "tp.source";
    /// Argument attribute placing a parameter over the ranks
    /// (#tp.placement).
    static constexpr llvm::StringLiteral kPlacementAttrName = "tp.placement";
    /// Argument attribute of a replicated parameter whose gradient class a
    /// JSON plan sets (`"grad_reduction"`), overriding the class tp-partition
    /// derives from the backward (#tp.grad_reduction).
    static constexpr llvm::StringLiteral kGradReductionAttrName =
        "tp.grad_reduction";
    /// Unit argument attribute of a replicated parameter a JSON plan
    /// excludes from replica handling (`"exclude": true`): each rank owns
    /// its copy, which is neither broadcast nor synchronized.
    static constexpr llvm::StringLiteral kExcludeAttrName = "tp.exclude";
    /// Function attribute naming the role of an entry point of the program
    /// ("forward"; a training program adds "train_step" and
    /// "optimizer_step"). Passes find entry
    /// points through it (lookupEntry in TPUtils.h), not by name.
    static constexpr llvm::StringLiteral kEntryAttrName = "tp.entry";
    /// Unit attribute of a training step's forward op whose result the
    /// backward reads (what the forward keeps for the backward).
    static constexpr llvm::StringLiteral kSavedAttrName = "tp.saved";
    /// Unit attribute of a training step's op that recomputes a forward
    /// value for the backward (tp-build-train-step's recompute).
    static constexpr llvm::StringLiteral kRecomputedAttrName =
        "tp.recomputed";
    /// Module attribute saying where the applied plan came from (a string
    /// for the plan report).
    static constexpr llvm::StringLiteral kPlanSourceAttrName =
        "tp.plan_source";
    /// Function attributes of an activation plan (tp-plan-activations):
    /// the arena's bytes per token of the input, and its buffers as
    /// (offset, bytes) pairs per token.
    static constexpr llvm::StringLiteral kActivationBytesAttrName =
        "tp.activation_bytes_per_token";
    static constexpr llvm::StringLiteral kActivationBuffersAttrName =
        "tp.activation_buffers";
    /// Op attribute: the buffer of its function's activation plan the op's
    /// result goes in.
    static constexpr llvm::StringLiteral kActivationSlotAttrName =
        "tp.activation_slot";
    /// Op attribute (i64 >= 0): the decoder layer the op computes, set by
    /// raising from the module scope of the ONNX node it came from and
    /// carried by every op made from it (its backward, its recomputation,
    /// its emitted call). Recomputation, the plan report and the layer
    /// loops read it instead of names.
    static constexpr llvm::StringLiteral kLayerAttrName = "tp.layer";

  private:
    void registerAttributes();
  public:
  }];
}

class TP_Op<string mnemonic, list<Trait> traits = []>
    : Op<TP_Dialect, mnemonic, traits>;

class TP_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<TP_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

#endif // TPOPT_DIALECT_TP_TPBASE_TD
