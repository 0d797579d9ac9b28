// RUN: tp-opt %s --split-input-file --verify-diagnostics

// The plan's attributes (tp-plan-activations) come together on a function.
// expected-error @+1 {{an activation plan is a function's 'tp.activation_bytes_per_token' (an integer) and 'tp.activation_buffers' ((offset, bytes) pairs per token)}}
func.func @half_plan(%x: tensor<?x?x4xf32>) attributes {tp.activation_buffers = array<i64: 0, 16>} {
  return
}

// -----

// expected-error @+1 {{an activation plan is a function's}}
func.func @odd_pairs(%x: tensor<?x?x4xf32>) attributes {tp.activation_bytes_per_token = 64 : i64, tp.activation_buffers = array<i64: 0, 16, 32>} {
  return
}

// -----

// expected-error @+1 {{activation buffer 1 (offset 32, 48 bytes per token) lies outside the 64 bytes per token of its arena}}
func.func @outside(%x: tensor<?x?x4xf32>) attributes {tp.activation_bytes_per_token = 64 : i64, tp.activation_buffers = array<i64: 0, 16, 32, 48>} {
  return
}

// -----

func.func @slot_range(%x: tensor<?x?x4xf32>, %w: tensor<8x4xf32>) -> tensor<?x?x8xf32>
    attributes {tp.activation_bytes_per_token = 64 : i64, tp.activation_buffers = array<i64: 0, 32>} {
  // expected-error @+1 {{'tp.activation_slot' must be a buffer of its function's 'tp.activation_buffers' (1 buffers), got 1 : i64}}
  %q = tp.linear %x, %w {tp.activation_slot = 1 : i64} : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  return %q : tensor<?x?x8xf32>
}

// -----

func.func @slot_without_plan(%x: tensor<?x?x4xf32>, %w: tensor<8x4xf32>) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{'tp.activation_slot' must be a buffer of its function's 'tp.activation_buffers' (0 buffers), got 0 : i64}}
  %q = tp.linear %x, %w {tp.activation_slot = 0 : i64} : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  return %q : tensor<?x?x8xf32>
}
