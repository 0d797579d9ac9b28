// RUN: tp-opt %s --split-input-file --tp-fuse-silu-mul-grad | FileCheck %s
// RUN: tp-opt %s --split-input-file --tp-fuse-silu-mul-grad | tp-opt --split-input-file | FileCheck %s

// What tp-build-train-step makes of a gated MLP: the forward's SiLU and
// product stay, the backward's two products and silu_grad become one op
// (before the first of its results' old definitions), and the forward's
// SiLU is no longer read by the backward.
// CHECK-LABEL: func.func @gated_mlp
// CHECK-NEXT: %[[S:.*]] = tp.silu %arg0 : tensor<2x8x64xf32>
// CHECK-NEXT: %[[H:.*]] = tp.mul %[[S]], %arg1 : tensor<2x8x64xf32>
// CHECK-NEXT: %[[DG:.*]], %[[DU:.*]] = tp.silu_mul_grad %arg0, %arg1, %arg2 : tensor<2x8x64xf32>
// CHECK-NEXT: return %[[H]], %[[DG]], %[[DU]]
func.func @gated_mlp(%gate: tensor<2x8x64xf32>, %up: tensor<2x8x64xf32>,
    %dh: tensor<2x8x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) {
  %s = tp.silu %gate : tensor<2x8x64xf32>
  %h = tp.mul %s, %up : tensor<2x8x64xf32>
  %ds = tp.mul %dh, %up : tensor<2x8x64xf32>
  %du = tp.mul %dh, %s : tensor<2x8x64xf32>
  %dg = tp.silu_grad %gate, %ds : tensor<2x8x64xf32>
  return %h, %dg, %du : tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>
}

// -----

// The products' operands in the other order, bf16, and a recomputed SiLU
// (tp-build-train-step's recompute=true) that nothing reads afterwards:
// it goes.
// CHECK-LABEL: func.func @operands_swapped
// CHECK-NEXT: %[[DG:.*]], %[[DU:.*]] = tp.silu_mul_grad %arg0, %arg1, %arg2 : tensor<4x16xbf16>
// CHECK-NEXT: return %[[DG]], %[[DU]]
func.func @operands_swapped(%gate: tensor<4x16xbf16>, %up: tensor<4x16xbf16>,
    %dh: tensor<4x16xbf16>) -> (tensor<4x16xbf16>, tensor<4x16xbf16>) {
  %s = tp.silu %gate : tensor<4x16xbf16>
  %ds = tp.mul %up, %dh : tensor<4x16xbf16>
  %du = tp.mul %s, %dh : tensor<4x16xbf16>
  %dg = tp.silu_grad %gate, %ds : tensor<4x16xbf16>
  return %dg, %du : tensor<4x16xbf16>, tensor<4x16xbf16>
}

// -----

// Left alone: dy * up read by something else too.
// CHECK-LABEL: func.func @product_read_twice
// CHECK-NOT: tp.silu_mul_grad
// CHECK: tp.silu_grad
func.func @product_read_twice(%gate: tensor<4x16xf32>, %up: tensor<4x16xf32>,
    %dh: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %s = tp.silu %gate : tensor<4x16xf32>
  %ds = tp.mul %dh, %up : tensor<4x16xf32>
  %du = tp.mul %dh, %s : tensor<4x16xf32>
  %dg = tp.silu_grad %gate, %ds : tensor<4x16xf32>
  return %ds, %du, %dg : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Left alone: the sibling product's SiLU is of another tensor.
// CHECK-LABEL: func.func @silu_of_another
// CHECK-NOT: tp.silu_mul_grad
// CHECK: tp.silu_grad
func.func @silu_of_another(%gate: tensor<4x16xf32>, %other: tensor<4x16xf32>,
    %up: tensor<4x16xf32>, %dh: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %s = tp.silu %other : tensor<4x16xf32>
  %ds = tp.mul %up, %dh : tensor<4x16xf32>
  %du = tp.mul %dh, %s : tensor<4x16xf32>
  %dg = tp.silu_grad %gate, %ds : tensor<4x16xf32>
  return %du, %dg : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Left alone: a silu_grad whose output gradient is no product, and one
// without a sibling product of dy and the SiLU.
// CHECK-LABEL: func.func @no_sibling
// CHECK-NOT: tp.silu_mul_grad
// CHECK-COUNT-2: tp.silu_grad
func.func @no_sibling(%gate: tensor<4x16xf32>, %up: tensor<4x16xf32>,
    %dh: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %dg = tp.silu_grad %gate, %dh : tensor<4x16xf32>
  %ds = tp.mul %dh, %up : tensor<4x16xf32>
  %dg2 = tp.silu_grad %gate, %ds : tensor<4x16xf32>
  return %dg, %dg2 : tensor<4x16xf32>, tensor<4x16xf32>
}
