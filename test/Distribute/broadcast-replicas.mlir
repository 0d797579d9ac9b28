// RUN: tp-opt %s --split-input-file --tp-broadcast-replicas --verify-diagnostics | FileCheck %s
// RUN: tp-opt %s --split-input-file --tp-broadcast-replicas="dp=2" --verify-diagnostics | FileCheck %s --check-prefix=DP

// The replicated parameters (frozen ones too; not the split ones, nor the
// inputs), in FQN order, each broadcast from rank 0 in @init; their
// attributes come along (load_param reads them by them).
// CHECK-LABEL: func.func @forward
// CHECK-LABEL: func.func @init
// CHECK-SAME: (%arg0: tensor<4xf32> {tp.fqn = "model.layers.10.input_layernorm.weight"}, %arg1: tensor<4xf32> {tp.fqn = "model.layers.2.input_layernorm.weight", tp.placement = #tp.placement<replicated, grad = sum>})
// CHECK-SAME: attributes {tp.entry = "init"}
// CHECK-NEXT: tp.broadcast_replica %arg0 {fqn = "model.layers.10.input_layernorm.weight"} : tensor<4xf32>
// CHECK-NEXT: tp.broadcast_replica %arg1 {fqn = "model.layers.2.input_layernorm.weight"} : tensor<4xf32>
// CHECK-NEXT: return
// With dp=2 every parameter is also broadcast over the data-parallel
// group, the split one (this rank's block) included.
// DP-LABEL: func.func @init
// DP-NEXT: tp.broadcast_replica %arg0 {fqn = "model.layers.10.input_layernorm.weight"} : tensor<4xf32>
// DP-NEXT: tp.broadcast_replica %arg0 {fqn = "model.layers.10.input_layernorm.weight", group = "dp"} : tensor<4xf32>
// DP-NEXT: tp.broadcast_replica %arg1 {fqn = "model.layers.2.input_layernorm.weight"} : tensor<4xf32>
// DP-NEXT: tp.broadcast_replica %arg1 {fqn = "model.layers.2.input_layernorm.weight", group = "dp"} : tensor<4xf32>
// DP-NEXT: tp.broadcast_replica %arg2 {fqn = "model.layers.2.mlp.up_proj.weight", group = "dp"} : tensor<4x4xf32>
// DP-NEXT: return
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %n2: tensor<4xf32> {tp.fqn = "model.layers.2.input_layernorm.weight", tp.placement = #tp.placement<replicated, grad = sum>},
      %w: tensor<4x4xf32> {tp.fqn = "model.layers.2.mlp.up_proj.weight", tp.placement = #tp.placement<split(0), blocks = 2>},
      %n10: tensor<4xf32> {tp.fqn = "model.layers.10.input_layernorm.weight"}) -> tensor<4xf32> attributes {tp.entry = "forward"} {
    return %n2 : tensor<4xf32>
  }
}

// -----

// One rank: nothing to broadcast, no @init.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: @init
// One rank per group, two groups: everything over dp.
// DP-LABEL: func.func @forward
// DP-LABEL: func.func @init
// DP-NEXT: tp.broadcast_replica %arg0 {fqn = "n", group = "dp"} : tensor<4xf32>
module {
  func.func @forward(%n: tensor<4xf32> {tp.fqn = "n"}) -> tensor<4xf32> attributes {tp.entry = "forward"} {
    return %n : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{tp-broadcast-replicas: no func.func @forward}}
module {
  shard.grid @tp(shape = 2)
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @forward(%n: tensor<4xf32> {tp.fqn = "n"}) -> tensor<4xf32> attributes {tp.entry = "forward"} {
    return %n : tensor<4xf32>
  }
  // expected-error @+1 {{tp-broadcast-replicas: the module already has an init function}}
  func.func @init() attributes {tp.entry = "init"} {
    return
  }
}
