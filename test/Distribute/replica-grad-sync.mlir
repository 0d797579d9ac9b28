// RUN: split-file %s %t
// RUN: tp-opt %t/shapes70b.mlir --tp-replica-grad-sync="bucket-mib=0.0625" | FileCheck %t/shapes70b.mlir
// RUN: tp-opt %t/shapes70b.mlir --tp-replica-grad-sync | FileCheck %t/shapes70b.mlir --check-prefix=DEFAULT
// RUN: tp-opt %t/onerank.mlir --tp-replica-grad-sync | FileCheck %t/onerank.mlir
// RUN: tp-opt %t/onerank.mlir --tp-replica-grad-sync="dp=2" | FileCheck %t/onerank.mlir --check-prefix=DP1
// RUN: tp-opt %t/shapes70b.mlir --tp-replica-grad-sync="dp=2 bucket-mib=0.0625" | FileCheck %t/shapes70b.mlir --check-prefix=DP
// RUN: not tp-opt %t/onerank.mlir --tp-replica-grad-sync="dp=0" 2>&1 | FileCheck %t/onerank.mlir --check-prefix=DP0
// RUN: tp-opt %t/errors.mlir --split-input-file --tp-replica-grad-sync --verify-diagnostics
// RUN: not tp-opt %t/onerank.mlir --tp-replica-grad-sync="bucket-mib=0" 2>&1 | FileCheck %t/onerank.mlir --check-prefix=LIMIT
// RUN: tp-opt %t/shapes70b.mlir --tp-replica-grad-sync="dp=3 zero=1 bucket-mib=0.0625" | FileCheck %t/shapes70b.mlir --check-prefix=ZERO
// RUN: not tp-opt %t/onerank.mlir --tp-replica-grad-sync="zero=1" 2>&1 | FileCheck %t/onerank.mlir --check-prefix=ZERODP
// RUN: tp-opt %t/zero-errors.mlir --split-input-file --tp-replica-grad-sync="dp=2 zero=1" --verify-diagnostics
// RUN: tp-opt %t/layers.mlir --tp-replica-grad-sync="dp=2 zero=2" | FileCheck %t/layers.mlir
// RUN: tp-opt %t/layers.mlir --tp-replica-grad-sync="dp=2 zero=1" | FileCheck %t/layers.mlir --check-prefix=STAGE1
// RUN: not tp-opt %t/layers.mlir --tp-replica-grad-sync="dp=2 zero=3" 2>&1 | FileCheck %t/layers.mlir --check-prefix=STAGE3

