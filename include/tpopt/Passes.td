//===- Passes.td - tp-opt pass declarations ----------------*- tablegen -*-===//

#ifndef TPOPT_PASSES_TD
#define TPOPT_PASSES_TD

include "mlir/Pass/PassBase.td"

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

#endif // TPOPT_PASSES_TD
