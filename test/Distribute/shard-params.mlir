// RUN: split-file %s %t
// RUN: tp-opt %t/step.mlir --tp-shard-params | FileCheck %t/step.mlir
// RUN: tp-opt %t/two-buckets.mlir --tp-shard-params | FileCheck %t/two-buckets.mlir
// RUN: tp-opt %t/errors.mlir --split-input-file --tp-shard-params --verify-diagnostics

//--- step.mlir
// ZeRO stage 3 on a stage-2 program (one bucket per layer, one outside the
// layers): the training step reads each parameter through a gather of its
// bucket. The bucket outside the layers is gathered once, first, for every
// read (the embedding, the head, their gradients); each layer's twice,
// for its forward and for its backward reads, the next layer's gather
// issued right after the current layer's first op (layer 0's after the
// embedding, layer 1's after layer 0's linear; in the backward, layer 0's
// after layer 1's first op). The gradient
// sinks take the gathered values too (their shapes): nothing reads an
// argument any more. The init keeps each bucket's runs after the last
// broadcast of one of its parameters; the optimizer step gathers nothing.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<?x?xi64>, %{{.*}}: tensor<?x?xi64>, %[[EMB:[a-z0-9]+]]: tensor<8x4xf32> {{.*}}, %[[W0:[a-z0-9]+]]: tensor<4x4xf32> {{.*}}, %[[W1:[a-z0-9]+]]: tensor<4x4xf32> {{.*}}, %[[HEAD:[a-z0-9]+]]: tensor<8x4xf32>
// CHECK-NEXT: %[[ROOT:.*]]:2 = tp.param_bucket_gather {bucket = 0 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["lm_head.weight", "model.embed_tokens.weight"]} : tensor<8x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[H:.*]] = tp.embedding %[[IDS]], %[[ROOT]]#1
// CHECK-NEXT: %[[F0:.*]] = tp.param_bucket_gather {bucket = 1 : i64, {{.*}}fqns = ["model.layers.0.mlp.weight"], tp.layer = 0 : i64} : tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = tp.linear %[[H]], %[[F0]] {tp.layer = 0 : i64}
// CHECK-NEXT: %[[F1:.*]] = tp.param_bucket_gather {bucket = 2 : i64, {{.*}}tp.layer = 1 : i64} : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = tp.linear %[[A]], %[[F1]] {tp.layer = 1 : i64}
// CHECK-NEXT: tp.linear %[[B]], %[[ROOT]]#0 :
// CHECK: tp.cross_entropy_grad
// CHECK-NEXT: tp.linear_grad_input %{{.*}}, %[[ROOT]]#0 :
// CHECK-NEXT: %[[B1:.*]] = tp.param_bucket_gather {bucket = 2 : i64, {{.*}}tp.layer = 1 : i64} : tensor<4x4xf32>
// CHECK-NEXT: tp.linear_grad_input %{{.*}}, %[[B1]] {tp.layer = 1 : i64}
// CHECK-NEXT: %[[B0:.*]] = tp.param_bucket_gather {bucket = 1 : i64, {{.*}}tp.layer = 0 : i64} : tensor<4x4xf32>
// CHECK-NEXT: tp.linear_grad_weight
// CHECK-NEXT: tp.accumulate_grad %{{.*}} into %[[B1]] {fqn = "model.layers.1.mlp.weight"
// CHECK-NEXT: tp.grad_bucket_reduce_scatter {bucket = 2 : i64
// CHECK-NEXT: tp.linear_grad_input %{{.*}}, %[[B0]] {tp.layer = 0 : i64}
// CHECK-NEXT: tp.linear_grad_weight
// CHECK-NEXT: tp.accumulate_grad %{{.*}} into %[[B0]] {fqn = "model.layers.0.mlp.weight"
// CHECK: tp.embedding_grad %[[IDS]], %{{.*}}, %[[ROOT]]#1
// CHECK-NEXT: tp.accumulate_grad %{{.*}} into %[[ROOT]]#1
// CHECK: tp.accumulate_grad %{{.*}} into %[[ROOT]]#0
// CHECK-NOT: %[[EMB]]
// CHECK-NOT: %[[W0]]
// CHECK-NOT: %[[W1]]
// CHECK-NOT: %[[HEAD]]
// CHECK-LABEL: func.func @optimizer_step
// CHECK-NEXT: tp.optimizer_boundary
// CHECK-NEXT: tp.grad_norm {dp_sharded}
// CHECK-NEXT: tp.optimizer_update {dp_sharded, optimizer = "adamw"}
// CHECK-NEXT: return
// CHECK-LABEL: func.func @init
// CHECK-NEXT: tp.broadcast_replica {{.*}}fqn = "model.embed_tokens.weight"
// CHECK-NEXT: tp.broadcast_replica {{.*}}fqn = "model.layers.0.mlp.weight"
// CHECK-NEXT: tp.param_bucket_shard {bucket = 1 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["model.layers.0.mlp.weight"], tp.layer = 0 : i64}
// CHECK-NEXT: tp.broadcast_replica {{.*}}fqn = "lm_head.weight"
// CHECK-NEXT: tp.param_bucket_shard {bucket = 0 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["lm_head.weight", "model.embed_tokens.weight"]}
// CHECK-NEXT: tp.broadcast_replica {{.*}}fqn = "model.layers.1.mlp.weight"
// CHECK-NEXT: tp.param_bucket_shard {bucket = 2 : i64, {{.*}}tp.layer = 1 : i64}
// CHECK-NEXT: return
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>,
      %emb: tensor<8x4xf32> {tp.fqn = "model.embed_tokens.weight"},
      %w0: tensor<4x4xf32> {tp.fqn = "model.layers.0.mlp.weight"},
      %w1: tensor<4x4xf32> {tp.fqn = "model.layers.1.mlp.weight"},
      %head: tensor<8x4xf32> {tp.fqn = "lm_head.weight"}) -> tensor<f32> attributes {tp.entry = "train_step"} {
    %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
    %a = tp.linear %h, %w0 {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %b = tp.linear %a, %w1 {tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %logits = tp.linear %b, %head : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %loss, %lse = tp.cross_entropy %logits, %ids, %mask : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<?x?xi64>) -> (tensor<f32>, tensor<?x?xf32>)
    %dl = tp.cross_entropy_grad %logits, %ids, %mask, %lse : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<?x?xi64>, tensor<?x?xf32>) -> tensor<?x?x8xf32>
    %db = tp.linear_grad_input %dl, %head : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
    %da = tp.linear_grad_input %db, %w1 {tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %g1 = tp.linear_grad_weight %db, %a {tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<4x4xf32>
    tp.accumulate_grad %g1 into %w1 {fqn = "model.layers.1.mlp.weight", tp.layer = 1 : i64} : tensor<4x4xf32>
    tp.grad_bucket_reduce_scatter {bucket = 2 : i64, bytes = 64 : i64, dtype = f32, fqns = ["model.layers.1.mlp.weight"], micro_batch, padded_bytes = 1024 : i64, tp.layer = 1 : i64}
    %dh = tp.linear_grad_input %da, %w0 {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    %g0 = tp.linear_grad_weight %da, %h {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<4x4xf32>
    tp.accumulate_grad %g0 into %w0 {fqn = "model.layers.0.mlp.weight", tp.layer = 0 : i64} : tensor<4x4xf32>
    tp.grad_bucket_reduce_scatter {bucket = 1 : i64, bytes = 64 : i64, dtype = f32, fqns = ["model.layers.0.mlp.weight"], micro_batch, padded_bytes = 1024 : i64, tp.layer = 0 : i64}
    %ge = tp.embedding_grad %ids, %dh, %emb : (tensor<?x?xi64>, tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    tp.accumulate_grad %ge into %emb {fqn = "model.embed_tokens.weight"} : tensor<8x4xf32>
    %gh = tp.linear_grad_weight %dl, %b : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
    tp.accumulate_grad %gh into %head {fqn = "lm_head.weight"} : tensor<8x4xf32>
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 256 : i64, dtype = f32, fqns = ["lm_head.weight", "model.embed_tokens.weight"], micro_batch, padded_bytes = 1024 : i64}
    return %loss : tensor<f32>
  }
  func.func @optimizer_step() -> tensor<f32> attributes {tp.entry = "optimizer_step"} {
    tp.optimizer_boundary
    %norm = tp.grad_norm {dp_sharded} : tensor<f32>
    tp.optimizer_update {dp_sharded, optimizer = "adamw"}
    tp.param_bucket_all_gather {bucket = 0 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["lm_head.weight", "model.embed_tokens.weight"]}
    tp.param_bucket_all_gather {bucket = 1 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["model.layers.0.mlp.weight"]}
    tp.param_bucket_all_gather {bucket = 2 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["model.layers.1.mlp.weight"]}
    return %norm : tensor<f32>
  }
  func.func @init(%emb: tensor<8x4xf32> {tp.fqn = "model.embed_tokens.weight"},
      %w0: tensor<4x4xf32> {tp.fqn = "model.layers.0.mlp.weight"},
      %head: tensor<8x4xf32> {tp.fqn = "lm_head.weight"},
      %w1: tensor<4x4xf32> {tp.fqn = "model.layers.1.mlp.weight"}) attributes {tp.entry = "init"} {
    tp.broadcast_replica %emb {fqn = "model.embed_tokens.weight", group = "dp"} : tensor<8x4xf32>
    tp.broadcast_replica %w0 {fqn = "model.layers.0.mlp.weight", group = "dp"} : tensor<4x4xf32>
    tp.broadcast_replica %head {fqn = "lm_head.weight", group = "dp"} : tensor<8x4xf32>
    tp.broadcast_replica %w1 {fqn = "model.layers.1.mlp.weight", group = "dp"} : tensor<4x4xf32>
    return
  }
}

//--- two-buckets.mlir
// A layer larger than --bucket-mib is two buckets: each is gathered on its
// own, before its first reader, the second right after the first's first
// reader (the prefetch order within the layer too), for the forward and
// again for the backward.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[A:.*]] = tp.param_bucket_gather {bucket = 4 : i64, {{.*}}fqns = ["model.layers.3.a.weight"], tp.layer = 3 : i64}
// CHECK-NEXT: %[[X:.*]] = tp.linear %{{.*}}, %[[A]] {tp.layer = 3 : i64}
// CHECK-NEXT: %[[B:.*]] = tp.param_bucket_gather {bucket = 5 : i64, {{.*}}fqns = ["model.layers.3.b.weight"], tp.layer = 3 : i64}
// CHECK-NEXT: tp.linear %[[X]], %[[B]] {tp.layer = 3 : i64}
// CHECK: tp.cross_entropy
// CHECK-NEXT: %[[B2:.*]] = tp.param_bucket_gather {bucket = 5 : i64, {{.*}}tp.layer = 3 : i64}
// CHECK-NEXT: tp.linear_grad_input %{{.*}}, %[[B2]] {tp.layer = 3 : i64}
// CHECK-NEXT: %[[A2:.*]] = tp.param_bucket_gather {bucket = 4 : i64, {{.*}}tp.layer = 3 : i64}
// CHECK-NEXT: tp.linear_grad_input %{{.*}}, %[[A2]] {tp.layer = 3 : i64}
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>, %h: tensor<2x3x4xf32>, %logits: tensor<?x?x8xf32>, %dy: tensor<2x3x4xf32>,
      %a: tensor<4x4xf32> {tp.fqn = "model.layers.3.a.weight"},
      %b: tensor<4x4xf32> {tp.fqn = "model.layers.3.b.weight"}) attributes {tp.entry = "train_step"} {
    %x = tp.linear %h, %a {tp.layer = 3 : i64} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
    %y = tp.linear %x, %b {tp.layer = 3 : i64} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
    %loss, %lse = tp.cross_entropy %logits, %ids, %mask : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<?x?xi64>) -> (tensor<f32>, tensor<?x?xf32>)
    %dx = tp.linear_grad_input %dy, %b {tp.layer = 3 : i64} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
    %dh = tp.linear_grad_input %dx, %a {tp.layer = 3 : i64} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
    tp.grad_bucket_reduce_scatter {bucket = 4 : i64, bytes = 64 : i64, dtype = f32, fqns = ["model.layers.3.a.weight"], micro_batch, padded_bytes = 1024 : i64, tp.layer = 3 : i64}
    tp.grad_bucket_reduce_scatter {bucket = 5 : i64, bytes = 64 : i64, dtype = f32, fqns = ["model.layers.3.b.weight"], micro_batch, padded_bytes = 1024 : i64, tp.layer = 3 : i64}
    return
  }
  func.func @init(%a: tensor<4x4xf32> {tp.fqn = "model.layers.3.a.weight"}, %b: tensor<4x4xf32> {tp.fqn = "model.layers.3.b.weight"}) attributes {tp.entry = "init"} {
    tp.broadcast_replica %a {fqn = "model.layers.3.a.weight", group = "dp"} : tensor<4x4xf32>
    tp.broadcast_replica %b {fqn = "model.layers.3.b.weight", group = "dp"} : tensor<4x4xf32>
    return
  }
}

