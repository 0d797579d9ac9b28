// RUN: split-file %s %t
// RUN: tp-opt %t/block.mlir --tp-partition | FileCheck %t/block.mlir
// RUN: tp-opt %t/block.mlir --tp-partition --tp-to-emitc | FileCheck %t/block.mlir --check-prefix=EMITC
// RUN: tp-opt %t/kv.mlir --tp-partition | FileCheck %t/kv.mlir
// RUN: tp-opt %t/kv.mlir --tp-partition --tp-to-emitc | FileCheck %t/kv.mlir --check-prefix=EMITC
// RUN: tp-opt %t/lse.mlir --tp-partition | FileCheck %t/lse.mlir
// RUN: tp-opt %t/sp.mlir --tp-partition | FileCheck %t/sp.mlir
// RUN: tp-opt %t/layouts.mlir --tp-partition | FileCheck %t/layouts.mlir
// RUN: tp-opt %t/sp.mlir --tp-partition --tp-to-emitc | FileCheck %t/sp.mlir --check-prefix=EMITC
// RUN: tp-opt %t/slices.mlir --tp-partition | FileCheck %t/slices.mlir
// RUN: tp-opt %t/errors.mlir --split-input-file --tp-partition --verify-diagnostics

//--- block.mlir
// A vocabulary-parallel embedding, a column/row-split MLP and a
// column-split head: local shapes, one all-reduce per row-split linear and
// after the embedding, an all-gather of the split logits.
// CHECK: func.func @forward(%arg0: tensor<?x?xi64> {onnx.name = "input_ids"}, %arg1: tensor<8x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.placement = #tp.placement<split(0), blocks = 2>, tp.source = {{[^}]*}}}, %arg2: tensor<4x4xf32> {tp.fqn = "up.weight", tp.placement = #tp.placement<split(0), blocks = 2>, tp.source = {{[^}]*}}}, %arg3: tensor<4x4xf32> {tp.fqn = "down.weight", tp.placement = #tp.placement<split(1), blocks = 2>, tp.source = {{[^}]*}}}, %arg4: tensor<4xf32> {tp.fqn = "norm.weight", tp.source = {{[^}]*}}}) -> tensor<?x?x16xf32>
// CHECK-NOT: shard.shard
// CHECK: %[[E:.*]] = tp.embedding %arg0, %arg1 {vocab_parallel} : (tensor<?x?xi64>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT: %[[H:.*]] = shard.all_reduce %[[E]] on @tp grid_axes = [0] : tensor<?x?x4xf32> -> tensor<?x?x4xf32>
// CHECK-NEXT: %[[U:.*]] = tp.linear %[[H]], %arg2 : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT: %[[S:.*]] = tp.silu %[[U]] : tensor<?x?x4xf32>
// CHECK-NEXT: %[[D:.*]] = tp.linear %[[S]], %arg3 : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[D]] on @tp grid_axes = [0]
// CHECK-NEXT: %[[X:.*]] = tp.add %[[H]], %[[R]]
// CHECK-NEXT: %[[N:.*]] = tp.rms_norm %[[X]], %arg4
// CHECK-NEXT: %[[L:.*]] = tp.linear %[[N]], %arg1 : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[G:.*]] = shard.all_gather %[[L]] on @tp grid_axes = [0] gather_axis = 2 : tensor<?x?x8xf32> -> tensor<?x?x16xf32>
// CHECK-NEXT: return %[[G]]
// EMITC: emitc.verbatim "const int tprt_model_tp_size = 2;"
// EMITC: emitc.func @tprt_model_forward
// EMITC: call_opaque "tprt::load_param"(%arg0) {args = [0 : index, #emitc.opaque<"\22model.embed_tokens.weight\22">, {{.*}}, #emitc.opaque<"{16, 4}">, false, 0 : i32, 2, 1, #emitc.opaque<"{}">, #emitc.opaque<"{}">, #emitc.opaque<"tprt::DType::F32">, 0.000000e+00, false]}
// EMITC: call_opaque "tprt::load_param"(%arg0) {args = [0 : index, #emitc.opaque<"\22down.weight\22">, {{.*}}, #emitc.opaque<"{4, 8}">, false, 1 : i32, 2, 1, #emitc.opaque<"{}">, #emitc.opaque<"{}">, #emitc.opaque<"tprt::DType::F32">, 0.000000e+00, false]}
// EMITC: call_opaque "tprt::embedding_vocab_parallel"
// EMITC-NEXT: call_opaque "tprt::all_reduce_sum{{(_consuming)?}}"
// EMITC: call_opaque "tprt::all_gather"({{.*}}) {args = [0 : index, 1 : index, 2]}
// EMITC-NOT: shard.
module attributes {onnx.file = "m.onnx"} {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "e", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %up: tensor<8x4xf32> {tp.fqn = "up.weight", tp.source = #tp.source<initializer = "u", file = "m.onnx", offset = 256, length = 128, transposed = false>},
      %down: tensor<4x8xf32> {tp.fqn = "down.weight", tp.source = #tp.source<initializer = "d", file = "m.onnx", offset = 384, length = 128, transposed = false>},
      %nw: tensor<4xf32> {tp.fqn = "norm.weight", tp.source = #tp.source<initializer = "n", file = "m.onnx", offset = 512, length = 16, transposed = false>}) -> tensor<?x?x16xf32> {
    %s0 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %e = shard.shard %emb to %s0 annotate_for_users : tensor<16x4xf32>
    %s1 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %up to %s1 annotate_for_users : tensor<8x4xf32>
    %s2 = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %d = shard.shard %down to %s2 annotate_for_users : tensor<4x8xf32>
    %s3 = shard.sharding @tp split_axes = [[]] : !shard.sharding
    %n = shard.shard %nw to %s3 annotate_for_users : tensor<4xf32>
    %h = tp.embedding %ids, %e : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %a = tp.linear %h, %u : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %b = tp.silu %a : tensor<?x?x8xf32>
    %c = tp.linear %b, %d : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
    %x = tp.add %h, %c : tensor<?x?x4xf32>
    %y = tp.rms_norm %x, %n {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %l = tp.linear %y, %e : (tensor<?x?x4xf32>, tensor<16x4xf32>) -> tensor<?x?x16xf32>
    return %l : tensor<?x?x16xf32>
  }
}

//--- kv.mlir
// 2 KV heads on 4 ranks (tp.shard_replicas = 2 from tp-apply-plan): k and v
// are cut into 2 blocks, each held by the 2 ranks of one query group; each
// rank computes 1 query head against 1 KV head.
// CHECK: %arg2: tensor<8x32xf32> {tp.fqn = "k.weight", tp.placement = #tp.placement<split(0), blocks = 2, replicas = 2
// CHECK: tp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, head_dim = 8 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327379 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
// The runtime reads q's block rank / 1 of 4 and k's block rank / 2 of 2.
// EMITC: emitc.verbatim "const int tprt_model_tp_size = 4;"
// EMITC: call_opaque "tprt::load_param"(%arg0) {args = [0 : index, #emitc.opaque<"\22q.weight\22">, {{.*}}, #emitc.opaque<"{32, 32}">, false, 0 : i32, 4, 1, #emitc.opaque<"{}">, #emitc.opaque<"{}">, #emitc.opaque<"tprt::DType::F32">, 0.000000e+00, false]}
// EMITC: call_opaque "tprt::load_param"(%arg0) {args = [0 : index, #emitc.opaque<"\22k.weight\22">, {{.*}}, #emitc.opaque<"{16, 32}">, false, 0 : i32, 2, 2, #emitc.opaque<"{}">, #emitc.opaque<"{}">, #emitc.opaque<"tprt::DType::F32">, 0.000000e+00, false]}
module attributes {onnx.file = "m.onnx"} {
  shard.grid @tp(shape = 4)
  func.func @forward(%x: tensor<?x?x32xf32> {onnx.name = "input_ids"},
      %wq: tensor<32x32xf32> {tp.fqn = "q.weight", tp.source = #tp.source<initializer = "q", file = "m.onnx", offset = 0, length = 4096, transposed = false>},
      %wk: tensor<16x32xf32> {tp.fqn = "k.weight", tp.placement = #tp.placement<split(0), replicas = 2>, tp.source = #tp.source<initializer = "k", file = "m.onnx", offset = 4096, length = 2048, transposed = false>},
      %wv: tensor<16x32xf32> {tp.fqn = "v.weight", tp.placement = #tp.placement<split(0), replicas = 2>, tp.source = #tp.source<initializer = "v", file = "m.onnx", offset = 6144, length = 2048, transposed = false>}) -> tensor<?x?x32xf32> {
    %s = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %q = shard.shard %wq to %s annotate_for_users : tensor<32x32xf32>
    %k = shard.shard %wk to %s annotate_for_users : tensor<16x32xf32>
    %v = shard.shard %wv to %s annotate_for_users : tensor<16x32xf32>
    %qa = tp.linear %x, %q : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
    %ka = tp.linear %x, %k : (tensor<?x?x32xf32>, tensor<16x32xf32>) -> tensor<?x?x16xf32>
    %va = tp.linear %x, %v : (tensor<?x?x32xf32>, tensor<16x32xf32>) -> tensor<?x?x16xf32>
    %a = tp.attention %qa, %ka, %va {causal, head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35355339059327379 : f64} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x32xf32>
    return %a : tensor<?x?x32xf32>
  }
}

//--- lse.mlir
// The forward's log-sum-exp, per head, is split as the heads are: each of 4
// ranks keeps its one head's, which its backward reads.
// CHECK: %[[O:.*]], %[[LSE:.*]] = tp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, head_dim = 8 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327379 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x1xf32>)
// CHECK: tp.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} saved %[[O]], %[[LSE]] {causal, head_dim = 8 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.35355339059327379 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>)
module attributes {onnx.file = "m.onnx"} {
  shard.grid @tp(shape = 4)
  func.func @forward(%x: tensor<?x?x32xf32> {onnx.name = "input_ids"},
      %wq: tensor<32x32xf32> {tp.fqn = "q.weight", tp.source = #tp.source<initializer = "q", file = "m.onnx", offset = 0, length = 4096, transposed = false>},
      %wk: tensor<16x32xf32> {tp.fqn = "k.weight", tp.placement = #tp.placement<split(0), replicas = 2>, tp.source = #tp.source<initializer = "k", file = "m.onnx", offset = 4096, length = 2048, transposed = false>},
      %wv: tensor<16x32xf32> {tp.fqn = "v.weight", tp.placement = #tp.placement<split(0), replicas = 2>, tp.source = #tp.source<initializer = "v", file = "m.onnx", offset = 6144, length = 2048, transposed = false>}) -> (tensor<?x?x32xf32>, tensor<?x?x32xf32>) {
    %s = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %q = shard.shard %wq to %s annotate_for_users : tensor<32x32xf32>
    %k = shard.shard %wk to %s annotate_for_users : tensor<16x32xf32>
    %v = shard.shard %wv to %s annotate_for_users : tensor<16x32xf32>
    %qa = tp.linear %x, %q : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
    %ka = tp.linear %x, %k : (tensor<?x?x32xf32>, tensor<16x32xf32>) -> tensor<?x?x16xf32>
    %va = tp.linear %x, %v : (tensor<?x?x32xf32>, tensor<16x32xf32>) -> tensor<?x?x16xf32>
    %a, %lse = tp.attention %qa, %ka, %va {causal, head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35355339059327379 : f64} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> (tensor<?x?x32xf32>, tensor<?x?x4xf32>)
    %dq, %dk, %dv = tp.attention_grad %qa, %ka, %va, %qa saved %a, %lse {causal, head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35355339059327379 : f64} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x4xf32>) -> (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>)
    return %a, %dq : tensor<?x?x32xf32>, tensor<?x?x32xf32>
  }
}

//--- sp.mlir
// Sequence parallelism: the embedding's and the row-split linear's partial
// sums are reduce-scattered onto the sequence (dim 1; a static length is
// divided), the norm and the residual add run on sequence shards, and the
// value annotated replicated for the column-split linear is all-gathered
// back (then the logits gather on the vocabulary as usual).
// CHECK: func.func @forward(%arg0: tensor<2x8xi64>
// CHECK-NOT: shard.shard
// CHECK: %[[E:.*]] = tp.embedding %arg0, %arg1 {vocab_parallel}
// CHECK-NEXT: %[[H:.*]] = shard.reduce_scatter %[[E]] on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x8x4xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[N:.*]] = tp.rms_norm %[[H]], %arg4 {{.*}} -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[G:.*]] = shard.all_gather %[[N]] on @tp grid_axes = [0] gather_axis = 1 : tensor<2x4x4xf32> -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[U:.*]] = tp.linear %[[G]], %arg2 : (tensor<2x8x4xf32>, tensor<4x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[D:.*]] = tp.linear %[[U]], %arg3
// CHECK-NEXT: %[[R:.*]] = shard.reduce_scatter %[[D]] on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x8x4xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[X:.*]] = tp.add %[[H]], %[[R]] : tensor<2x4x4xf32>
// CHECK-NEXT: %[[Y:.*]] = shard.all_gather %[[X]] on @tp grid_axes = [0] gather_axis = 1 : tensor<2x4x4xf32> -> tensor<2x8x4xf32>
// CHECK-NEXT: return %[[Y]]
// EMITC: call_opaque "tprt::embedding_vocab_parallel"
// EMITC-NEXT: call_opaque "tprt::reduce_scatter_sum"({{.*}}) {args = [0 : index, 1 : index, 1]}
// EMITC: call_opaque "tprt::all_gather"({{.*}}) {args = [0 : index, 1 : index, 1]}
module attributes {onnx.file = "m.onnx"} {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<2x8xi64> {onnx.name = "input_ids"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "e", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %up: tensor<8x4xf32> {tp.fqn = "up.weight", tp.source = #tp.source<initializer = "u", file = "m.onnx", offset = 256, length = 128, transposed = false>},
      %down: tensor<4x8xf32> {tp.fqn = "down.weight", tp.source = #tp.source<initializer = "d", file = "m.onnx", offset = 384, length = 128, transposed = false>},
      %nw: tensor<4xf32> {tp.fqn = "norm.weight", tp.source = #tp.source<initializer = "n", file = "m.onnx", offset = 512, length = 16, transposed = false>}) -> tensor<2x8x4xf32> {
    %s0 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %e = shard.shard %emb to %s0 annotate_for_users : tensor<16x4xf32>
    %u = shard.shard %up to %s0 annotate_for_users : tensor<8x4xf32>
    %s2 = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %d = shard.shard %down to %s2 annotate_for_users : tensor<4x8xf32>
    %s3 = shard.sharding @tp split_axes = [[]] : !shard.sharding
    %n = shard.shard %nw to %s3 annotate_for_users : tensor<4xf32>
    %h0 = tp.embedding %ids, %e : (tensor<2x8xi64>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
    %seq = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %h = shard.shard %h0 to %seq : tensor<2x8x4xf32>
    %y = tp.rms_norm %h, %n {epsilon = 1.0e-6 : f64} : (tensor<2x8x4xf32>, tensor<4xf32>) -> tensor<2x8x4xf32>
    %rep = shard.sharding @tp split_axes = [[]] : !shard.sharding
    %g = shard.shard %y to %rep annotate_for_users : tensor<2x8x4xf32>
    %a = tp.linear %g, %u : (tensor<2x8x4xf32>, tensor<8x4xf32>) -> tensor<2x8x8xf32>
    %c0 = tp.linear %a, %d : (tensor<2x8x8xf32>, tensor<4x8xf32>) -> tensor<2x8x4xf32>
    %c = shard.shard %c0 to %seq : tensor<2x8x4xf32>
    %x = tp.add %h, %c : tensor<2x8x4xf32>
    return %x : tensor<2x8x4xf32>
  }
}

//--- layouts.mlir
// Output-layout annotations of tp-apply-plan: a column-split result stays
// split (no collective), a row-split result wanted replicated is
// all-reduced, a column-split result wanted replicated (colwise with
// gathered output) is all-gathered on its last dimension.
// CHECK: %[[U:.*]] = tp.linear %arg0, %arg1 : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT: %[[D:.*]] = tp.linear %[[U]], %arg2
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[D]] on @tp grid_axes = [0]
// CHECK-NEXT: %[[H:.*]] = tp.linear %[[R]], %arg1
// CHECK-NEXT: %[[G:.*]] = shard.all_gather %[[H]] on @tp grid_axes = [0] gather_axis = 2 : tensor<?x?x4xf32> -> tensor<?x?x8xf32>
// CHECK-NEXT: return %[[G]]
module attributes {onnx.file = "m.onnx"} {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>,
      %up: tensor<8x4xf32> {tp.fqn = "up.weight", tp.source = #tp.source<initializer = "u", file = "m.onnx", offset = 0, length = 128, transposed = false>},
      %down: tensor<4x8xf32> {tp.fqn = "down.weight", tp.source = #tp.source<initializer = "d", file = "m.onnx", offset = 128, length = 128, transposed = false>}) -> tensor<?x?x8xf32> {
    %s0 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %up to %s0 annotate_for_users : tensor<8x4xf32>
    %s1 = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %d = shard.shard %down to %s1 annotate_for_users : tensor<4x8xf32>
    %a0 = tp.linear %x, %u : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %last = shard.sharding @tp split_axes = [[], [], [0]] : !shard.sharding
    %a = shard.shard %a0 to %last : tensor<?x?x8xf32>
    %b0 = tp.linear %a, %d : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
    %rep = shard.sharding @tp split_axes = [[]] : !shard.sharding
    %b = shard.shard %b0 to %rep : tensor<?x?x4xf32>
    %c0 = tp.linear %b, %u : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %c = shard.shard %c0 to %rep : tensor<?x?x8xf32>
    return %c : tensor<?x?x8xf32>
  }
}

//--- slices.mlir
// The parts of a column-split fused projection read whole rows: its output
// is all-gathered once, right after it, for both parts; a part of a
// replicated activation is sliced locally.
// CHECK: %[[F:.*]] = tp.linear %arg0, %arg1 : (tensor<?x?x4xf32>, tensor<6x4xf32>) -> tensor<?x?x6xf32>
// CHECK-NEXT: %[[W:.*]] = shard.all_gather %[[F]] on @tp grid_axes = [0] gather_axis = 2 : tensor<?x?x6xf32> -> tensor<?x?x12xf32>
// CHECK-NEXT: %[[G:.*]] = tp.feature_slice %[[W]][0, 8] : tensor<?x?x12xf32> -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[U:.*]] = tp.feature_slice %[[W]][8, 4] : tensor<?x?x12xf32> -> tensor<?x?x4xf32>
// CHECK-NEXT: tp.feature_slice %arg0[1, 2] : tensor<?x?x4xf32> -> tensor<?x?x2xf32>
module attributes {onnx.file = "m.onnx"} {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>,
      %fused: tensor<12x4xf32> {tp.fqn = "fused.weight", tp.source = #tp.source<initializer = "f", file = "m.onnx", offset = 0, length = 192, transposed = false>})
      -> (tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x2xf32>) {
    %s0 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %w = shard.shard %fused to %s0 annotate_for_users : tensor<12x4xf32>
    %y = tp.linear %x, %w : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
    %gate = tp.feature_slice %y [0, 8] : tensor<?x?x12xf32> -> tensor<?x?x8xf32>
    %up = tp.feature_slice %y [8, 4] : tensor<?x?x12xf32> -> tensor<?x?x4xf32>
    %p = tp.feature_slice %x [1, 2] : tensor<?x?x4xf32> -> tensor<?x?x2xf32>
    return %gate, %up, %p : tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<?x?x2xf32>
  }
}

//--- errors.mlir
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>, %up: tensor<8x4xf32>, %nw: tensor<8xf32>) -> tensor<?x?x8xf32> {
    %s1 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %up to %s1 annotate_for_users : tensor<8x4xf32>
    %a = tp.linear %x, %u : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    // expected-error @+1 {{tp-partition: a norm over a split last dimension needs its whole row}}
    %n = tp.rms_norm %a, %nw {epsilon = 1.0e-6 : f64} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
    return %n : tensor<?x?x8xf32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>, %down: tensor<4x4xf32>) -> tensor<?x?x4xf32> {
    %s2 = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %d = shard.shard %down to %s2 annotate_for_users : tensor<4x4xf32>
    // expected-error @+1 {{tp-partition: a row-split linear needs an input split on its last dimension}}
    %c = tp.linear %x, %d : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
    return %c : tensor<?x?x4xf32>
  }
}

// -----

// expected-error @+1 {{tp-partition: expected shard.grid @tp of one static axis and func.func @forward (run tp-apply-plan)}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

module {
  shard.grid @tp(shape = 3)
  // expected-error @+1 {{argument 1: dim 0 of 'tensor<8x4xf32>' does not split into 3 / 1 blocks}}
  func.func @forward(%x: tensor<?x?x4xf32>, %up: tensor<8x4xf32>) -> tensor<?x?x8xf32> {
    %s1 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %up to %s1 annotate_for_users : tensor<8x4xf32>
    %a = tp.linear %x, %u : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    return %a : tensor<?x?x8xf32>
  }
}

// -----

// KV heads split 4 ways without replication leave this rank half a head.
module {
  shard.grid @tp(shape = 4)
  func.func @forward(%x: tensor<?x?x32xf32>, %wq: tensor<32x32xf32>, %wk: tensor<16x32xf32>) -> tensor<?x?x32xf32> {
    %s = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %q = shard.shard %wq to %s annotate_for_users : tensor<32x32xf32>
    %k = shard.shard %wk to %s annotate_for_users : tensor<16x32xf32>
    %qa = tp.linear %x, %q : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32>
    %ka = tp.linear %x, %k : (tensor<?x?x32xf32>, tensor<16x32xf32>) -> tensor<?x?x16xf32>
    // expected-error @+1 {{tp-partition: 4 heads / 2 KV heads do not split into 4 (this rank's projections give 8 and 4 features)}}
    %a = tp.attention %qa, %ka, %ka {head_dim = 8 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.35355339059327379 : f64} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x32xf32>
    return %a : tensor<?x?x32xf32>
  }
}

// -----

// Sequence shards reaching attention without the gather: causal attention
// over a slice of the sequence is wrong.
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<?x?xi64>, %emb: tensor<8x4xf32>) -> tensor<?x?x4xf32> {
    %s0 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %e = shard.shard %emb to %s0 annotate_for_users : tensor<8x4xf32>
    %h0 = tp.embedding %ids, %e : (tensor<?x?xi64>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
    %seq = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %h = shard.shard %h0 to %seq : tensor<?x?x4xf32>
    // expected-error @+1 {{tp-partition: attention needs whole sequences (causal attention on sequence shards is wrong); gather before the q/k/v projections}}
    %a = tp.attention %h, %h, %h {causal, head_dim = 2 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
    return %a : tensor<?x?x4xf32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<2x5xi64>, %emb: tensor<8x4xf32>) -> tensor<2x5x4xf32> {
    %s0 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %e = shard.shard %emb to %s0 annotate_for_users : tensor<8x4xf32>
    %h0 = tp.embedding %ids, %e : (tensor<2x5xi64>, tensor<8x4xf32>) -> tensor<2x5x4xf32>
    %seq = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    // expected-error @+1 {{tp-partition: sequence length 5 is not divisible by tp 2}}
    %h = shard.shard %h0 to %seq : tensor<2x5x4xf32>
    return %h : tensor<2x5x4xf32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
    %y = tp.silu %x : tensor<?x?x4xf32>
    %s2 = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    // expected-error @+1 {{tp-partition: only the partial result of a row-split op is split here}}
    %c = shard.shard %y to %s2 : tensor<?x?x4xf32>
    return %c : tensor<?x?x4xf32>
  }
}

// -----

// An op without a PartitionOpInterface has no rule.
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
    // expected-error @+1 {{tp-partition: no partitioning rule for arith.negf}}
    %y = arith.negf %x : tensor<?x?x4xf32>
    return %y : tensor<?x?x4xf32>
  }
}

// -----

// Nor have the fused ops made after partitioning.
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%a: tensor<?x?x4xf32>, %b: tensor<?x?x4xf32>, %w: tensor<4xf32>) -> tensor<?x?x4xf32> {
    // expected-error @+1 {{tp-partition: no partitioning rule for tp.add_rms_norm}}
    %s, %n = tp.add_rms_norm %a, %b, %w {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<4xf32>) -> (tensor<?x?x4xf32>, tensor<?x?x4xf32>)
    return %n : tensor<?x?x4xf32>
  }
}

// -----

// Elementwise operands must be held alike.
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>, %up: tensor<8x4xf32>, %gate: tensor<8x4xf32>) -> tensor<?x?x8xf32> {
    %s1 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %up to %s1 annotate_for_users : tensor<8x4xf32>
    %a = tp.linear %x, %u : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %b = tp.linear %x, %gate : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    // expected-error @+1 {{tp-partition: operands are split differently}}
    %m = tp.mul %a, %b : tensor<?x?x8xf32>
    return %m : tensor<?x?x8xf32>
  }
}
