// RUN: tp-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tp-overlap-all-reduces))' | FileCheck %s

// A column-split projection's backward: the input gradient's sum starts as
// soon as it is computed; the weight gradient and its accumulation (which
// keeps its place among the ops with side effects) run before the wait,
// which comes right before the sum's first reader.
// CHECK-LABEL: func.func @backward
// CHECK: %[[DX:.*]] = tp.linear_grad_input %arg0, %arg2
// CHECK-NEXT: %[[P:.*]] = tp.all_reduce_start %[[DX]] on @tp grid_axes = [0] : tensor<?x?x4xf32>
// CHECK-NEXT: %[[DW:.*]] = tp.linear_grad_weight %arg0, %arg1
// CHECK-NEXT: tp.accumulate_grad %[[DW]] into %arg2
// CHECK-NEXT: %[[N:.*]] = tp.rms_norm %arg1
// CHECK-NEXT: %[[S:.*]] = tp.all_reduce_wait %[[P]] : tensor<?x?x4xf32>
// CHECK-NEXT: %[[R:.*]] = tp.add %[[S]], %[[N]]
// CHECK-NEXT: return %[[R]]
// CHECK-NOT: shard.all_reduce
module {
  shard.grid @tp(shape = 2)
  func.func @backward(%dy: tensor<?x?x8xf32>, %x: tensor<?x?x4xf32>,
      %w: tensor<8x4xf32> {tp.fqn = "up.weight"}, %nw: tensor<4xf32>) -> tensor<?x?x4xf32> {
    %dw = tp.linear_grad_weight %dy, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
    tp.accumulate_grad %dw into %w {fqn = "up.weight", split_dim = 0 : i64} : tensor<8x4xf32>
    %dx = tp.linear_grad_input %dy, %w : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
    %s = shard.all_reduce %dx on @tp grid_axes = [0] : tensor<?x?x4xf32> -> tensor<?x?x4xf32>
    %n = tp.rms_norm %x, %nw {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %r = tp.add %s, %n : tensor<?x?x4xf32>
    return %r : tensor<?x?x4xf32>
  }
}

// -----

// A forward: every op since the last collective feeds the sum, and the sum
// is read next: nothing to overlap, so the all-reduce stays whole.
// CHECK-LABEL: func.func @forward
// CHECK: shard.all_reduce
// CHECK-NOT: tp.all_reduce_start
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>, %w: tensor<8x4xf32>, %wo: tensor<4x8xf32>) -> tensor<?x?x4xf32> {
    %h = tp.linear %x, %w : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %o = tp.linear %h, %wo : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
    %s = shard.all_reduce %o on @tp grid_axes = [0] : tensor<?x?x4xf32> -> tensor<?x?x4xf32>
    %r = tp.add %s, %x : tensor<?x?x4xf32>
    return %r : tensor<?x?x4xf32>
  }
}

// -----

// Collectives bound the reordering: the linear before the all-gather stays
// before it, and the second sum waits before the all-gather that follows
// it, though the all-gather does not read it. Independent work after the
// start (the second linear) stays in place.
// CHECK-LABEL: func.func @bounded
// CHECK: tp.linear %arg0, %arg1
// CHECK-NEXT: shard.all_gather
// CHECK-NEXT: %[[P:.*]] = tp.all_reduce_start %arg0
// CHECK-NEXT: %[[B:.*]] = tp.linear %arg0, %arg1
// CHECK-NEXT: %[[S:.*]] = tp.all_reduce_wait %[[P]]
// CHECK-NEXT: shard.all_gather %[[B]]
// CHECK-NEXT: tp.add %[[S]], %arg0
module {
  shard.grid @tp(shape = 2)
  func.func @bounded(%x: tensor<?x?x4xf32>, %w: tensor<8x4xf32>) -> (tensor<?x?x4xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>) {
    %a = tp.linear %x, %w : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %g = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 2 : tensor<?x?x4xf32> -> tensor<?x?x8xf32>
    %s = shard.all_reduce %x on @tp grid_axes = [0] : tensor<?x?x4xf32> -> tensor<?x?x4xf32>
    %b = tp.linear %x, %w : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %g2 = shard.all_gather %b on @tp grid_axes = [0] gather_axis = 2 : tensor<?x?x8xf32> -> tensor<?x?x16xf32>
    %r = tp.add %s, %x : tensor<?x?x4xf32>
    return %r, %g, %g2 : tensor<?x?x4xf32>, tensor<?x?x8xf32>, tensor<?x?x16xf32>
  }
}
