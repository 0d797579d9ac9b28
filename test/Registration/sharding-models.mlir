// The external models tp-opt registers are what make upstream passes act on
// upstream ops: without linalg's ShardingInterface model, propagation and
// partition leave this Megatron MLP untouched and emit no collective.
// RUN: tp-opt %s --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition),canonicalize,cse)' | FileCheck %s

shard.grid @tp(shape = 2)

// CHECK-LABEL: func.func @mlp
// CHECK-SAME: tensor<8x16xf32>, %{{.*}}: tensor<16x16xf32>, %{{.*}}: tensor<16x16xf32>) -> tensor<8x16xf32>
// CHECK: linalg.matmul
// CHECK: linalg.matmul
// CHECK: shard.all_reduce %{{.*}} on @tp grid_axes = [0] : tensor<8x16xf32> -> tensor<8x16xf32>
func.func @mlp(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %w2: tensor<32x16xf32>) -> tensor<8x16xf32> {
  %s1 = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %w1s = shard.shard %w1 to %s1 : tensor<16x32xf32>
  %s2 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %w2s = shard.shard %w2 to %s2 : tensor<32x16xf32>
  %sr = shard.sharding @tp split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %sr : tensor<8x16xf32>
  %cst = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<8x32xf32>
  %i1 = linalg.fill ins(%cst : f32) outs(%e1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %h = linalg.matmul ins(%xs, %w1s : tensor<8x16xf32>, tensor<16x32xf32>) outs(%i1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %i2 = linalg.fill ins(%cst : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%h, %w2s : tensor<8x32xf32>, tensor<32x16xf32>) outs(%i2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %ys = shard.shard %y to %sr : tensor<8x16xf32>
  return %ys : tensor<8x16xf32>
}
