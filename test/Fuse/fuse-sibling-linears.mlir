// RUN: tp-opt %s --split-input-file --tp-fuse-sibling-linears | FileCheck %s
// The fused form prints and parses back.
// RUN: tp-opt %s --split-input-file --tp-fuse-sibling-linears | tp-opt --split-input-file | FileCheck %s

// An attention block's q, k, v (one rank's blocks) become one product where
// q was; the rotary and attention read its results.
// CHECK-LABEL: func.func @qkv
// CHECK-SAME: (%[[H:.*]]: tensor<1x16x128xf32>, %[[WQ:.*]]: tensor<64x128xf32>, %[[WK:.*]]: tensor<32x128xf32>, %[[WV:.*]]: tensor<32x128xf32>)
// CHECK-NEXT: %[[R:.*]]:3 = tp.linear_siblings %[[H]], %[[WQ]], %[[WK]], %[[WV]] : (tensor<1x16x128xf32>, tensor<64x128xf32>, tensor<32x128xf32>, tensor<32x128xf32>) -> (tensor<1x16x64xf32>, tensor<1x16x32xf32>, tensor<1x16x32xf32>)
// CHECK-NEXT: %[[S:.*]] = tp.add %[[R]]#1, %[[R]]#2
// CHECK-NEXT: return %[[R]]#0, %[[S]]
func.func @qkv(%h: tensor<1x16x128xf32>, %wq: tensor<64x128xf32>, %wk: tensor<32x128xf32>, %wv: tensor<32x128xf32>) -> (tensor<1x16x64xf32>, tensor<1x16x32xf32>) {
  %q = tp.linear %h, %wq : (tensor<1x16x128xf32>, tensor<64x128xf32>) -> tensor<1x16x64xf32>
  %k = tp.linear %h, %wk : (tensor<1x16x128xf32>, tensor<32x128xf32>) -> tensor<1x16x32xf32>
  %v = tp.linear %h, %wv : (tensor<1x16x128xf32>, tensor<32x128xf32>) -> tensor<1x16x32xf32>
  %s = tp.add %k, %v : tensor<1x16x32xf32>
  return %q, %s : tensor<1x16x64xf32>, tensor<1x16x32xf32>
}

// -----

// A gated MLP's gate and up in the bmm form: a pair that keeps its form.
// CHECK-LABEL: func.func @gate_up
// CHECK: %[[R:.*]]:2 = tp.linear_siblings %{{.*}}, %{{.*}}, %{{.*}} {form = #tp<linear_form bmm>} :
// CHECK-NEXT: tp.silu %[[R]]#0
// CHECK-NEXT: tp.mul %{{.*}}, %[[R]]#1
func.func @gate_up(%x: tensor<2x8x16xf32>, %wg: tensor<32x16xf32>, %wu: tensor<32x16xf32>) -> tensor<2x8x32xf32> {
  %g = tp.linear %x, %wg {form = #tp<linear_form bmm>} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %u = tp.linear %x, %wu {form = #tp<linear_form bmm>} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %s = tp.silu %g : tensor<2x8x32xf32>
  %m = tp.mul %s, %u : tensor<2x8x32xf32>
  return %m : tensor<2x8x32xf32>
}

// -----

// Four siblings are two pairs, five a triple and a pair (the runtime's
// forms take two or three weights).
// CHECK-LABEL: func.func @four
// CHECK-COUNT-2: tp.linear_siblings %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}} :
// CHECK-NOT: tp.linear
// CHECK: return
func.func @four(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = tp.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %b = tp.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %c = tp.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %d = tp.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  return %a, %b, %c, %d : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// CHECK-LABEL: func.func @five
// CHECK: tp.linear_siblings %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}} :
// CHECK: tp.linear_siblings %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}} :
// CHECK-NOT: tp.linear
// CHECK: return
func.func @five(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = tp.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %b = tp.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %c = tp.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %d = tp.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %e = tp.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  return %a, %b, %c, %d, %e : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// What does not fuse: a lone linear; linears with a bias (Qwen2's q, k,
// v); of other inputs; of another form; with weights of another element
// type (a float32 adapter on a bf16 checkpoint); a weight computed after
// the first sibling.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: tp.linear_siblings
// CHECK: return
func.func @kept(%x: tensor<2x4x16xf32>, %y: tensor<2x4x16xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %a = tp.linear %x, %w, %b : (tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %c = tp.linear %x, %w, %b : (tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %d = tp.linear %x, %w : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %e = tp.linear %y, %w : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %f = tp.linear %y, %w {form = #tp<linear_form bmm>} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  return %a, %c, %e, %f : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @kept_types
// CHECK-NOT: tp.linear_siblings
// CHECK: return
func.func @kept_types(%x: tensor<4x16xbf16>, %w: tensor<8x16xbf16>, %a: tensor<8x16xf32>, %w2: tensor<8x16xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %p = tp.linear %x, %w : (tensor<4x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8xbf16>
  %q = tp.linear %x, %a : (tensor<4x16xbf16>, tensor<8x16xf32>) -> tensor<4x8xbf16>
  %later = tp.add %w2, %w2 : tensor<8x16xbf16>
  %r = tp.linear %x, %later : (tensor<4x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8xbf16>
  return %p, %q, %r : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>
}
