// RUN: tp-opt %s --split-input-file --tp-to-emitc --verify-diagnostics


// A parameter without a source cannot be loaded at run time.
// expected-error @+1 {{argument 1 is neither an input (input_ids, attention_mask) nor a located parameter}}
func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}, %w: tensor<8x4xf32> {tp.fqn = "w"}) -> tensor<?x?x8xf32> {
  %h = tp.embedding %ids, %w : (tensor<?x?xi64>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  %u = tp.linear %h, %w : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  return %u : tensor<?x?x8xf32>
}

// -----

// expected-error @+1 {{expected one func.func @forward (the entry tp.entry = "forward"), found 0}}
module {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// An op without a runtime call is named before anything is rewritten.
func.func @forward(%x: tensor<4xf32> {onnx.name = "input_ids"}) -> tensor<4xf32> {
  // expected-error @+1 {{no tprt lowering for arith.negf}}
  %y = arith.negf %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// The runtime reduces by sums only.
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<4xf32> {onnx.name = "input_ids"}) -> tensor<4xf32> {
    // expected-error @+1 {{only sum reductions have a runtime call}}
    %y = shard.all_reduce %x on @tp grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// The entry returns the logits alone.
func.func @forward(%x: tensor<4xf32> {onnx.name = "input_ids"}) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{an entry point must return exactly one tensor (the logits, the training step's loss or the optimizer step's norm)}}
  return %x, %x : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> tensor<?x?xi64> attributes {tp.entry = "forward"} {
  return %ids : tensor<?x?xi64>
}
func.func @init(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}) -> tensor<?x?xi64> attributes {tp.entry = "init"} {
  // expected-error @+1 {{the init function returns nothing}}
  return %ids : tensor<?x?xi64>
}

// -----

// A slot of the activation plan only on an op whose kernel places its
// result.
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}, %x: tensor<?x?x4xf32> {onnx.name = "attention_mask"}) -> tensor<?x?x4xf32>
      attributes {tp.activation_bytes_per_token = 64 : i64, tp.activation_buffers = array<i64: 0, 16>} {
    // expected-error @+1 {{'tp.activation_slot' on an op whose runtime function (tprt::all_reduce_sum) does not place its result}}
    %g = shard.all_reduce %x on @tp grid_axes = [0] {tp.activation_slot = 0 : i64} : tensor<?x?x4xf32> -> tensor<?x?x4xf32>
    return %g : tensor<?x?x4xf32>
  }
}
