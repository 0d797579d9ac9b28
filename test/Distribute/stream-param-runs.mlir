// RUN: split-file %s %t
// RUN: tp-opt %t/tied.mlir --tp-stream-param-runs=block-mib=0.0001 | FileCheck %t/tied.mlir
// RUN: tp-opt %t/untied.mlir --tp-stream-param-runs | FileCheck %t/untied.mlir
// RUN: tp-opt %t/mixed.mlir --tp-stream-param-runs | FileCheck %t/mixed.mlir
// RUN: tp-opt %t/errors.mlir --split-input-file --tp-stream-param-runs --verify-diagnostics
// RUN: not tp-opt %t/tied.mlir --tp-stream-param-runs=block-mib=0 2>&1 | FileCheck %t/errors.mlir --check-prefix=BLOCK

//--- tied.mlir
// A tied table alone in its bucket: the lookup, the loss and the
// embedding gradient read it from the runs (the step's argument), in
// blocks of 6 rows (0.0001 MiB of rows of 4 f32), and its gather goes; the
// bucket's reduce-scatter is marked streamed. A bucket of two parameters
// and a bf16 bucket stay gathered.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<?x?xi64>, %[[MASK:[a-z0-9]+]]: tensor<?x?xi64>, %[[EMB:[a-z0-9]+]]: tensor<8x4xf32>
// CHECK-NEXT: %[[H:.*]] = tp.embedding %[[IDS]], %[[EMB]] {block_rows = 6 : i64, runs_bucket = 0 : i64}
// CHECK-NEXT: %[[PAIR:.*]]:2 = tp.param_bucket_gather {bucket = 1 : i64
// CHECK-NEXT: %[[B16:.*]] = tp.param_bucket_gather {bucket = 2 : i64
// CHECK-NEXT: %{{.*}}, %[[DX:.*]] = tp.accumulate_linear_cross_entropy %[[H]], %[[IDS]], %[[MASK]] into %[[EMB]] {block_rows = 6 : i64, fqn = "model.embed_tokens.weight", runs_bucket = 0 : i64}
// CHECK-NEXT: tp.accumulate_grad %{{.*}} into %[[PAIR]]#0
// CHECK-NEXT: tp.accumulate_grad %{{.*}} into %[[B16]]
// CHECK-NEXT: tp.accumulate_embedding_grad %[[IDS]], %[[DX]] into %[[EMB]] {block_rows = 6 : i64, fqn = "model.embed_tokens.weight", padding_idx = 0 : i64, runs_bucket = 0 : i64}
// CHECK-NEXT: tp.grad_bucket_reduce_scatter {bucket = 0 : i64, {{.*}}micro_batch, padded_bytes = 128 : i64, streamed}
// CHECK-NEXT: tp.grad_bucket_reduce_scatter {bucket = 1 : i64, {{.*}}micro_batch, padded_bytes = 128 : i64}
// CHECK-NEXT: tp.grad_bucket_reduce_scatter {bucket = 2 : i64, {{.*}}micro_batch, padded_bytes = 128 : i64}
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>,
      %emb: tensor<8x4xf32> {tp.fqn = "model.embed_tokens.weight"},
      %a: tensor<4xf32> {tp.fqn = "a"}, %b: tensor<4xf32> {tp.fqn = "b"},
      %c: tensor<4xbf16> {tp.fqn = "c"}, %g: tensor<4xf32>,
      %g16: tensor<4xbf16>) -> tensor<f32> attributes {tp.entry = "train_step"} {
    %t = tp.param_bucket_gather {bucket = 0 : i64, bytes = 128 : i64, dtype = f32, fqns = ["model.embed_tokens.weight"]} : tensor<8x4xf32>
    %h = tp.embedding %ids, %t : (tensor<?x?xi64>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
    %pair:2 = tp.param_bucket_gather {bucket = 1 : i64, bytes = 128 : i64, dtype = f32, fqns = ["a", "b"]} : tensor<4xf32>, tensor<4xf32>
    %w16 = tp.param_bucket_gather {bucket = 2 : i64, bytes = 64 : i64, dtype = bf16, fqns = ["c"]} : tensor<4xbf16>
    %loss, %dx = tp.accumulate_linear_cross_entropy %h, %ids, %mask into %t {fqn = "model.embed_tokens.weight"} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<?x?xi64>, tensor<8x4xf32>) -> (tensor<f32>, tensor<?x?x4xf32>)
    tp.accumulate_grad %g into %pair#0 {fqn = "a"} : tensor<4xf32>
    tp.accumulate_grad %g16 into %w16 {fqn = "c"} : tensor<4xbf16>
    tp.accumulate_embedding_grad %ids, %dx into %t {fqn = "model.embed_tokens.weight", padding_idx = 0 : i64} : tensor<?x?xi64>, tensor<?x?x4xf32>, tensor<8x4xf32>
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 128 : i64, dtype = f32, fqns = ["model.embed_tokens.weight"], micro_batch, padded_bytes = 128 : i64}
    tp.grad_bucket_reduce_scatter {bucket = 1 : i64, bytes = 32 : i64, dtype = f32, fqns = ["a", "b"], micro_batch, padded_bytes = 128 : i64}
    tp.grad_bucket_reduce_scatter {bucket = 2 : i64, bytes = 16 : i64, dtype = bf16, fqns = ["c"], micro_batch, padded_bytes = 128 : i64}
    return %loss : tensor<f32>
  }
}

