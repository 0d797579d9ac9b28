// RUN: tp-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{'func.func' op argument 0: 'tp.fqn' must be a non-empty string}}
func.func @fqn_empty(%w: tensor<4xf32> {tp.fqn = ""}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: 'tp.fqn' must be a non-empty string}}
func.func @fqn_not_string(%w: tensor<4xf32> {tp.fqn = 3 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: 'tp.source' must be a #tp.source attribute}}
func.func @source_kind(%w: tensor<4xf32> {tp.source = "w.bin"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 1: source 'onnx::MatMul_7' holds 100 bytes but 'tensor<8x4xf32>' needs 128}}
func.func @source_length(%x: tensor<4xf32>, %w: tensor<8x4xf32> {tp.fqn = "a.weight",
    tp.source = #tp.source<initializer = "onnx::MatMul_7", file = "m.onnx", offset = 0, length = 100, transposed = true>}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: a parameter with a source must be a statically shaped tensor, got 'tensor<?x4xf32>'}}
func.func @source_dynamic(%w: tensor<?x4xf32> {tp.fqn = "a.weight",
    tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 0, length = 16, transposed = false>}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: only 2-D parameters can be stored transposed, got rank 1}}
func.func @source_transposed_1d(%w: tensor<4xf32> {tp.fqn = "a.bias",
    tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 0, length = 16, transposed = true>}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: unknown tp argument attribute 'tp.weight'}}
func.func @unknown(%w: tensor<4xf32> {tp.weight}) {
  return
}

// -----

// expected-error @+1 {{expected 'initializer'}}
func.func @source_syntax(%w: tensor<4xf32> {tp.source = #tp.source<file = "m.onnx">}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: 'tp.shards' must be an integer of at least 1}}
func.func @shards_zero(%w: tensor<4xf32> {tp.shard_dim = 0 : i64, tp.shards = 0 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: 'tp.shard_dim' must be an integer of at least 0}}
func.func @shard_dim_negative(%w: tensor<4xf32> {tp.shard_dim = -1 : i64}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: 'tp.shard_replicas' must be an integer of at least 1}}
func.func @replicas_string(%w: tensor<4xf32> {tp.shard_replicas = "2"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'tp.entry' must be the role of an entry point ("forward"), got "backward"}}
func.func @entry_role() attributes {tp.entry = "backward"} {
  return
}

// -----

// expected-error @+1 {{'builtin.module' op 'tp.entry' marks functions only}}
module attributes {tp.entry = "forward"} {
}
