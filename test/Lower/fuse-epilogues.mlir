// RUN: tp-opt %s --split-input-file --tp-fuse-epilogues | FileCheck %s
// The fused form prints and parses back.
// RUN: tp-opt %s --split-input-file --tp-fuse-epilogues | tp-opt --split-input-file | FileCheck %s

// A gated MLP and its residual: the gate's SiLU and product fuse into the
// gate projection, the residual add into the down projection (either
// operand order), the up projection stays; the bmm form is kept.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>, %[[WG:.*]]: tensor<32x16xf32>, %[[WU:.*]]: tensor<32x16xf32>, %[[WD:.*]]: tensor<16x32xf32>)
// CHECK-NEXT: %[[U:.*]] = tp.linear %[[X]], %[[WU]] :
// CHECK-NEXT: %[[M:.*]] = tp.linear_epilogue silu_mul %[[X]], %[[WG]], %[[U]] : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT: %[[H:.*]] = tp.linear_epilogue add %[[M]], %[[WD]], %[[X]] {form = #tp<linear_form bmm>} :
// CHECK-NEXT: return %[[H]]
func.func @mlp(%x: tensor<2x8x16xf32>, %wg: tensor<32x16xf32>, %wu: tensor<32x16xf32>, %wd: tensor<16x32xf32>) -> tensor<2x8x16xf32> {
  %g = tp.linear %x, %wg : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %s = tp.silu %g : tensor<2x8x32xf32>
  %u = tp.linear %x, %wu : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %m = tp.mul %u, %s : tensor<2x8x32xf32>
  %d = tp.linear %m, %wd {form = #tp<linear_form bmm>} : (tensor<2x8x32xf32>, tensor<16x32xf32>) -> tensor<2x8x16xf32>
  %h = tp.add %x, %d : tensor<2x8x16xf32>
  return %h : tensor<2x8x16xf32>
}

// -----

// What the program still reads stays: a product the backward reads (a
// second use), a SiLU read twice, a linear with a bias (its own epilogue),
// and a product that goes through a collective before its add.
shard.grid @tp(shape = 2)

// CHECK-LABEL: func.func @kept
// CHECK-NOT: tp.linear_epilogue
// CHECK: return
func.func @kept(%x: tensor<4x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %y0 = tp.linear %x, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %a0 = tp.add %y0, %x : tensor<4x16xf32>
  %y1 = tp.linear %x, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %s1 = tp.silu %y1 : tensor<4x16xf32>
  %m1 = tp.mul %s1, %x : tensor<4x16xf32>
  %y2 = tp.linear %x, %w, %b : (tensor<4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %a2 = tp.add %y2, %x : tensor<4x16xf32>
  %y3 = tp.linear %x, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %r3 = shard.all_reduce %y3 on @tp grid_axes = [0] : tensor<4x16xf32> -> tensor<4x16xf32>
  %a3 = tp.add %r3, %x : tensor<4x16xf32>
  return %y0, %a0, %m1, %s1, %a2, %a3 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}
