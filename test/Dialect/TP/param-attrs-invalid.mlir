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

// expected-error @+1 {{an uneven split gives each rank a start and a size, got 2 starts and 3 sizes}}
func.func @uneven_counts(%w: tensor<7xf32> {tp.placement = #tp.placement<split(0), starts = [0, 3], sizes = [3, 2, 2]>}) {
  return
}

// -----

// expected-error @+1 {{rank 1 holds [3, 3): a range needs a start of at least 0 and a size of at least 1}}
func.func @uneven_empty(%w: tensor<7xf32> {tp.placement = #tp.placement<split(0), starts = [0, 3, 3], sizes = [3, 0, 4]>}) {
  return
}

// -----

// expected-error @+1 {{an uneven split says its replicas by equal ranges, not 'replicas'}}
func.func @uneven_replicas(%w: tensor<7xf32> {tp.placement = #tp.placement<split(0), replicas = 2, starts = [0, 3], sizes = [3, 4]>}) {
  return
}

// -----

// expected-error @+1 {{an uneven split over 3 ranks is partitioned into one block per rank, not 2}}
func.func @uneven_blocks(%w: tensor<3xf32> {tp.placement = #tp.placement<split(0), blocks = 2, starts = [0, 3, 5], sizes = [3, 2, 2]>}) {
  return
}

// -----

// expected-error @+1 {{a replicated parameter has no ranges}}
func.func @uneven_replicated(%w: tensor<7xf32> {tp.placement = #tp.placement<replicated, grad = mean, starts = [0, 3], sizes = [3, 4]>}) {
  return
}

// -----

// The ranges end at the dimension's size; partitioned, it is the largest.
// expected-error @+1 {{'func.func' op argument 0: placement #tp.placement<split(0), starts = [0, 3, 5], sizes = [3, 2, 2]> needs dimension 0 of 'tensor<8xf32>' to be 7}}
func.func @uneven_whole(%w: tensor<8xf32> {tp.placement = #tp.placement<split(0), starts = [0, 3, 5], sizes = [3, 2, 2]>}) {
  return
}

// -----

// expected-error @+1 {{'func.func' op argument 0: placement #tp.placement<split(0), blocks = 3, starts = [0, 3, 5], sizes = [3, 2, 2]> needs dimension 0 of 'tensor<2xf32>' to be 3}}
func.func @uneven_block(%w: tensor<2xf32> {tp.placement = #tp.placement<split(0), blocks = 3, starts = [0, 3, 5], sizes = [3, 2, 2]>}) {
  return
}

// -----

// An uneven block's source holds the whole parameter.
// expected-error @+1 {{'func.func' op argument 0: source 'w' holds 64 bytes but 'tensor<3x4xf32>' needs 112}}
func.func @uneven_source(%w: tensor<3x4xf32> {tp.fqn = "w.weight", tp.placement = #tp.placement<split(0), blocks = 3, starts = [0, 3, 5], sizes = [3, 2, 2]>,
    tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 0, length = 64, transposed = false>}) {
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