//--- errors.mlir
module {
  shard.grid @dp(shape = 2)
  // expected-error @+1 {{tp-shard-params: no bucket is reduced per micro-batch (run tp-replica-grad-sync with zero=2)}}
  func.func @train_step(%w: tensor<4x4xf32> {tp.fqn = "w"}) attributes {tp.entry = "train_step"} {
    return
  }
}

// -----

module {
  shard.grid @dp(shape = 2)
  // expected-error @+1 {{tp-shard-params: the training step must have exactly one tp.cross_entropy (the forward's end)}}
  func.func @train_step(%w: tensor<4x4xf32> {tp.fqn = "w"}) attributes {tp.entry = "train_step"} {
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 64 : i64, dtype = f32, fqns = ["w"], micro_batch, padded_bytes = 1024 : i64}
    return
  }
}

// -----

// The init must read every parameter it shards.
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>, %logits: tensor<?x?x8xf32>,
      %a: tensor<4x4xf32> {tp.fqn = "model.layers.3.a.weight"}) attributes {tp.entry = "train_step"} {
    %loss, %lse = tp.cross_entropy %logits, %ids, %mask : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<?x?xi64>) -> (tensor<f32>, tensor<?x?xf32>)
    // expected-error @+1 {{tp-shard-params: parameter 'model.layers.3.a.weight' is not read by the init, which shards it}}
    tp.grad_bucket_reduce_scatter {bucket = 4 : i64, bytes = 64 : i64, dtype = f32, fqns = ["model.layers.3.a.weight"], micro_batch, padded_bytes = 1024 : i64, tp.layer = 3 : i64}
    return
  }
  func.func @init(%a: tensor<4x4xf32> {tp.fqn = "model.layers.3.a.weight"}) attributes {tp.entry = "init"} {
    return
  }
}

// -----

// expected-error @below {{tp-shard-params: no init (run tp-broadcast-replicas)}}
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>, %logits: tensor<?x?x8xf32>,
      %a: tensor<4x4xf32> {tp.fqn = "model.layers.3.a.weight"}) attributes {tp.entry = "train_step"} {
    %loss, %lse = tp.cross_entropy %logits, %ids, %mask : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<?x?xi64>) -> (tensor<f32>, tensor<?x?xf32>)
    tp.grad_bucket_reduce_scatter {bucket = 4 : i64, bytes = 64 : i64, dtype = f32, fqns = ["model.layers.3.a.weight"], micro_batch, padded_bytes = 1024 : i64, tp.layer = 3 : i64}
    return
  }
}
