// RUN: tp-opt %s --split-input-file --tp-plan-report --verify-diagnostics -o /dev/null | FileCheck %s

// A partitioned block at tp=2: a column-split and a row-split linear (each
// rank holds half of 8x4 = 32 floats = 128 bytes of each), a replicated
// norm (4 floats) with the sum gradient class, one all-reduce of 4 floats
// per token and one all-gather of the 8-float output.
// CHECK: # Plan report
// CHECK: tp=2: 2 parameters split, 1 replicated; 0.000 MiB of 0.000 MiB of parameters per rank; 2 collectives per forward pass
// CHECK: Plan: (no plan applied)
// CHECK: | `model.layers.0.mlp.up_proj.weight` | [8, 4] | split(0) | sharded | model.layers.*.mlp.up_proj | 64 |
// CHECK: | `model.layers.0.mlp.down_proj.weight` | [4, 8] | split(1) | sharded | model.layers.*.mlp.down_proj | 64 |
// CHECK: | `model.norm.weight` | [4] | replicated | replicated, grad sum | (no key: replicated) | 16 |
// CHECK: | all_gather, layer 0 | 1 | 32 |
// CHECK: | all_reduce, layer 0 | 1 | 16 |
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>,
      %up: tensor<4x4xf32> {tp.fqn = "model.layers.0.mlp.up_proj.weight", tp.placement = #tp.placement<split(0), blocks = 2, key = "model.layers.*.mlp.up_proj">},
      %down: tensor<4x4xf32> {tp.fqn = "model.layers.0.mlp.down_proj.weight", tp.placement = #tp.placement<split(1), blocks = 2, key = "model.layers.*.mlp.down_proj">},
      %nw: tensor<4xf32> {tp.fqn = "model.norm.weight", tp.placement = #tp.placement<replicated, grad = sum>}) -> tensor<?x?x8xf32> {
    %a = tp.linear %x, %up {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %d = tp.linear %a, %down {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %r = shard.all_reduce %d on @tp grid_axes = [0] : tensor<?x?x4xf32> -> tensor<?x?x4xf32>
    %n = tp.rms_norm %r, %nw {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %u = tp.linear %n, %up {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %g = shard.all_gather %u on @tp grid_axes = [0] gather_axis = 2 : tensor<?x?x4xf32> -> tensor<?x?x8xf32>
    return %g : tensor<?x?x8xf32>
  }
}

// -----

// Which GPU kernel runs each kind of attention op (tprt/AttentionKernel.h):
// cuDNN for bf16 (with a mask, with a window), the tiled kernels for f32 and
// soft-capped scores, each row once with its count.
// CHECK: # Plan report
// CHECK: Attention on the GPU
// CHECK: | ops | dtype | heads | head_dim | causal | window | softcap | key mask | kernel |
// CHECK-DAG: | 2 | bf16/f16 | 4/2 | 16 | yes | - | - | yes | cuDNN fused |
// CHECK-DAG: | 1 | bf16/f16 | 4/2 | 16 | yes | 8 | - | no | cuDNN fused |
// CHECK-DAG: | 1 | bf16/f16 | 4/2 | 16 | yes | - | 50 | no | tiled: soft-capped scores |
// CHECK-DAG: | 1 | f32 | 4/2 | 16 | no | - | - | no | tiled: f32 operands (cuDNN's fused attention takes bf16 and f16) |
module {
  shard.grid @tp(shape = 1)
  func.func @forward(%q: tensor<?x?x64xbf16>, %k: tensor<?x?x32xbf16>, %m: tensor<?x?xi64>,
                     %qf: tensor<?x?x64xf32>, %kf: tensor<?x?x32xf32>) -> tensor<?x?x64xbf16> {
    %a = tp.attention %q, %k, %k mask %m {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64} : (tensor<?x?x64xbf16>, tensor<?x?x32xbf16>, tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<?x?x64xbf16>
    %b = tp.attention %a, %k, %k mask %m {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64} : (tensor<?x?x64xbf16>, tensor<?x?x32xbf16>, tensor<?x?x32xbf16>, tensor<?x?xi64>) -> tensor<?x?x64xbf16>
    %c = tp.attention %b, %k, %k {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64, sliding_window = 8 : i64} : (tensor<?x?x64xbf16>, tensor<?x?x32xbf16>, tensor<?x?x32xbf16>) -> tensor<?x?x64xbf16>
    %d = tp.attention %c, %k, %k {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64, softcap = 5.0e+01 : f64} : (tensor<?x?x64xbf16>, tensor<?x?x32xbf16>, tensor<?x?x32xbf16>) -> tensor<?x?x64xbf16>
    %e = tp.attention %qf, %kf, %kf {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.5e-01 : f64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
    return %d : tensor<?x?x64xbf16>
  }
}

// -----

// expected-error @+1 {{plan report: no func.func @forward}}
module {
}
