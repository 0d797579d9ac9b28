// RUN: tp-opt %s --split-input-file --tp-to-emitc --verify-diagnostics


// A parameter without a source cannot be loaded at run time.
// expected-error @+1 {{argument 1 is neither an input (input_ids, attention_mask) nor a located parameter}}
func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}, %w: tensor<8x4xf32> {tp.fqn = "w"}) -> tensor<?x?x8xf32> {
  %h = tp.embedding %ids, %w : (tensor<?x?xi64>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %u = tp.linear %h, %w : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  return %u : tensor<?x?x8xf32>
}

// -----

// expected-error @+1 {{expected one func.func @forward, found 0}}
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
