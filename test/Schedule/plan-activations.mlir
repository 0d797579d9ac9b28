// RUN: tp-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tp-plan-activations))' | FileCheck %s

// Buffers by lifetime, in bytes per token, greedy by size. Positions:
// h 0, n 1, q 2, k 3, a 4, r 5, m 6, z 7, s 8, o 9. The residual add may
// write into %h (its consuming form), so %h lives until %r's last reader
// (z, 7); %m and %z live until the add reads them (8), so its result
// may not share their bytes. Largest first: q [2,4] at 0, k [3,4] at 64,
// a [4,5] at 128 (after q and k), h [0,7] at 192, n [1,3] at 128 (a starts
// later), m [6,8] at 0, z [7,8] at 64 (m and h are live), s [8,9] at 128
// (m and z are live; h is not), n's buffer again, so one slot. 208 bytes,
// 256 aligned. The returned %o and the epilogue keep their own.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tp.activation_buffers = array<i64: 192, 16, 128, 16, 0, 32, 64, 32, 128, 32, 0, 16, 64, 16>
// CHECK-SAME: tp.activation_bytes_per_token = 256 : i64
// CHECK: tp.embedding {{.*}}tp.activation_slot = 0 : i64
// CHECK: tp.rms_norm {{.*}}tp.activation_slot = 1 : i64
// CHECK: tp.linear {{.*}}tp.activation_slot = 2 : i64
// CHECK: tp.linear {{.*}}tp.activation_slot = 3 : i64
// CHECK: tp.attention {{.*}}tp.activation_slot = 4 : i64
// CHECK: tp.linear_epilogue add
// CHECK-NOT: tp.activation_slot
// CHECK-SAME: -> tensor<?x?x4xf32>
// CHECK: tp.rms_norm {{.*}}tp.activation_slot = 5 : i64
// CHECK: tp.rms_norm {{.*}}tp.activation_slot = 6 : i64
// CHECK: tp.add {{.*}}tp.activation_slot = 1 : i64
// CHECK: tp.linear
// CHECK-NOT: tp.activation_slot
// CHECK: return
func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x4xf32>, %nw: tensor<4xf32>, %wq: tensor<8x4xf32>,
    %wo: tensor<4x8xf32>, %wl: tensor<8x4xf32>) -> tensor<?x?x8xf32> {
  %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
  %n = tp.rms_norm %h, %nw {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  %q = tp.linear %n, %wq : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  %k = tp.linear %n, %wq : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  %a = tp.attention %q, %k, %k {causal, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %r = tp.linear_epilogue add %a, %wo, %h : (tensor<?x?x8xf32>, tensor<4x8xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %m = tp.rms_norm %r, %nw {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  %z = tp.rms_norm %r, %nw {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  %s = tp.add %m, %z : tensor<?x?x4xf32>
  %o = tp.linear %s, %wl : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  return %o : tensor<?x?x8xf32>
}

// -----

// The storage a consuming form may write into stays reserved until the
// last reader of its result: %h [0, 3] (through %r) at 64 beside the
// larger %l [1, 4] at 0, so %n [3, 4] goes after both, at 128 (were %h free
// after its own last reader, 2, %n would take 64).
// CHECK-LABEL: func.func @consumed
// CHECK-SAME: tp.activation_buffers = array<i64: 64, 16, 0, 64, 128, 16>
// CHECK-SAME: tp.activation_bytes_per_token = 192 : i64
func.func @consumed(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x4xf32>, %nw: tensor<4xf32>, %wup: tensor<16x4xf32>,
    %wdown: tensor<4x16xf32>) -> tensor<?x?x4xf32> {
  %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
  %l = tp.linear %h, %wup : (tensor<?x?x4xf32>, tensor<16x4xf32>) -> tensor<?x?x16xf32>
  %r = tp.linear_epilogue add %l, %wdown, %h : (tensor<?x?x16xf32>, tensor<4x16xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %n = tp.rms_norm %r, %nw {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  %o = tp.linear_epilogue silu_mul %l, %wdown, %n : (tensor<?x?x16xf32>, tensor<4x16xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  return %o : tensor<?x?x4xf32>
}

// -----

// What the function returns keeps its own memory, and so does what may
// share storage with it (%h, which the returned residual add may write
// into); static shapes are not proportional to the tokens.
// CHECK-LABEL: func.func @returned
// CHECK-SAME: tp.activation_buffers = array<i64: 0, 32>
// CHECK: tp.embedding
// CHECK-NOT: tp.activation_slot
// CHECK-SAME: -> tensor<?x?x4xf32>
// CHECK: tp.linear {{.*}}tp.activation_slot = 0 : i64
// CHECK: tp.linear %arg4
// CHECK-NOT: tp.activation_slot
// CHECK-SAME: -> tensor<2x8xf32>
func.func @returned(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x4xf32>, %wq: tensor<8x4xf32>, %wo: tensor<4x8xf32>,
    %s: tensor<2x4xf32>) -> (tensor<?x?x4xf32>, tensor<2x8xf32>) {
  %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
  %q = tp.linear %h, %wq : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  %r = tp.linear_epilogue add %q, %wo, %h : (tensor<?x?x8xf32>, tensor<4x8xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %t = tp.linear %s, %wq : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return %r, %t : tensor<?x?x4xf32>, tensor<2x8xf32>
}

// -----

// Without the input ids the arena has no size: no plan (and a stale one
// is removed).
// CHECK-LABEL: func.func @no_ids
// CHECK-NOT: tp.activation
func.func @no_ids(%x: tensor<?x?x4xf32>, %w: tensor<8x4xf32>, %w2: tensor<8x8xf32>) -> tensor<?x?x8xf32>
    attributes {tp.activation_bytes_per_token = 64 : i64, tp.activation_buffers = array<i64: 0, 32>} {
  %q = tp.linear %x, %w {tp.activation_slot = 0 : i64} : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  %k = tp.linear %q, %w2 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %k : tensor<?x?x8xf32>
}

// -----

// An all-reduce in flight sums in its input's storage (the start's
// consuming form) and the wait returns that storage: %h's bytes stay
// reserved until the add reads the sum (4), so %r cannot take them.
// h [0,4] at 0, e [2,4] at 64, r [4,5] at 128. (Were the wait's result not
// %h's storage, %h would end at the wait (3) and %r would take 0.)
// CHECK-LABEL: func.func @in_flight
// CHECK-SAME: tp.activation_buffers = array<i64: 0, 16, 64, 16, 128, 16>
// CHECK-SAME: tp.activation_bytes_per_token = 192 : i64
module {
  shard.grid @tp(shape = 2)
  func.func @in_flight(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %emb: tensor<16x4xf32>, %wl: tensor<8x4xf32>) -> tensor<?x?x8xf32> {
    %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %p = tp.all_reduce_start %h on @tp grid_axes = [0] : tensor<?x?x4xf32>
    %e = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %s = tp.all_reduce_wait %p : tensor<?x?x4xf32>
    %r = tp.add %s, %e : tensor<?x?x4xf32>
    %o = tp.linear %r, %wl : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    return %o : tensor<?x?x8xf32>
  }
}
