// RUN: tp-opt %s --split-input-file --tp-plan-report --verify-diagnostics -o /dev/null | FileCheck %s

// A partitioned block at tp=2: a column-split and a row-split linear (each
// rank holds half of 8x4 = 32 floats = 128 bytes of each), a replicated
// norm (4 floats) with the sum gradient class, one all-reduce of 4 floats
// per token and one all-gather of the 8-float output.
// CHECK: # Plan report
// CHECK: tp=2: 2 parameters split, 1 replicated; 0.000 MiB of 0.000 MiB of parameters per rank; 2 collectives per forward pass
// CHECK: Plan: (no plan applied)
// CHECK: | `model.layers.0.mlp.up_proj.weight` | [8, 4] | split(0) | sharded | model.layers.*.mlp.up_proj | 64 |
// CHECK: | `model.layers.0.mlp.down_proj.weight` | [4, 8] | split(1) | sharded | model.layers.*.mlp.down_proj | 64 |
// CHECK: | `model.norm.weight` | [4] | replicated | replicated, grad sum | (no key: replicated) | 16 |
// CHECK: | all_gather, layer 0 | 1 | 32 |
// CHECK: | all_reduce, layer 0 | 1 | 16 |
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>,
      %up: tensor<4x4xf32> {tp.fqn = "model.layers.0.mlp.up_proj.weight", tp.placement = #tp.placement<split(0), blocks = 2, key = "model.layers.*.mlp.up_proj">},
      %down: tensor<4x4xf32> {tp.fqn = "model.layers.0.mlp.down_proj.weight", tp.placement = #tp.placement<split(1), blocks = 2, key = "model.layers.*.mlp.down_proj">},
      %nw: tensor<4xf32> {tp.fqn = "model.norm.weight", tp.placement = #tp.placement<replicated, grad = sum>}) -> tensor<?x?x8xf32> {
    %a = tp.linear %x, %up {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %d = tp.linear %a, %down {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %r = shard.all_reduce %d on @tp grid_axes = [0] : tensor<?x?x4xf32> -> tensor<?x?x4xf32>
    %n = tp.rms_norm %r, %nw {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %u = tp.linear %n, %up {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %g = shard.all_gather %u on @tp grid_axes = [0] gather_axis = 2 : tensor<?x?x4xf32> -> tensor<?x?x8xf32>
    return %g : tensor<?x?x8xf32>
  }
}

// -----

// expected-error @+1 {{plan report: no func.func @forward}}
module {
}
