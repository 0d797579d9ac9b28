//===- ONNXOps.td - onnx-level IR of the importer ----------*- tablegen -*-===//
//
// The importer's faithful, unraised form of an ONNX graph: one generic op per
// ONNX node. It exists so that raising is an ordinary pass with lit tests on
// small hand-written graphs; it is not a general ONNX dialect.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_DIALECT_ONNX_ONNXOPS_TD
#define TPOPT_DIALECT_ONNX_ONNXOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def ONNX_Dialect : Dialect {
  let name = "onnx";
  let cppNamespace = "::mlir::tp::onnx_ir";
  let summary = "Unraised ONNX graphs, one generic op per node";
  let description = [{
    `tp-translate --import-onnx` writes a graph as a function whose arguments
    are the graph inputs and the initializers, and whose body has one
    `onnx.node` per ONNX node in topological order. Initializer arguments
    carry `onnx.name` and `tp.source` (where their bytes are); small ones
    (scalars, shape vectors, at most 4 KiB) also carry their value in
    `onnx.value`, because raising needs them (epsilons, RoPE frequencies).
    An anonymous 2-D initializer that holds exactly the transpose of a named
    one (what constant folding makes of a tied lm_head) carries
    `onnx.transposed_copy_of` with the named one's name.
    Values have the element type the ONNX graph gives or implies and a
    ranked shape where the graph declares one; `tp-raise-onnx` turns the
    function into `tp` building blocks.
  }];
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The ONNX name of a graph input or initializer argument.
    static constexpr llvm::StringLiteral kNameAttrName = "onnx.name";
    /// The value of a small initializer argument (a DenseElementsAttr).
    static constexpr llvm::StringLiteral kValueAttrName = "onnx.value";
    /// Names the initializer that this anonymous one is the transpose of,
    /// byte for byte (a folding exporter's copy of a tied embedding).
    static constexpr llvm::StringLiteral kTransposedCopyOfAttrName =
        "onnx.transposed_copy_of";
  }];
}

class ONNX_Op<string mnemonic, list<Trait> traits = []>
    : Op<ONNX_Dialect, mnemonic, traits>;

def ONNX_NodeOp : ONNX_Op<"node"> {
  let summary = "One ONNX node";
  let description = [{
    `op_type` and `domain` name the ONNX operator (`""` is the default
    `ai.onnx` domain), `name` is the node name the exporter wrote (it carries
    the module scope, e.g. `/model/layers.0/self_attn/q_proj/MatMul`), and
    `onnx_attrs` holds the node's ONNX attributes. `scope`, when known, is
    the module path the node was traced in, as a HuggingFace FQN prefix
    (`model.layers.0.self_attn.q_proj`): from the dynamo exporter's
    `pkg.torch.onnx.name_scopes` metadata, or from a TorchScript-style node
    name (`/model/layers.0/self_attn/q_proj/MatMul`). A missing optional input
    is the result of `onnx.none`.

    ```mlir
    %y = onnx.node "MatMul"(%x, %w) {domain = "", onnx_attrs = {},
        name = "/model/layers.0/self_attn/q_proj/MatMul"}
        : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<*xf32>
    ```
  }];
  let arguments = (ins StrAttr:$op_type, Variadic<AnyType>:$inputs,
                   StrAttr:$domain, StrAttr:$name, DictionaryAttr:$onnx_attrs,
                   OptionalAttr<StrAttr>:$scope);
  let results = (outs Variadic<AnyType>:$outputs);
  let assemblyFormat = [{
    $op_type `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs)
  }];
}

def ONNX_NoneOp : ONNX_Op<"none", [Pure]> {
  let summary = "A missing optional input";
  let results = (outs NoneType:$result);
  let assemblyFormat = "attr-dict";
}

#endif // TPOPT_DIALECT_ONNX_ONNXOPS_TD
