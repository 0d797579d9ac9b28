// RUN: tp-opt %s --split-input-file --tp-fuse-add-rms-norm | FileCheck %s
// RUN: tp-opt %s --split-input-file --tp-fuse-add-rms-norm | tp-opt --split-input-file | FileCheck %s

// Gemma3's post-norm, the residual add and the next block's pre-norm: the
// add and the norm become one op where the norm stood, the sum going on to
// the next residual add.
// CHECK-LABEL: func.func @post_norm_block
// CHECK-NEXT: %[[P:.*]] = tp.rms_norm %arg1, %arg2 {epsilon = 9.9999999999999995E-7 : f64, tp.layer = 3 : i64, weight_offset = 1.000000e+00 : f64}
// CHECK-NEXT: %[[S:.*]], %[[N:.*]] = tp.add_rms_norm %arg0, %[[P]], %arg3 {epsilon = 9.9999999999999995E-7 : f64, tp.layer = 3 : i64, weight_offset = 1.000000e+00 : f64} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>)
// CHECK-NEXT: %[[M:.*]] = tp.silu %[[N]]
// CHECK-NEXT: %[[O:.*]] = tp.add %[[S]], %[[M]] {tp.layer = 3 : i64}
// CHECK-NEXT: return %[[O]]
func.func @post_norm_block(%residual: tensor<2x8x64xf32>, %attn: tensor<2x8x64xf32>,
    %w_post: tensor<64xf32>, %w_pre: tensor<64xf32>) -> tensor<2x8x64xf32> {
  %p = tp.rms_norm %attn, %w_post {epsilon = 1.0e-6 : f64, weight_offset = 1.0 : f64, tp.layer = 3 : i64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %h = tp.add %residual, %p {tp.layer = 3 : i64} : tensor<2x8x64xf32>
  %n = tp.rms_norm %h, %w_pre {epsilon = 1.0e-6 : f64, weight_offset = 1.0 : f64, tp.layer = 3 : i64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %m = tp.silu %n : tensor<2x8x64xf32>
  %o = tp.add %h, %m {tp.layer = 3 : i64} : tensor<2x8x64xf32>
  return %o : tensor<2x8x64xf32>
}

// -----

// The sum is read before the norm: the fused op stands at the add (the
// weight is an argument), bf16.
// CHECK-LABEL: func.func @sum_read_first
// CHECK-NEXT: %[[S:.*]], %[[N:.*]] = tp.add_rms_norm %arg0, %arg1, %arg2 {epsilon = 1.000000e-05 : f64}
// CHECK-NEXT: %[[E:.*]] = tp.silu %[[S]]
// CHECK-NEXT: return %[[E]], %[[N]]
func.func @sum_read_first(%a: tensor<4x32xbf16>, %b: tensor<4x32xbf16>,
    %w: tensor<32xbf16>) -> (tensor<4x32xbf16>, tensor<4x32xbf16>) {
  %h = tp.add %a, %b : tensor<4x32xbf16>
  %e = tp.silu %h : tensor<4x32xbf16>
  %n = tp.rms_norm %h, %w {epsilon = 1.0e-5 : f64} : (tensor<4x32xbf16>, tensor<32xbf16>) -> tensor<4x32xbf16>
  return %e, %n : tensor<4x32xbf16>, tensor<4x32xbf16>
}

// -----

// Two norms of one sum: the first fuses, the second reads the fused sum.
// CHECK-LABEL: func.func @two_norms
// CHECK-NEXT: %[[S:.*]], %[[N:.*]] = tp.add_rms_norm %arg0, %arg1, %arg2
// CHECK-NEXT: %[[M:.*]] = tp.rms_norm %[[S]], %arg3
// CHECK-NEXT: return %[[N]], %[[M]]
func.func @two_norms(%a: tensor<4x32xf32>, %b: tensor<4x32xf32>,
    %w1: tensor<32xf32>, %w2: tensor<32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %h = tp.add %a, %b : tensor<4x32xf32>
  %n = tp.rms_norm %h, %w1 {epsilon = 1.0e-5 : f64} : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  %m = tp.rms_norm %h, %w2 {epsilon = 1.0e-5 : f64} : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  return %n, %m : tensor<4x32xf32>, tensor<4x32xf32>
}

// -----

// What stays apart: a per-head (grouped) norm; an add and a norm of
// different decoder layers (each layer hands the next only the residual
// stream); a norm in another block; and a sum read before the norm whose
// weight is defined only after the add.
// CHECK-LABEL: func.func @apart
// CHECK-NOT: tp.add_rms_norm
// CHECK: return
func.func @apart(%a: tensor<4x32xf32>, %b: tensor<4x32xf32>, %wg: tensor<8xf32>,
    %w: tensor<32xf32>, %c: i1) -> (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>) {
  %h0 = tp.add %a, %b : tensor<4x32xf32>
  %g = tp.rms_norm %h0, %wg {epsilon = 1.0e-5 : f64, group_size = 8 : i64} : (tensor<4x32xf32>, tensor<8xf32>) -> tensor<4x32xf32>
  %h1 = tp.add %a, %g {tp.layer = 0 : i64} : tensor<4x32xf32>
  %n1 = tp.rms_norm %h1, %w {epsilon = 1.0e-5 : f64, tp.layer = 1 : i64} : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  %h2 = tp.add %n1, %b : tensor<4x32xf32>
  %n2 = scf.if %c -> tensor<4x32xf32> {
    %r = tp.rms_norm %h2, %w {epsilon = 1.0e-5 : f64} : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    scf.yield %r : tensor<4x32xf32>
  } else {
    scf.yield %h2 : tensor<4x32xf32>
  }
  %h3 = tp.add %n2, %b : tensor<4x32xf32>
  %e = tp.silu %h3 : tensor<4x32xf32>
  %w3 = tp.silu %w : tensor<32xf32>
  %n3 = tp.rms_norm %h3, %w3 {epsilon = 1.0e-5 : f64} : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  return %g, %n1, %n2, %e, %n3 : tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>
}
