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
// second use), a SiLU read twice, a linear with a bias (its own epilogue).
// CHECK-LABEL: func.func @kept
// CHECK-NOT: tp.linear_epilogue
// CHECK: return
func.func @kept(%x: tensor<4x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %y0 = tp.linear %x, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %a0 = tp.add %y0, %x : tensor<4x16xf32>
  %y1 = tp.linear %x, %w : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %s1 = tp.silu %y1 : tensor<4x16xf32>
  %m1 = tp.mul %s1, %x : tensor<4x16xf32>
  %y2 = tp.linear %x, %w, %b : (tensor<4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %a2 = tp.add %y2, %x : tensor<4x16xf32>
  return %y0, %a0, %m1, %s1, %a2 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A row-split projection on a rank: the residual goes into the first
// rank's partial sum, before the all-reduce, which then replaces the add
// (either operand order; the bmm form is kept).
shard.grid @tp(shape = 2)

// CHECK-LABEL: func.func @row_split
// CHECK-SAME: (%[[A:.*]]: tensor<1x8x8xf32>, %[[WO:.*]]: tensor<16x8xf32>, %[[WD:.*]]: tensor<16x8xf32>, %[[R:.*]]: tensor<1x8x16xf32>)
// CHECK-NEXT: %[[P:.*]] = tp.linear_epilogue add_once %[[A]], %[[WO]], %[[R]] : (tensor<1x8x8xf32>, tensor<16x8xf32>, tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[H:.*]] = shard.all_reduce %[[P]] on @tp grid_axes = [0]
// CHECK-NEXT: %[[Q:.*]] = tp.linear_epilogue add_once %[[A]], %[[WD]], %[[H]] {form = #tp<linear_form bmm>} :
// CHECK-NEXT: %[[H2:.*]] = shard.all_reduce %[[Q]] on @tp grid_axes = [0]
// CHECK-NEXT: return %[[H2]]
func.func @row_split(%a: tensor<1x8x8xf32>, %wo: tensor<16x8xf32>, %wd: tensor<16x8xf32>, %r: tensor<1x8x16xf32>) -> tensor<1x8x16xf32> {
  %p = tp.linear %a, %wo : (tensor<1x8x8xf32>, tensor<16x8xf32>) -> tensor<1x8x16xf32>
  %s = shard.all_reduce %p on @tp grid_axes = [0] : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %h = tp.add %r, %s : tensor<1x8x16xf32>
  %q = tp.linear %a, %wd {form = #tp<linear_form bmm>} : (tensor<1x8x8xf32>, tensor<16x8xf32>) -> tensor<1x8x16xf32>
  %s2 = shard.all_reduce %q on @tp grid_axes = [0] : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
  %h2 = tp.add %s2, %h : tensor<1x8x16xf32>
  return %h2 : tensor<1x8x16xf32>
}

// -----

// Before a reduction, what must stay: a reduced sum read twice, a partial
// product read twice, a max reduction, a residual computed after the
// product, and an add of the reduced sum to itself.
shard.grid @tp(shape = 2)

// CHECK-LABEL: func.func @kept_row_split
// CHECK-NOT: tp.linear_epilogue
// CHECK: return
func.func @kept_row_split(%a: tensor<4x8xf32>, %w: tensor<16x8xf32>, %r: tensor<4x16xf32>)
    -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %p0 = tp.linear %a, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<4x16xf32> -> tensor<4x16xf32>
  %h0 = tp.add %s0, %r : tensor<4x16xf32>
  %p1 = tp.linear %a, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<4x16xf32> -> tensor<4x16xf32>
  %h1 = tp.add %s1, %r : tensor<4x16xf32>
  %p2 = tp.linear %a, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s2 = shard.all_reduce %p2 on @tp grid_axes = [0] reduction = max : tensor<4x16xf32> -> tensor<4x16xf32>
  %h2 = tp.add %s2, %r : tensor<4x16xf32>
  %p3 = tp.linear %a, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %later = tp.silu %r : tensor<4x16xf32>
  %s3 = shard.all_reduce %p3 on @tp grid_axes = [0] : tensor<4x16xf32> -> tensor<4x16xf32>
  %h3 = tp.add %s3, %later : tensor<4x16xf32>
  %p4 = tp.linear %a, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %s4 = shard.all_reduce %p4 on @tp grid_axes = [0] : tensor<4x16xf32> -> tensor<4x16xf32>
  %h4 = tp.add %s4, %s4 : tensor<4x16xf32>
  return %h0, %s0, %h1, %p1, %h2, %h3, %h4 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A gated MLP whose gate and up are one product (tp-fuse-sibling-linears):
// with the SiLU and the product, one tp.linear_swiglu (the gate being
// whichever result the SiLU reads; the form kept).
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x16xf32>, %[[WU:.*]]: tensor<32x16xf32>, %[[WG:.*]]: tensor<32x16xf32>)
// CHECK-NEXT: %[[H:.*]] = tp.linear_swiglu %[[X]], %[[WG]], %[[WU]] {form = #tp<linear_form bmm>} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT: return %[[H]]
func.func @swiglu(%x: tensor<2x8x16xf32>, %wu: tensor<32x16xf32>, %wg: tensor<32x16xf32>) -> tensor<2x8x32xf32> {
  %r:2 = tp.linear_siblings %x, %wu, %wg {form = #tp<linear_form bmm>} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>)
  %s = tp.silu %r#1 : tensor<2x8x32xf32>
  %m = tp.mul %r#0, %s : tensor<2x8x32xf32>
  return %m : tensor<2x8x32xf32>
}

// -----

// Kept: a sibling result read again (a training step's backward reads the
// gate's product), three siblings, a SiLU of both results' one product.
// CHECK-LABEL: func.func @swiglu_kept
// CHECK-NOT: tp.linear_swiglu
// CHECK: return
func.func @swiglu_kept(%x: tensor<4x16xf32>, %w: tensor<32x16xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>) {
  %r:2 = tp.linear_siblings %x, %w, %w : (tensor<4x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>)
  %s = tp.silu %r#0 : tensor<4x32xf32>
  %m = tp.mul %s, %r#1 : tensor<4x32xf32>
  %t:3 = tp.linear_siblings %x, %w, %w, %w : (tensor<4x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>)
  %ts = tp.silu %t#0 : tensor<4x32xf32>
  %tm = tp.mul %ts, %t#1 : tensor<4x32xf32>
  %u:2 = tp.linear_siblings %x, %w, %w : (tensor<4x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>)
  %us = tp.silu %u#0 : tensor<4x32xf32>
  %um = tp.mul %us, %us : tensor<4x32xf32>
  return %m, %r#0, %tm, %um : tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>
}
