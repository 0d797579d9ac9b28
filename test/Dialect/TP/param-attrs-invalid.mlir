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

// expected-error @+1 {{struct is missing required parameter: initializer}}
func.func @source_syntax(%w: tensor<4xf32> {tp.source = #tp.source<file = "m.onnx">}) {
  return
}

// -----

// expected-error @+1 {{blocks and replicas must be at least 1, got 0 and 1}}
func.func @blocks_zero(%w: tensor<4xf32> {tp.placement = #tp.placement<split(0), blocks = 0>}) {
  return
}

// -----

// expected-error @+1 {{split dimension must be at least 0, got -2}}
func.func @split_negative(%w: tensor<4xf32> {tp.placement = #tp.placement<split(-2)>}) {
  return
}

// -----

// expected-error @+1 {{a split parameter's gradient is sharded; 'grad' is for replicated ones}}
func.func @split_grad(%w: tensor<4xf32> {tp.placement = #tp.placement<split(0), grad = sum>}) {
  return
}

// -----

// expected-error @+1 {{a replicated parameter has no blocks or replicas}}
func.func @replicated_replicas(%w: tensor<4xf32> {tp.placement = #tp.placement<replicated, grad = mean, replicas = 2>}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: 'tp.placement' must be a #tp.placement attribute}}
func.func @placement_string(%w: tensor<4xf32> {tp.placement = "split(0)"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: placement splits dimension 1 of 'tensor<4xf32>'}}
func.func @placement_rank(%w: tensor<4xf32> {tp.placement = #tp.placement<split(1)>}) {
  return
}

// -----

// expected-error @+1 {{grad must be mean or sum}}
func.func @grad_kind(%w: tensor<4xf32> {tp.placement = #tp.placement<replicated, grad = max>}) {
  return
}

// -----

// A partitioned parameter is one of `blocks` blocks of what its source holds.
// expected-error @+1 {{'func.func' op argument 0: source 'w' holds 64 bytes but 'tensor<2x4xf32>' needs 96}}
func.func @blocks_source(%w: tensor<2x4xf32> {tp.fqn = "w.weight", tp.placement = #tp.placement<split(0), blocks = 3>,
    tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 0, length = 64, transposed = false>}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op 'tp.entry' must be the role of an entry point ("forward", "train_step", "optimizer_step", "init"), got "backward"}}
func.func @entry_role() attributes {tp.entry = "backward"} {
  return
}

// -----

// expected-error @+1 {{'builtin.module' op 'tp.entry' marks functions only}}
module attributes {tp.entry = "forward"} {
}

// -----

// expected-error @+1 {{'func.func' op argument 0: 'tp.grad_reduction' must be a #tp.grad_reduction attribute}}
func.func @grad_reduction_kind(%w: tensor<4xf32> {tp.grad_reduction = "mean"}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: 'tp.exclude' is a unit attribute}}
func.func @exclude_kind(%w: tensor<4xf32> {tp.exclude = true}) {
  return
}
