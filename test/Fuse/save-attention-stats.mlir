// RUN: tp-opt %s --split-input-file --tp-save-attention-stats | FileCheck %s
// RUN: tp-opt %s --split-input-file --tp-save-attention-stats | tp-opt --split-input-file | FileCheck %s

// A training step's attention and its backward: the forward also gives its
// log-sum-exp ([batch, seq, heads], f32), and the backward reads it and the
// forward's output instead of running the forward again.
// CHECK-LABEL: func.func @masked_gqa
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = tp.attention %arg0, %arg1, %arg2 mask %arg3 {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f64, sliding_window = 3 : i64}
// CHECK-SAME: -> (tensor<2x8x64xbf16>, tensor<2x8x4xf32>)
// CHECK-NEXT: {{.*}} = tp.attention_grad %arg0, %arg1, %arg2, %arg4 mask %arg3 saved %[[O]], %[[LSE]] {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f64, sliding_window = 3 : i64}
// CHECK-NEXT: return %[[O]]
func.func @masked_gqa(%q: tensor<2x8x64xbf16>, %k: tensor<2x8x32xbf16>,
    %v: tensor<2x8x32xbf16>, %m: tensor<2x8xi64>, %do: tensor<2x8x64xbf16>)
    -> (tensor<2x8x64xbf16>, tensor<2x8x64xbf16>, tensor<2x8x32xbf16>, tensor<2x8x32xbf16>) {
  %o = tp.attention %q, %k, %v mask %m {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64, sliding_window = 3 : i64} : (tensor<2x8x64xbf16>, tensor<2x8x32xbf16>, tensor<2x8x32xbf16>, tensor<2x8xi64>) -> tensor<2x8x64xbf16>
  %dq, %dk, %dv = tp.attention_grad %q, %k, %v, %do mask %m {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64, sliding_window = 3 : i64} : (tensor<2x8x64xbf16>, tensor<2x8x32xbf16>, tensor<2x8x32xbf16>, tensor<2x8x64xbf16>, tensor<2x8xi64>) -> (tensor<2x8x64xbf16>, tensor<2x8x32xbf16>, tensor<2x8x32xbf16>)
  return %o, %dq, %dk, %dv : tensor<2x8x64xbf16>, tensor<2x8x64xbf16>, tensor<2x8x32xbf16>, tensor<2x8x32xbf16>
}

// -----

// Dynamic batch and sequence, soft-capping: the log-sum-exp takes q's
// leading dimensions.
// CHECK-LABEL: func.func @dynamic_softcap
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = tp.attention %arg0, %arg1, %arg2 {causal, head_dim = 16 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 2.500000e-01 : f64, softcap = 5.000000e+01 : f64}
// CHECK-SAME: -> (tensor<?x?x32xf32>, tensor<?x?x2xf32>)
// CHECK-NEXT: {{.*}} = tp.attention_grad %arg0, %arg1, %arg2, %arg3 saved %[[O]], %[[LSE]]
func.func @dynamic_softcap(%q: tensor<?x?x32xf32>, %k: tensor<?x?x16xf32>,
    %v: tensor<?x?x16xf32>, %do: tensor<?x?x32xf32>)
    -> (tensor<?x?x32xf32>, tensor<?x?x32xf32>) {
  %o = tp.attention %q, %k, %v {causal, head_dim = 16 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 2.5e-01 : f64, softcap = 5.0e+01 : f64} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x32xf32>
  %dq, %dk, %dv = tp.attention_grad %q, %k, %v, %do {causal, head_dim = 16 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 2.5e-01 : f64, softcap = 5.0e+01 : f64} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x32xf32>) -> (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>)
  return %o, %dq : tensor<?x?x32xf32>, tensor<?x?x32xf32>
}

// -----

// No forward to read: a backward whose attention differs (another scale,
// no mask) or whose q was recomputed (tp-build-train-step's recompute:
// another value) runs the forward again.
// CHECK-LABEL: func.func @no_forward
// CHECK-NEXT: %[[O:.*]] = tp.attention %arg0, %arg1, %arg1 mask %arg2
// CHECK-SAME: -> tensor<1x4x32xf32>
// CHECK-NEXT: {{.*}} = tp.attention_grad %arg0, %arg1, %arg1, %arg3 mask %arg2 {
// CHECK-NEXT: {{.*}} = tp.attention_grad %arg0, %arg1, %arg1, %arg3 {
// CHECK-NEXT: %[[R:.*]] = tp.scale %arg0
// CHECK-NEXT: {{.*}} = tp.attention_grad %[[R]], %arg1, %arg1, %arg3 mask %arg2 {
// CHECK-NOT: saved
func.func @no_forward(%q: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>,
    %m: tensor<1x4xi64>, %do: tensor<1x4x32xf32>) -> tensor<1x4x32xf32> {
  %o = tp.attention %q, %k, %k mask %m {head_dim = 16 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 2.5e-01 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4xi64>) -> tensor<1x4x32xf32>
  %a:3 = tp.attention_grad %q, %k, %k, %do mask %m {head_dim = 16 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 5.0e-01 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x32xf32>, tensor<1x4xi64>) -> (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  %b:3 = tp.attention_grad %q, %k, %k, %do {head_dim = 16 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 2.5e-01 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x32xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  %r = tp.scale %q by 1.0 : tensor<1x4x32xf32>
  %c:3 = tp.attention_grad %r, %k, %k, %do mask %m {head_dim = 16 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 2.5e-01 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x32xf32>, tensor<1x4xi64>) -> (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %o : tensor<1x4x32xf32>
}

// -----

// A backward before its forward (in another order than a training step's)
// is left alone, and a forward that already gives its log-sum-exp is
// reused as it is.
// CHECK-LABEL: func.func @order
// CHECK-NEXT: {{.*}} = tp.attention_grad %arg0, %arg1, %arg1, %arg2 {
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = tp.attention %arg0, %arg1, %arg1 {
// CHECK-NEXT: {{.*}} = tp.attention_grad %arg0, %arg1, %arg1, %arg2 saved %[[O]], %[[LSE]] {
func.func @order(%q: tensor<1x4x32xf32>, %k: tensor<1x4x16xf32>,
    %do: tensor<1x4x32xf32>) -> tensor<1x4x32xf32> {
  %a:3 = tp.attention_grad %q, %k, %k, %do {head_dim = 16 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 2.5e-01 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x32xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  %o, %lse = tp.attention %q, %k, %k {head_dim = 16 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 2.5e-01 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x2xf32>)
  %b:3 = tp.attention_grad %q, %k, %k, %do {head_dim = 16 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 2.5e-01 : f64} : (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>, tensor<1x4x32xf32>) -> (tensor<1x4x32xf32>, tensor<1x4x16xf32>, tensor<1x4x16xf32>)
  return %o : tensor<1x4x32xf32>
}
