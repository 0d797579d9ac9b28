//===- TPInterfaces.td - what tp ops say to the passes ----*- tablegen -*-===//
//
// The passes ask each op through these interfaces instead of switching over
// op types: adding an op means implementing them next to its definition
// (lib/Dialect/TP/TP{Partition,RuntimeCall}Rules.cpp), not editing passes.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_DIALECT_TP_TPINTERFACES_TD
#define TPOPT_DIALECT_TP_TPINTERFACES_TD

include "mlir/IR/OpBase.td"

def TP_PartitionOpInterface : OpInterface<"PartitionOpInterface"> {
  let cppNamespace = "::mlir::tp";
  let description = [{
    How an op becomes its form on one tensor-parallel rank (`tp-partition`).
    The plan fixes the parameters' placements; every activation is then in
    one `ShardLayout` (replicated, split on its last dimension, split on the
    sequence, or a pending partial sum), and each op derives its local result
    types, its results' layouts and any change to its own attributes (local
    head counts, vocabulary parallelism) from its operands' layouts, asking
    the `PartitionState` for the collectives it needs.

    Partial-sum operands are completed (all-reduced) before `partition` is
    called unless `keepsPartialSums` says the op is linear in them, so that
    base and LoRA partials meet in one reduction.
  }];
  let methods = [
    InterfaceMethod<[{
        Sets the local result types and result layouts from the operands'
        layouts in `state`; emits an error naming the op and fails when the
        layouts cannot be partitioned.
      }], "::llvm::LogicalResult", "partition",
      (ins "::mlir::tp::PartitionState &":$state)>,
    InterfaceMethod<[{
        Whether this op may read pending partial sums as they are (it is
        linear in them and their sum stays a partial sum).
      }], "bool", "keepsPartialSums",
      (ins "const ::mlir::tp::PartitionState &":$state), "",
      [{ return false; }]>,
    InterfaceMethod<[{
        Whether `use` reads only how its value is held, not the value (it
        does not make a partial sum a value read twice).
      }], "bool", "readsOnlyLayout", (ins "::mlir::OpOperand &":$use), "",
      [{ return false; }]>,
  ];
}

def TP_RuntimeCallOpInterface : OpInterface<"RuntimeCallOpInterface"> {
  let cppNamespace = "::mlir::tp";
  let description = [{
    The `tprt` runtime function that computes an op in the generated C++
    (`tp-to-emitc`), and its arguments after the `tprt::Context &`. Every
    call an op can make is one of its `getRuntimeSignatures()`, which the
    build checks against `runtime/include/tprt/tprt.h`
    (`tp-runtime-abi`), so the compiler and the
    runtime cannot drift apart.
  }];
  let methods = [
    StaticInterfaceMethod<[{
        Every runtime function this op may call, with its parameter kinds.
      }], "::llvm::ArrayRef<::mlir::tp::RuntimeSignature>",
      "getRuntimeSignatures", (ins)>,
    InterfaceMethod<[{
        Fills `call` with one of `getRuntimeSignatures()` and its arguments.
      }], "::llvm::LogicalResult", "buildRuntimeCall",
      (ins "::mlir::tp::RuntimeCall &":$call)>,
  ];
}

def TP_AutodiffOpInterface : OpInterface<"AutodiffOpInterface"> {
  let cppNamespace = "::mlir::tp";
  let description = [{
    Reverse-mode differentiation of an op (the training step's backward).
    Given the cotangents of the op's results, `buildVJP` builds the
    cotangents of its operands with `builder`, at global shapes, so that
    `tp-partition` derives the backward collectives. Non-differentiable
    operands (ids, masks) get a null cotangent, and a result nothing reads
    has a null one. A loss (`tp.cross_entropy`) is a root: its VJP is asked
    with null cotangents and gives the derivative of the loss itself.
    `getSavedForBackward` lists the forward values the backward reads, so
    that the pass decides, in the IR, what the forward keeps or recomputes.
  }];
  let methods = [
    InterfaceMethod<[{
        Appends one cotangent per operand (null where none) to
        `operandGrads`, given one cotangent per result in `resultGrads`.
      }], "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
    InterfaceMethod<[{
        Appends the forward values (operands or results) the VJP reads.
      }], "void", "getSavedForBackward",
      (ins "::llvm::SmallVectorImpl<::mlir::Value> &":$saved)>,
  ];
}

#endif // TPOPT_DIALECT_TP_TPINTERFACES_TD
