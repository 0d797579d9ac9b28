// RUN: tp-opt %s --split-input-file --tp-raise-onnx --verify-diagnostics | FileCheck %s

// An imported graph without a node (its input passed through) has nothing
// to raise: an error, as tpc gives, not an unchanged module.
// expected-error @below {{nothing to raise: no function holds an ONNX node}}
module {
  // expected-note @below {{'@main_graph' has no onnx.node}}
  func.func @main_graph(%arg0: tensor<?x?xi64> {onnx.name = "input_ids"}) -> tensor<?x?xi64> {
    return %arg0 : tensor<?x?xi64>
  }
}

// -----

// A module raised before (it has its tp.config) is left as it is.
// CHECK: module attributes {tp.config = {architecture = "llama"}}
// CHECK-NEXT: func.func @forward
module attributes {tp.config = {architecture = "llama"}} {
  func.func @forward(%arg0: tensor<?x?xi64>) -> tensor<?x?xi64> {
    return %arg0 : tensor<?x?xi64>
  }
}