//--- untied.mlir
// An output projection alone in its bucket, read only by the loss: its
// gather goes (the default blocks: 8 MiB of rows, more than the table).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[HEAD:[a-z0-9]+]]: tensor<8x4xf32>
// CHECK-NOT: tp.param_bucket_gather
// CHECK: tp.accumulate_linear_cross_entropy %{{.*}} into %[[HEAD]] {block_rows = 524288 : i64, fqn = "lm_head.weight", runs_bucket = 3 : i64}
// CHECK-NEXT: tp.grad_bucket_reduce_scatter {bucket = 3 : i64, {{.*}}streamed}
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%h: tensor<?x?x4xf32>, %ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>,
      %head: tensor<8x4xf32> {tp.fqn = "lm_head.weight"}) -> tensor<f32> attributes {tp.entry = "train_step"} {
    %w = tp.param_bucket_gather {bucket = 3 : i64, bytes = 128 : i64, dtype = f32, fqns = ["lm_head.weight"]} : tensor<8x4xf32>
    %loss, %dx = tp.accumulate_linear_cross_entropy %h, %ids, %mask into %w {fqn = "lm_head.weight"} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<?x?xi64>, tensor<8x4xf32>) -> (tensor<f32>, tensor<?x?x4xf32>)
    tp.grad_bucket_reduce_scatter {bucket = 3 : i64, bytes = 128 : i64, dtype = f32, fqns = ["lm_head.weight"], micro_batch, padded_bytes = 128 : i64}
    return %loss : tensor<f32>
  }
}

//--- mixed.mlir
// A table whose gradient also comes whole (a head not fused with its
// loss adds its weight gradient into the buffer) is left gathered.
// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[T:.*]] = tp.param_bucket_gather {bucket = 0 : i64
// CHECK-NEXT: tp.accumulate_linear_grad_weight %{{.*}}, %{{.*}} into %[[T]]
// CHECK-NEXT: tp.accumulate_embedding_grad %{{.*}}, %{{.*}} into %[[T]] {fqn = "model.embed_tokens.weight"} :
// CHECK-NEXT: tp.grad_bucket_reduce_scatter {bucket = 0 : i64, {{.*}}micro_batch, padded_bytes = 128 : i64}
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%ids: tensor<?x?xi64>, %dl: tensor<?x?x8xf32>, %h: tensor<?x?x4xf32>,
      %emb: tensor<8x4xf32> {tp.fqn = "model.embed_tokens.weight"}) attributes {tp.entry = "train_step"} {
    %t = tp.param_bucket_gather {bucket = 0 : i64, bytes = 128 : i64, dtype = f32, fqns = ["model.embed_tokens.weight"]} : tensor<8x4xf32>
    tp.accumulate_linear_grad_weight %dl, %h into %t {fqn = "model.embed_tokens.weight"} : tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<8x4xf32>
    tp.accumulate_embedding_grad %ids, %h into %t {fqn = "model.embed_tokens.weight"} : tensor<?x?xi64>, tensor<?x?x4xf32>, tensor<8x4xf32>
    tp.grad_bucket_reduce_scatter {bucket = 0 : i64, bytes = 128 : i64, dtype = f32, fqns = ["model.embed_tokens.weight"], micro_batch, padded_bytes = 128 : i64}
    return
  }
}

//--- errors.mlir
// BLOCK: error: tp-stream-param-runs: block-mib must be positive, got 0

// expected-error @below {{tp-stream-param-runs: no training step (run tp-build-train-step)}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {tp.entry = "forward"} {
    return %x : tensor<4xf32>
  }
}
