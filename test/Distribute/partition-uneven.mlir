// RUN: split-file %s %t
// RUN: tp-opt %t/block.mlir "--tp-apply-plan=plan=llama tp=4 allow-uneven=true" --tp-partition 2>/dev/null | FileCheck %t/block.mlir
// RUN: tp-opt %t/block.mlir "--tp-apply-plan=plan=llama tp=4 allow-uneven=true" --tp-partition --tp-to-emitc 2>/dev/null | FileCheck %t/block.mlir --check-prefix=EMITC
// RUN: tp-opt %t/train.mlir --tp-partition 2>/dev/null | FileCheck %t/train.mlir
// RUN: tp-opt %t/errors.mlir --split-input-file --tp-partition --verify-diagnostics

//--- block.mlir
// 6 query heads over 2 KV heads (head_dim 4) and a vocabulary of 7 on 4
// ranks: each argument becomes its largest range, the attention this
// rank's padded heads (2 query heads, 1 KV head), the lookup takes the
// ranks' vocabulary rows, and the logits are gathered without padding.
// CHECK: func.func @forward(%arg0: tensor<?x?xi64> {onnx.name = "input_ids"}
// CHECK-SAME: %arg1: tensor<2x24xf32> {tp.fqn = "model.embed_tokens.weight", tp.placement = #tp.placement<split(0), blocks = 4, starts = [0, 2, 4, 6], sizes = [2, 2, 2, 1], key = "model.embed_tokens">
// CHECK-SAME: %arg2: tensor<8x24xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight", tp.placement = #tp.placement<split(0), blocks = 4, starts = [0, 8, 12, 20], sizes = [8, 4, 8, 4]
// CHECK-SAME: %arg3: tensor<4x24xf32> {tp.fqn = "model.layers.0.self_attn.k_proj.weight", tp.placement = #tp.placement<split(0), blocks = 4, starts = [0, 0, 4, 4], sizes = [4, 4, 4, 4]
// CHECK-SAME: %arg4: tensor<4x24xf32>
// CHECK-SAME: %arg5: tensor<24x8xf32> {tp.fqn = "model.layers.0.self_attn.o_proj.weight", tp.placement = #tp.placement<split(1), blocks = 4, starts = [0, 8, 12, 20], sizes = [8, 4, 8, 4]
// CHECK-SAME: %arg6: tensor<2x24xf32>
// CHECK-SAME: -> tensor<?x?x7xf32>
// CHECK: %[[E:.*]] = tp.embedding %arg0, %arg1 {vocab_parallel, vocab_sizes = array<i64: 2, 2, 2, 1>, vocab_starts = array<i64: 0, 2, 4, 6>} : (tensor<?x?xi64>, tensor<2x24xf32>) -> tensor<?x?x24xf32>
// CHECK-NEXT: %[[H:.*]] = shard.all_reduce %[[E]]
// CHECK-NEXT: %[[Q:.*]] = tp.linear %[[H]], %arg2 : (tensor<?x?x24xf32>, tensor<8x24xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[K:.*]] = tp.linear %[[H]], %arg3 : (tensor<?x?x24xf32>, tensor<4x24xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT: %[[V:.*]] = tp.linear %[[H]], %arg4
// CHECK-NEXT: %[[A:.*]] = tp.attention %[[Q]], %[[K]], %[[V]] {causal, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 1 : i64
// CHECK-NEXT: %[[O:.*]] = tp.linear %[[A]], %arg5 : (tensor<?x?x8xf32>, tensor<24x8xf32>) -> tensor<?x?x24xf32>
// CHECK-NEXT: %[[S:.*]] = shard.all_reduce %[[O]]
// CHECK-NEXT: %[[L:.*]] = tp.linear %[[S]], %arg6 : (tensor<?x?x24xf32>, tensor<2x24xf32>) -> tensor<?x?x2xf32>
// CHECK-NEXT: %[[G:.*]] = tp.all_gather_uneven %[[L]] on @tp grid_axes = [0] gather_axis = 2 sizes = [2, 2, 2, 1] : tensor<?x?x2xf32> -> tensor<?x?x7xf32>
// CHECK-NEXT: return %[[G]]
// EMITC: call_opaque "tprt::load_param"(%arg0) {args = [0 : index, #emitc.opaque<"\22model.embed_tokens.weight\22">, {{.*}}, #emitc.opaque<"{7, 24}">, false, 0 : i32, 4, 1, #emitc.opaque<"{0, 2, 4, 6}">, #emitc.opaque<"{2, 2, 2, 1}">, #emitc.opaque<"tprt::DType::F32">, 0.000000e+00, false]}
// EMITC: call_opaque "tprt::load_param"(%arg0) {args = [0 : index, #emitc.opaque<"\22model.layers.0.self_attn.k_proj.weight\22">, {{.*}}, #emitc.opaque<"{8, 24}">, false, 0 : i32, 4, 1, #emitc.opaque<"{0, 0, 4, 4}">, #emitc.opaque<"{4, 4, 4, 4}">,
// EMITC: call_opaque "tprt::load_param"(%arg0) {args = [0 : index, #emitc.opaque<"\22model.layers.0.self_attn.o_proj.weight\22">, {{.*}}, #emitc.opaque<"{24, 24}">, false, 1 : i32, 4, 1, #emitc.opaque<"{0, 8, 12, 20}">, #emitc.opaque<"{8, 4, 8, 4}">,
// EMITC: call_opaque "tprt::embedding_vocab_parallel"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"{0, 2, 4, 6}">, #emitc.opaque<"{2, 2, 2, 1}">]}
// EMITC: call_opaque "tprt::all_gather_uneven"({{.*}}) {args = [0 : index, 1 : index, 2, #emitc.opaque<"{2, 2, 2, 1}">]}
module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %emb: tensor<7x24xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 672, transposed = false>},
      %wq: tensor<24x24xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight", tp.source = #tp.source<initializer = "model.layers.0.self_attn.q_proj.weight", file = "m.onnx", offset = 672, length = 2304, transposed = false>},
      %wk: tensor<8x24xf32> {tp.fqn = "model.layers.0.self_attn.k_proj.weight", tp.source = #tp.source<initializer = "model.layers.0.self_attn.k_proj.weight", file = "m.onnx", offset = 2976, length = 768, transposed = false>},
      %wv: tensor<8x24xf32> {tp.fqn = "model.layers.0.self_attn.v_proj.weight", tp.source = #tp.source<initializer = "model.layers.0.self_attn.v_proj.weight", file = "m.onnx", offset = 3744, length = 768, transposed = false>},
      %wo: tensor<24x24xf32> {tp.fqn = "model.layers.0.self_attn.o_proj.weight", tp.source = #tp.source<initializer = "model.layers.0.self_attn.o_proj.weight", file = "m.onnx", offset = 4512, length = 2304, transposed = false>},
      %head: tensor<7x24xf32> {tp.fqn = "lm_head.weight", tp.source = #tp.source<initializer = "lm_head.weight", file = "m.onnx", offset = 6816, length = 672, transposed = false>}) -> tensor<?x?x7xf32> {
    %x = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<7x24xf32>) -> tensor<?x?x24xf32>
    %q = tp.linear %x, %wq : (tensor<?x?x24xf32>, tensor<24x24xf32>) -> tensor<?x?x24xf32>
    %k = tp.linear %x, %wk : (tensor<?x?x24xf32>, tensor<8x24xf32>) -> tensor<?x?x8xf32>
    %v = tp.linear %x, %wv : (tensor<?x?x24xf32>, tensor<8x24xf32>) -> tensor<?x?x8xf32>
    %a = tp.attention %q, %k, %v {causal, head_dim = 4 : i64, num_heads = 6 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x24xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x24xf32>
    %o = tp.linear %a, %wo : (tensor<?x?x24xf32>, tensor<24x24xf32>) -> tensor<?x?x24xf32>
    %l = tp.linear %o, %head : (tensor<?x?x24xf32>, tensor<7x24xf32>) -> tensor<?x?x7xf32>
    return %l : tensor<?x?x7xf32>
  }
}

//--- train.mlir
// A training step over uneven placements: the vocabulary-parallel loss and
// its gradient take the vocabulary ranges of the logits (the padding
// excluded at run time), the weight gradient is held as the weight is,
// and a k projection whose KV heads are shared unevenly (ranks 0 and 1
// hold head 0, rank 2 head 1) sums its gradient over each head's ranks.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %arg3: tensor<3x4xf32> {tp.fqn = "lm_head.weight"
// CHECK-SAME: %arg4: tensor<4x4xf32> {tp.fqn = "k_proj.weight"
// CHECK: %[[LOGITS:.*]] = tp.linear %arg0, %arg3 : (tensor<?x?x4xf32>, tensor<3x4xf32>) -> tensor<?x?x3xf32>
// CHECK: %loss, %lse = tp.cross_entropy %[[LOGITS]], %arg1, %arg2 {vocab_parallel, vocab_sizes = array<i64: 3, 2, 2>, vocab_starts = array<i64: 0, 3, 5>}
// CHECK: %[[DL:.*]] = tp.cross_entropy_grad %[[LOGITS]], %arg1, %arg2, %lse {vocab_parallel, vocab_sizes = array<i64: 3, 2, 2>, vocab_starts = array<i64: 0, 3, 5>}
// CHECK: %[[DH:.*]] = tp.linear_grad_weight %[[DL]], %arg0 : (tensor<?x?x3xf32>, tensor<?x?x4xf32>) -> tensor<3x4xf32>
// CHECK: tp.accumulate_grad %[[DH]] into %arg3 {fqn = "lm_head.weight", split_dim = 0 : i64}
// CHECK: %[[DK:.*]] = tp.linear_grad_weight
// CHECK: %[[SUM:.*]] = tp.replica_sum %[[DK]] {blocks = array<i64: 0, 0, 1>} : tensor<4x4xf32>
// CHECK: tp.accumulate_grad %[[SUM]] into %arg4 {fqn = "k_proj.weight", split_dim = 0 : i64}
module {
  shard.grid @tp(shape = 3)
  func.func @forward(%x: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> attributes {tp.entry = "forward"} {
    return %x : tensor<?x?x4xf32>
  }
  func.func @step(%x: tensor<?x?x4xf32>, %ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>, %head: tensor<7x4xf32> {tp.fqn = "lm_head.weight", tp.placement = #tp.placement<split(0), starts = [0, 3, 5], sizes = [3, 2, 2]>}, %k: tensor<8x4xf32> {tp.fqn = "k_proj.weight", tp.placement = #tp.placement<split(0), starts = [0, 0, 4], sizes = [4, 4, 4]>}) -> tensor<f32> attributes {tp.entry = "train_step"} {
    %s = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %h = shard.shard %head to %s annotate_for_users : tensor<7x4xf32>
    %kk = shard.shard %k to %s annotate_for_users : tensor<8x4xf32>
    %logits = tp.linear %x, %h : (tensor<?x?x4xf32>, tensor<7x4xf32>) -> tensor<?x?x7xf32>
    %loss, %lse = tp.cross_entropy %logits, %ids, %mask : (tensor<?x?x7xf32>, tensor<?x?xi64>, tensor<?x?xi64>) -> (tensor<f32>, tensor<?x?xf32>)
    %dl = tp.cross_entropy_grad %logits, %ids, %mask, %lse : (tensor<?x?x7xf32>, tensor<?x?xi64>, tensor<?x?xi64>, tensor<?x?xf32>) -> tensor<?x?x7xf32>
    %dh = tp.linear_grad_weight %dl, %x : (tensor<?x?x7xf32>, tensor<?x?x4xf32>) -> tensor<7x4xf32>
    tp.accumulate_grad %dh into %head {fqn = "lm_head.weight"} : tensor<7x4xf32>
    %kv = tp.linear %x, %kk : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %dk = tp.linear_grad_weight %kv, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
    tp.accumulate_grad %dk into %k {fqn = "k_proj.weight"} : tensor<8x4xf32>
    return %loss : tensor<f32>
  }
}

//--- errors.mlir
// An uneven split reaches a row-split linear only from its column-split
// pair: an evenly split input does not fit.
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>, %up: tensor<6x4xf32>,
      %down: tensor<4x6xf32> {tp.placement = #tp.placement<split(1), starts = [0, 4], sizes = [4, 2]>}) -> tensor<?x?x4xf32> {
    %s1 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %up to %s1 annotate_for_users : tensor<6x4xf32>
    %s2 = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %d = shard.shard %down to %s2 annotate_for_users : tensor<4x6xf32>
    %a = tp.linear %x, %u : (tensor<?x?x4xf32>, tensor<6x4xf32>) -> tensor<?x?x6xf32>
    // expected-error @+1 {{tp-partition: a row-split linear's input and weight are split over different ranges}}
    %c = tp.linear %a, %d : (tensor<?x?x6xf32>, tensor<4x6xf32>) -> tensor<?x?x4xf32>
    return %c : tensor<?x?x4xf32>
  }
}

// -----

// Ranges for another grid.
module {
  shard.grid @tp(shape = 2)
  // expected-error @+1 {{argument 1: #tp.placement<split(0), starts = [0, 2, 4], sizes = [2, 2, 2]> does not split dim 0 of 'tensor<6x4xf32>' over 2 ranks}}
  func.func @forward(%x: tensor<?x?x4xf32>, %up: tensor<6x4xf32> {tp.placement = #tp.placement<split(0), starts = [0, 2, 4], sizes = [2, 2, 2]>}) -> tensor<?x?x6xf32> {
    %s1 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %up to %s1 annotate_for_users : tensor<6x4xf32>
    %a = tp.linear %x, %u : (tensor<?x?x4xf32>, tensor<6x4xf32>) -> tensor<?x?x6xf32>
    return %a : tensor<?x?x6xf32>
  }
}

// -----

// A column-split linear's output gradient arrives split over other ranges
// than the weight it multiplies: a wrong program.
module {
  shard.grid @tp(shape = 3)
  func.func @forward(%x: tensor<?x?x4xf32>, %up: tensor<7x4xf32> {tp.placement = #tp.placement<split(0), starts = [0, 3, 5], sizes = [3, 2, 2]>}, %other: tensor<7x4xf32> {tp.placement = #tp.placement<split(0), starts = [0, 2, 4], sizes = [2, 2, 3]>}) -> tensor<?x?x4xf32> attributes {tp.entry = "forward"} {
    %s = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %up to %s annotate_for_users : tensor<7x4xf32>
    %o = shard.shard %other to %s annotate_for_users : tensor<7x4xf32>
    %a = tp.linear %x, %u : (tensor<?x?x4xf32>, tensor<7x4xf32>) -> tensor<?x?x7xf32>
    // expected-error @+1 {{tp-partition: a column-split linear's output gradient and weight are split over different ranges}}
    %dx = tp.linear_grad_input %a, %o : (tensor<?x?x7xf32>, tensor<7x4xf32>) -> tensor<?x?x4xf32>
    return %dx : tensor<?x?x4xf32>
  }
}

// -----

// An uneven split whose ranges do not follow one another (replicated KV
// heads) is never gathered.
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>, %k: tensor<4x4xf32> {tp.placement = #tp.placement<split(0), starts = [0, 0], sizes = [4, 4]>}) -> tensor<?x?x4xf32> {
    %s1 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %k to %s1 annotate_for_users : tensor<4x4xf32>
    %a = tp.linear %x, %u : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    // expected-error @+1 {{tp-partition: the uneven ranges of 'tensor<?x?x4xf32>' do not follow one another; only such a split is gathered}}
    return %a : tensor<?x?x4xf32>
  }
}
