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
    has the reversed shape of the argument's type.

    Example: `#tp.source<initializer = "onnx::MatMul_602", file = "llama_tiny.onnx",
    offset = 1024, length = 16384, transposed = true>`
  }];
  let parameters = (ins
    StringRefParameter<"ONNX initializer name">:$initializer,
    StringRefParameter<"file holding the bytes">:$file,
    "uint64_t":$offset,
    "uint64_t":$length,
    "bool":$transposed);
  let assemblyFormat = [{
    `<` `initializer` `=` $initializer `,` `file` `=` $file `,`
        `offset` `=` $offset `,` `length` `=` $length `,`
        `transposed` `=` $transposed `>`
  }];
}

#endif // TPOPT_DIALECT_TP_TPATTRS_TD
