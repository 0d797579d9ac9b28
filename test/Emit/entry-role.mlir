// RUN: tp-opt %s --split-input-file --tp-to-emitc --verify-diagnostics | FileCheck %s

// Entry points are found by their role (tp.entry), not by name.
// CHECK: emitc.func @tprt_model_forward
// CHECK: call_opaque "tprt::silu"
module {
  func.func @main(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}, %x: tensor<?x?x4xf32> {onnx.name = "attention_mask"}) -> tensor<?x?x4xf32> attributes {tp.entry = "forward"} {
    %y = tp.silu %x : tensor<?x?x4xf32>
    return %y : tensor<?x?x4xf32>
  }
}

// -----

// expected-error @+1 {{two functions are the 'forward' entry point: @a and @b}}
module {
  func.func @a(%x: tensor<4xf32> {onnx.name = "input_ids"}) -> tensor<4xf32> attributes {tp.entry = "forward"} {
    return %x : tensor<4xf32>
  }
  func.func @b(%x: tensor<4xf32> {onnx.name = "input_ids"}) -> tensor<4xf32> attributes {tp.entry = "forward"} {
    return %x : tensor<4xf32>
  }
}