//--- shapes70b.mlir
// Llama-3-70B's replicated parameters at tp=8 (8192-wide norms, 32 KiB
// each at FP32), a replicated 128256 x 8192 embedding (3.9 GiB, more than
// any bucket), a bf16 norm, a Qwen3-style per-head norm whose gradient is
// a partial sum, and a split projection. With 64 KiB buckets: grouped by
// (class, dtype), mean before sum, f32 before bf16, FQNs in string order
// (layers.10 before layers.2: every rank sorts alike), two norms per
// bucket, the embedding alone, the split projection in none; bytes are
// FP32 sizes, the bf16 norm's included.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: tp.optimizer_boundary
// CHECK-NEXT: tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 4202692608 : i64, dtype = f32, fqns = ["model.embed_tokens.weight"], reduction = #tp.grad_reduction<mean>}
// CHECK-NEXT: tp.grad_bucket_all_reduce {bucket = 1 : i64, bytes = 65536 : i64, dtype = f32, fqns = ["model.layers.10.input_layernorm.weight", "model.layers.2.input_layernorm.weight"], reduction = #tp.grad_reduction<mean>}
// CHECK-NEXT: tp.grad_bucket_all_reduce {bucket = 2 : i64, bytes = 65536 : i64, dtype = f32, fqns = ["model.layers.2.post_attention_layernorm.weight", "model.norm.weight"], reduction = #tp.grad_reduction<mean>}
// CHECK-NEXT: tp.grad_bucket_all_reduce {bucket = 3 : i64, bytes = 32768 : i64, dtype = bf16, fqns = ["model.layers.3.input_layernorm.weight"], reduction = #tp.grad_reduction<mean>}
// CHECK-NEXT: tp.grad_bucket_all_reduce {bucket = 4 : i64, bytes = 512 : i64, dtype = f32, fqns = ["model.layers.0.self_attn.q_norm.weight"], reduction = #tp.grad_reduction<sum>}
// CHECK-NEXT: tp.normalize_grads
// CHECK-NOT: tp.grad_bucket_all_reduce
// Data parallelism (dp=2): after the replica buckets over tp, every
// gradient, the split projection's block included, summed over @dp.
// DP: shard.grid @dp(shape = 2)
// DP: tp.grad_bucket_all_reduce {bucket = 4 : i64, {{.*}}reduction = #tp.grad_reduction<sum>}
// DP-NEXT: tp.grad_bucket_all_reduce {bucket = 5 : i64, bytes = 4202692608 : i64, dtype = f32, fqns = ["model.embed_tokens.weight"], group = "dp", reduction = #tp.grad_reduction<sum>}
// DP-NEXT: tp.grad_bucket_all_reduce {bucket = 6 : i64, bytes = 512 : i64, dtype = f32, fqns = ["model.layers.0.self_attn.q_norm.weight"], group = "dp", reduction = #tp.grad_reduction<sum>}
// DP-NEXT: tp.grad_bucket_all_reduce {bucket = 7 : i64, bytes = 33554432 : i64, dtype = f32, fqns = ["model.layers.0.self_attn.q_proj.weight"], group = "dp", reduction = #tp.grad_reduction<sum>}
// DP-NEXT: tp.grad_bucket_all_reduce {bucket = 8 : i64, bytes = 65536 : i64, {{.*}}group = "dp"
// DP-NEXT: tp.grad_bucket_all_reduce {bucket = 9 : i64, bytes = 65536 : i64, {{.*}}group = "dp"
// DP-NEXT: tp.grad_bucket_all_reduce {bucket = 10 : i64, bytes = 32768 : i64, dtype = bf16, {{.*}}group = "dp"
// DP-NEXT: tp.normalize_grads
// ZeRO stage 1 (zero=1) over dp=3: the replica buckets over tp as before,
// then each data-parallel bucket a reduce-scatter padded to a multiple of
// lcm(3, 128) = 384 FP32 elements (the 128-element q_norm to 384, the
// embedding already a multiple), the norm and the update on this rank's
// runs, and each bucket's parameters all-gathered after the update, in
// its parameters' type (the bf16 norm's 8448 elements: 16896 bytes).
// ZERO: tp.grad_bucket_all_reduce {bucket = 4 : i64, {{.*}}reduction = #tp.grad_reduction<sum>}
// ZERO-NEXT: tp.grad_bucket_reduce_scatter {bucket = 5 : i64, bytes = 4202692608 : i64, dtype = f32, fqns = ["model.embed_tokens.weight"], padded_bytes = 4202692608 : i64}
// ZERO-NEXT: tp.grad_bucket_reduce_scatter {bucket = 6 : i64, bytes = 512 : i64, dtype = f32, fqns = ["model.layers.0.self_attn.q_norm.weight"], padded_bytes = 1536 : i64}
// ZERO-NEXT: tp.grad_bucket_reduce_scatter {bucket = 7 : i64, bytes = 33554432 : i64, dtype = f32, fqns = ["model.layers.0.self_attn.q_proj.weight"], padded_bytes = 33555456 : i64}
// ZERO-NEXT: tp.grad_bucket_reduce_scatter {bucket = 8 : i64, bytes = 65536 : i64, {{.*}}padded_bytes = 66048 : i64}
// ZERO-NEXT: tp.grad_bucket_reduce_scatter {bucket = 9 : i64, bytes = 65536 : i64, {{.*}}padded_bytes = 66048 : i64}
// ZERO-NEXT: tp.grad_bucket_reduce_scatter {bucket = 10 : i64, bytes = 32768 : i64, dtype = bf16, fqns = ["model.layers.3.input_layernorm.weight"], padded_bytes = 33792 : i64}
// ZERO-NEXT: tp.normalize_grads
// ZERO-NEXT: %[[NORM:.*]] = tp.grad_norm {dp_sharded} : tensor<f32>
// ZERO-NEXT: tp.clip_grads %[[NORM]]
// ZERO-NEXT: tp.optimizer_update {dp_sharded, optimizer = "adamw"}
// ZERO-NEXT: tp.param_bucket_all_gather {bucket = 5 : i64, bytes = 4202692608 : i64, dtype = f32, fqns = ["model.embed_tokens.weight"]}
// ZERO-NEXT: tp.param_bucket_all_gather {bucket = 6 : i64, bytes = 1536 : i64,
// ZERO-NEXT: tp.param_bucket_all_gather {bucket = 7 : i64, bytes = 33555456 : i64,
// ZERO-NEXT: tp.param_bucket_all_gather {bucket = 8 : i64, bytes = 66048 : i64,
// ZERO-NEXT: tp.param_bucket_all_gather {bucket = 9 : i64, bytes = 66048 : i64,
// ZERO-NEXT: tp.param_bucket_all_gather {bucket = 10 : i64, bytes = 16896 : i64, dtype = bf16, fqns = ["model.layers.3.input_layernorm.weight"]}
// ZERO-NEXT: return
// With the default 256 MiB: every norm in one bucket, the embedding alone.
// DEFAULT: tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 4202692608 : i64, {{.*}}fqns = ["model.embed_tokens.weight"]
// DEFAULT-NEXT: tp.grad_bucket_all_reduce {bucket = 1 : i64, bytes = 131072 : i64, {{.*}}fqns = ["model.layers.10.input_layernorm.weight", "model.layers.2.input_layernorm.weight", "model.layers.2.post_attention_layernorm.weight", "model.norm.weight"]
// DEFAULT-NEXT: tp.grad_bucket_all_reduce {bucket = 2 : i64, {{.*}}dtype = bf16
// DEFAULT-NEXT: tp.grad_bucket_all_reduce {bucket = 3 : i64, {{.*}}reduction = #tp.grad_reduction<sum>
// DEFAULT-NEXT: tp.normalize_grads
module {
  shard.grid @tp(shape = 8)
  func.func @train_step(
      %emb: tensor<128256x8192xf32> {tp.fqn = "model.embed_tokens.weight"},
      %n10: tensor<8192xf32> {tp.fqn = "model.layers.10.input_layernorm.weight"},
      %n2: tensor<8192xf32> {tp.fqn = "model.layers.2.input_layernorm.weight"},
      %p2: tensor<8192xf32> {tp.fqn = "model.layers.2.post_attention_layernorm.weight"},
      %n3: tensor<8192xbf16> {tp.fqn = "model.layers.3.input_layernorm.weight"},
      %final: tensor<8192xf32> {tp.fqn = "model.norm.weight"},
      %qn: tensor<128xf32> {tp.fqn = "model.layers.0.self_attn.q_norm.weight"},
      %q: tensor<1024x8192xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"}) attributes {tp.entry = "train_step"} {
    tp.accumulate_grad %n2 into %n2 {fqn = "model.layers.2.input_layernorm.weight", reduction = #tp.grad_reduction<mean>} : tensor<8192xf32>
    tp.accumulate_grad %final into %final {fqn = "model.norm.weight", reduction = #tp.grad_reduction<mean>} : tensor<8192xf32>
    tp.accumulate_grad %qn into %qn {fqn = "model.layers.0.self_attn.q_norm.weight", reduction = #tp.grad_reduction<sum>} : tensor<128xf32>
    tp.accumulate_grad %q into %q {fqn = "model.layers.0.self_attn.q_proj.weight", split_dim = 0 : i64} : tensor<1024x8192xf32>
    tp.accumulate_grad %p2 into %p2 {fqn = "model.layers.2.post_attention_layernorm.weight", reduction = #tp.grad_reduction<mean>} : tensor<8192xf32>
    tp.accumulate_grad %n3 into %n3 {fqn = "model.layers.3.input_layernorm.weight", reduction = #tp.grad_reduction<mean>} : tensor<8192xbf16>
    tp.accumulate_grad %emb into %emb {fqn = "model.embed_tokens.weight", reduction = #tp.grad_reduction<mean>} : tensor<128256x8192xf32>
    tp.accumulate_grad %n10 into %n10 {fqn = "model.layers.10.input_layernorm.weight", reduction = #tp.grad_reduction<mean>} : tensor<8192xf32>
    return
  }
  func.func @optimizer_step() -> tensor<f32> attributes {tp.entry = "optimizer_step"} {
    tp.optimizer_boundary
    tp.normalize_grads
    %n = tp.grad_norm : tensor<f32>
    tp.clip_grads %n : tensor<f32>
    tp.optimizer_update {optimizer = "adamw"}
    return %n : tensor<f32>
  }
}

//--- onerank.mlir
// One rank (no @tp grid): nothing to synchronize.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: tp.optimizer_boundary
// CHECK-NEXT: tp.normalize_grads
// LIMIT: error: tp-replica-grad-sync: bucket-mib must be positive, got 0
// One rank per tensor-parallel group, two groups: every gradient over dp.
// DP1: shard.grid @dp(shape = 2)
// DP1: tp.optimizer_boundary
// DP1-NEXT: tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 32 : i64, dtype = f32, fqns = ["w"], group = "dp", reduction = #tp.grad_reduction<sum>}
// DP0: error: tp-replica-grad-sync: dp must be at least 1, got 0
// ZERODP: error: tp-replica-grad-sync: zero must be 0, or 1 or 2 with dp of 2 or more; got zero 1 at dp 1
module {
  func.func @train_step(%w: tensor<8xf32> {tp.fqn = "w"}) attributes {tp.entry = "train_step"} {
    tp.accumulate_grad %w into %w {fqn = "w"} : tensor<8xf32>
    return
  }
  func.func @optimizer_step() -> tensor<f32> attributes {tp.entry = "optimizer_step"} {
    tp.optimizer_boundary
    tp.normalize_grads
    %n = tp.grad_norm : tensor<f32>
    return %n : tensor<f32>
  }
}

//--- errors.mlir
// expected-error @+1 {{tp-replica-grad-sync: no optimizer step (run tp-build-train-step)}}
module {
  shard.grid @tp(shape = 2)
  func.func @train_step(%w: tensor<8xf32> {tp.fqn = "w"}) attributes {tp.entry = "train_step"} {
    return
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @train_step(%w: tensor<8xf32> {tp.fqn = "w"}) attributes {tp.entry = "train_step"} {
    return
  }
  // expected-error @+1 {{tp-replica-grad-sync: the optimizer step must have exactly one tp.optimizer_boundary}}
  func.func @optimizer_step() -> tensor<f32> attributes {tp.entry = "optimizer_step"} {
    %n = tp.grad_norm : tensor<f32>
    return %n : tensor<f32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @train_step(%w: tensor<8xf32> {tp.fqn = "w"}) attributes {tp.entry = "train_step"} {
    return
  }
  // expected-error @+1 {{tp-replica-grad-sync: the gradients are already bucketed}}
  func.func @optimizer_step() -> tensor<f32> attributes {tp.entry = "optimizer_step"} {
    tp.optimizer_boundary
    tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 32 : i64, dtype = f32, fqns = ["w"], reduction = #tp.grad_reduction<mean>}
    %n = tp.grad_norm : tensor<f32>
    return %n : tensor<f32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @train_step(%w: tensor<8xf32> {tp.fqn = "w"}) attributes {tp.entry = "train_step"} {
    // expected-error @+1 {{tp-replica-grad-sync: the replicated parameter 'w' has no replica class (run tp-partition)}}
    tp.accumulate_grad %w into %w {fqn = "w"} : tensor<8xf32>
    return
  }
  func.func @optimizer_step() -> tensor<f32> attributes {tp.entry = "optimizer_step"} {
    tp.optimizer_boundary
    %n = tp.grad_norm : tensor<f32>
    return %n : tensor<f32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @train_step(%dy: tensor<?x?x8xf32>, %x: tensor<?x?x4xf32>, %w: tensor<8x4xf32> {tp.fqn = "w"}) attributes {tp.entry = "train_step"} {
    // expected-error @+1 {{tp-replica-grad-sync: run before tp-fuse-grad-accumulation, which fused the gradient of 'w'}}
    tp.accumulate_linear_grad_weight %dy, %x into %w {fqn = "w", split_dim = 0 : i64} : tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<8x4xf32>
    return
  }
  func.func @optimizer_step() -> tensor<f32> attributes {tp.entry = "optimizer_step"} {
    tp.optimizer_boundary
    %n = tp.grad_norm : tensor<f32>
    return %n : tensor<f32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @train_step(%ids: tensor<?x?xi64>, %dy: tensor<?x?x4xf32>, %e: tensor<8x4xf32> {tp.fqn = "e"}) attributes {tp.entry = "train_step"} {
    // expected-error @+1 {{tp-replica-grad-sync: run before tp-fuse-grad-accumulation, which fused the gradient of 'e'}}
    tp.accumulate_embedding_grad %ids, %dy into %e {fqn = "e", split_dim = 0 : i64} : tensor<?x?xi64>, tensor<?x?x4xf32>, tensor<8x4xf32>
    return
  }
  func.func @optimizer_step() -> tensor<f32> attributes {tp.entry = "optimizer_step"} {
    tp.optimizer_boundary
    %n = tp.grad_norm : tensor<f32>
    return %n : tensor<f32>
  }
}

//--- zero-errors.mlir
module {
  func.func @train_step(%w: tensor<8xf32> {tp.fqn = "w"}) attributes {tp.entry = "train_step"} {
    tp.accumulate_grad %w into %w {fqn = "w"} : tensor<8xf32>
    return
  }
  // expected-error @+1 {{tp-replica-grad-sync: zero needs exactly one tp.grad_norm and one tp.optimizer_update in the optimizer step}}
  func.func @optimizer_step() -> tensor<f32> attributes {tp.entry = "optimizer_step"} {
    tp.optimizer_boundary
    tp.normalize_grads
    %n = tp.grad_norm : tensor<f32>
    return %n : tensor<f32>
  }
}

//--- layers.mlir
// ZeRO stage 2 (zero=2): one data-parallel bucket per decoder layer
// (tp.layer of the accumulations) and one for the gradients outside the
// layers, each reduce-scattered {micro_batch} in the training step right
// after the last accumulation of its gradients (the backward runs layer 1,
// then layer 0; the embedding's gradient comes last); the replica bucket
// over tp stays at the boundary, and the parameters are all-gathered after
// the update as in stage 1.
// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: tp.accumulate_grad {{.*}}fqn = "lm_head.weight"
// CHECK-NEXT: tp.accumulate_grad {{.*}}fqn = "model.layers.1.self_attn.q_proj.weight"
// CHECK-NEXT: tp.accumulate_grad {{.*}}fqn = "model.layers.1.input_layernorm.weight"
// CHECK-NEXT: tp.grad_bucket_reduce_scatter {bucket = 3 : i64, bytes = 320 : i64, dtype = f32, fqns = ["model.layers.1.input_layernorm.weight", "model.layers.1.self_attn.q_proj.weight"], micro_batch, padded_bytes = 512 : i64, tp.layer = 1 : i64}
// CHECK-NEXT: tp.rms_norm
// CHECK-NEXT: tp.accumulate_grad {{.*}}fqn = "model.layers.0.input_layernorm.weight"
// CHECK-NEXT: tp.accumulate_grad {{.*}}fqn = "model.layers.0.self_attn.q_proj.weight"
// CHECK-NEXT: tp.grad_bucket_reduce_scatter {bucket = 2 : i64, {{.*}}fqns = ["model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_proj.weight"], micro_batch, {{.*}}tp.layer = 0 : i64}
// CHECK-NEXT: tp.accumulate_grad {{.*}}fqn = "model.embed_tokens.weight"
// CHECK-NEXT: tp.grad_bucket_reduce_scatter {bucket = 1 : i64, bytes = 8192 : i64, dtype = f32, fqns = ["lm_head.weight", "model.embed_tokens.weight"], micro_batch, padded_bytes = 8192 : i64}
// CHECK-NEXT: return
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: tp.optimizer_boundary
// CHECK-NEXT: tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 128 : i64, {{.*}}reduction = #tp.grad_reduction<mean>}
// CHECK-NEXT: tp.normalize_grads
// CHECK-NEXT: tp.grad_norm {dp_sharded}
// CHECK-NEXT: tp.clip_grads
// CHECK-NEXT: tp.optimizer_update {dp_sharded, optimizer = "adamw"}
// CHECK-NEXT: tp.param_bucket_all_gather {bucket = 1 : i64
// CHECK-NEXT: tp.param_bucket_all_gather {bucket = 2 : i64
// CHECK-NEXT: tp.param_bucket_all_gather {bucket = 3 : i64
// CHECK-NEXT: return
// Stage 1: one bucket of everything, at the boundary.
// STAGE1-LABEL: func.func @train_step
// STAGE1-NOT: tp.grad_bucket_reduce_scatter
// STAGE1-LABEL: func.func @optimizer_step
// STAGE1: tp.grad_bucket_reduce_scatter {bucket = 1 : i64, bytes = 8832 : i64
// STAGE1-NOT: micro_batch
// STAGE3: error: tp-replica-grad-sync: zero must be 0, or 1 or 2 with dp of 2 or more; got zero 3 at dp 2
module {
  shard.grid @tp(shape = 2)
  func.func @train_step(
      %head: tensor<64x16xf32> {tp.fqn = "lm_head.weight"},
      %q1: tensor<4x16xf32> {tp.fqn = "model.layers.1.self_attn.q_proj.weight"},
      %n1: tensor<16xf32> {tp.fqn = "model.layers.1.input_layernorm.weight"},
      %q0: tensor<4x16xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"},
      %n0: tensor<16xf32> {tp.fqn = "model.layers.0.input_layernorm.weight"},
      %emb: tensor<64x16xf32> {tp.fqn = "model.embed_tokens.weight"},
      %x: tensor<2x3x16xf32>) attributes {tp.entry = "train_step"} {
    tp.accumulate_grad %head into %head {fqn = "lm_head.weight", split_dim = 0 : i64} : tensor<64x16xf32>
    tp.accumulate_grad %q1 into %q1 {fqn = "model.layers.1.self_attn.q_proj.weight", split_dim = 0 : i64, tp.layer = 1 : i64} : tensor<4x16xf32>
    tp.accumulate_grad %n1 into %n1 {fqn = "model.layers.1.input_layernorm.weight", reduction = #tp.grad_reduction<mean>, tp.layer = 1 : i64} : tensor<16xf32>
    %y = tp.rms_norm %x, %n0 {epsilon = 1.0e-06 : f64, tp.layer = 0 : i64} : (tensor<2x3x16xf32>, tensor<16xf32>) -> tensor<2x3x16xf32>
    tp.accumulate_grad %n0 into %n0 {fqn = "model.layers.0.input_layernorm.weight", reduction = #tp.grad_reduction<mean>, tp.layer = 0 : i64} : tensor<16xf32>
    tp.accumulate_grad %q0 into %q0 {fqn = "model.layers.0.self_attn.q_proj.weight", split_dim = 0 : i64, tp.layer = 0 : i64} : tensor<4x16xf32>
    tp.accumulate_grad %emb into %emb {fqn = "model.embed_tokens.weight", split_dim = 0 : i64} : tensor<64x16xf32>
    return
  }
  func.func @optimizer_step() -> tensor<f32> attributes {tp.entry = "optimizer_step"} {
    tp.optimizer_boundary
    tp.normalize_grads
    %n = tp.grad_norm : tensor<f32>
    tp.clip_grads %n : tensor<f32>
    tp.optimizer_update {optimizer = "adamw"}
    return %n : tensor<f32>
  }
}
