// RUN: split-file %s %t
// RUN: tp-opt %t/block.mlir --tp-build-train-step | FileCheck %t/block.mlir
// RUN: tp-opt %t/block.mlir --tp-build-train-step --tp-partition | FileCheck %t/block.mlir --check-prefix=PART
// RUN: tp-opt %t/block.mlir --tp-build-train-step --tp-partition --tp-to-emitc | FileCheck %t/block.mlir --check-prefix=EMITC
// RUN: tp-opt %t/lora.mlir --tp-build-train-step="optimizer=sgd" | FileCheck %t/lora.mlir
// RUN: tp-opt %t/sp.mlir --tp-build-train-step | FileCheck %t/sp.mlir
// RUN: tp-opt %t/sp.mlir --tp-build-train-step --tp-partition | FileCheck %t/sp.mlir --check-prefix=PART
// RUN: tp-opt %t/classes.mlir --tp-build-train-step --tp-partition | FileCheck %t/classes.mlir
// RUN: tp-opt %t/recompute.mlir --tp-build-train-step="recompute=true" | FileCheck %t/recompute.mlir
// RUN: tp-opt %t/recompute.mlir --tp-build-train-step | FileCheck %t/recompute.mlir --check-prefix=KEEP
// RUN: tp-opt %t/errors.mlir --split-input-file --tp-build-train-step --verify-diagnostics
// RUN: tp-opt %t/slices.mlir --tp-build-train-step | FileCheck %t/slices.mlir
// RUN: tp-opt %t/bf16.mlir --tp-build-train-step | FileCheck %t/bf16.mlir
// RUN: tp-opt %t/bf16.mlir --tp-build-train-step="master-weights=none" | FileCheck %t/bf16.mlir --check-prefix=NONE
// RUN: tp-opt %t/lora.mlir --tp-build-train-step="master-weights=f32" | FileCheck %t/bf16.mlir --check-prefix=FORCED
// RUN: not tp-opt %t/bf16.mlir --tp-build-train-step="master-weights=bf16" 2>&1 | FileCheck %t/bf16.mlir --check-prefix=BAD

//--- block.mlir
// A vocabulary-parallel embedding tied to a column-split head, a column /
// row-split MLP and a norm, as tp-apply-plan annotates them at tp=2.
// The training step is the forward, the loss of its logits and the
// reverse-mode derivative; the forward is kept as it was.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: tp.cross_entropy
// CHECK: return %{{.*}} : tensor<?x?x16xf32>
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> tensor<f32> attributes {tp.entry = "train_step"}
// What the backward reads is marked tp.saved where the forward computes
// it: the linears' inputs, the activation's input, the norm's input, the
// logits and the loss's log-sum-exp; not the down projection's output,
// which only the residual sum reads.
// CHECK: %[[H:.*]] = tp.embedding %arg0, %[[E:[^ ]*]] {tp.saved}
// CHECK: %[[A:.*]] = tp.linear %[[H]], %[[U:[^ ]*]] {tp.saved}
// CHECK: %[[S:.*]] = tp.silu %[[A]] {tp.saved}
// CHECK: %[[C:.*]] = tp.linear %[[S]], %[[D:[^ ]*]] :
// CHECK: %[[X:.*]] = tp.add %[[H]], %[[C]] {tp.saved}
// CHECK: %[[Y:.*]] = tp.rms_norm %[[X]], %[[N:[^ ]*]] {epsilon = {{.*}}, tp.saved}
// CHECK: %[[L:.*]] = tp.linear %[[Y]], %[[E]] {tp.saved}
// The loss against the inputs shifted by one, and the last op first.
// CHECK: %[[LOSS:.*]], %[[LSE:.*]] = tp.cross_entropy %[[L]], %arg0, %arg1 {tp.saved} : (tensor<?x?x16xf32>, tensor<?x?xi64>, tensor<?x?xi64>) -> (tensor<f32>, tensor<?x?xf32>)
// CHECK: %[[DL:.*]] = tp.cross_entropy_grad %[[L]], %arg0, %arg1, %[[LSE]]
// CHECK: %[[DY:.*]] = tp.linear_grad_input %[[DL]], %[[E]]
// CHECK: %[[DHEAD:.*]] = tp.linear_grad_weight %[[DL]], %[[Y]] : (tensor<?x?x16xf32>, tensor<?x?x4xf32>) -> tensor<16x4xf32>
// Each gradient is accumulated as soon as it is complete: right after its
// last contribution, not at the end of the step.
// CHECK: %[[DX:.*]], %[[DN:.*]] = tp.rms_norm_grad %[[X]], %[[N]], %[[DY]]
// CHECK-NEXT: tp.accumulate_grad %[[DN]] into %arg5 {fqn = "norm.weight"}
// CHECK: %[[DC:.*]] = tp.linear_grad_input %[[DX]], %[[D]]
// CHECK: %[[DD:.*]] = tp.linear_grad_weight %[[DX]], %[[S]]
// CHECK-NEXT: tp.accumulate_grad %[[DD]] into %arg4 {fqn = "down.weight"}
// CHECK: %[[DA:.*]] = tp.silu_grad %[[A]], %[[DC]]
// CHECK: %[[DH:.*]] = tp.linear_grad_input %[[DA]], %[[U]]
// CHECK: %[[DU:.*]] = tp.linear_grad_weight %[[DA]], %[[H]]
// CHECK-NEXT: tp.accumulate_grad %[[DU]] into %arg3 {fqn = "up.weight"}
// The residual's two reads: their cotangents are summed.
// CHECK: %[[DHSUM:.*]] = tp.add %[[DX]], %[[DH]]
// CHECK: %[[DEMB:.*]] = tp.embedding_grad %arg0, %[[DHSUM]], %[[E]]
// The tied table: embedding and head gradients are summed.
// CHECK: %[[DE:.*]] = tp.add %[[DHEAD]], %[[DEMB]]
// CHECK-NEXT: tp.accumulate_grad %[[DE]] into %arg2 {fqn = "model.embed_tokens.weight"} : tensor<16x4xf32>
// CHECK: return %[[LOSS]] : tensor<f32>
// The optimizer step, once per optimizer step: the explicit boundary, then
// normalization, norm, clipping and the update; it returns the norm.
// CHECK-LABEL: func.func @optimizer_step() -> tensor<f32> attributes {tp.entry = "optimizer_step"}
// CHECK-NEXT: tp.optimizer_boundary
// CHECK-NEXT: tp.normalize_grads
// CHECK-NEXT: %[[NORM:.*]] = tp.grad_norm : tensor<f32>
// CHECK-NEXT: tp.clip_grads %[[NORM]] : tensor<f32>
// CHECK-NEXT: tp.optimizer_update {optimizer = "adamw"}
// CHECK-NEXT: return %[[NORM]] : tensor<f32>

// Partitioned: the loss on this rank's vocabulary block, the column-split
// gradients' partial sums all-reduced once where their sum is read, each
// gradient held as its parameter (split_dim for the split ones), the
// norm's weight gradient whole on every rank: replica class mean.
// PART-LABEL: func.func @train_step
// PART: tp.cross_entropy %{{.*}} {tp.saved, vocab_parallel} : (tensor<?x?x8xf32>
// PART: tp.cross_entropy_grad {{.*}} {vocab_parallel} : (tensor<?x?x8xf32>, tensor<?x?xi64>, tensor<?x?xi64>, tensor<?x?xf32>) -> tensor<?x?x8xf32>
// PART: %[[DY:.*]] = tp.linear_grad_input %{{.*}} : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
// PART-NEXT: %[[DYR:.*]] = shard.all_reduce %[[DY]] on @tp
// PART-NEXT: tp.linear_grad_weight {{.*}} -> tensor<8x4xf32>
// PART-NEXT: tp.rms_norm_grad %{{.*}}, %{{.*}}, %[[DYR]]
// PART-NEXT: tp.accumulate_grad {{.*}} into %arg5 {derived_reduction = #tp.grad_reduction<mean>, fqn = "norm.weight", reduction = #tp.grad_reduction<mean>} : tensor<4xf32>
// PART: tp.linear_grad_input {{.*}} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
// PART-NEXT: tp.linear_grad_weight {{.*}} -> tensor<4x4xf32>
// PART-NEXT: tp.accumulate_grad {{.*}} into %arg4 {fqn = "down.weight", split_dim = 1 : i64} : tensor<4x4xf32>
// PART: tp.linear_grad_input {{.*}} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
// PART-NEXT: shard.all_reduce
// PART-NEXT: tp.linear_grad_weight
// PART-NEXT: tp.accumulate_grad {{.*}} into %arg3 {fqn = "up.weight", split_dim = 0 : i64} : tensor<4x4xf32>
// PART: tp.embedding_grad {{.*}} {vocab_parallel} : (tensor<?x?xi64>, tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
// PART: tp.accumulate_grad {{.*}} into %arg2 {fqn = "model.embed_tokens.weight", split_dim = 0 : i64} : tensor<8x4xf32>
// PART-NOT: shard.all_gather
// PART: return

// EMITC: emitc.func @tprt_model_forward
// EMITC: emitc.func @tprt_model_train_step
// EMITC: %[[CE:.*]] = call_opaque "tprt::cross_entropy_vocab_parallel"
// EMITC-SAME: -> !emitc.opaque<"tprt::Tensors">
// EMITC-NEXT: %[[LOSS:.*]] = call_opaque "tprt::take"(%[[CE]]) {args = [0 : index, 0]}
// EMITC-NEXT: %[[LSE:.*]] = call_opaque "tprt::take"(%[[CE]]) {args = [0 : index, 1]}
// EMITC: call_opaque "tprt::accumulate_grad"({{.*}}) {args = [0 : index, 1 : index, 2 : index, #emitc.opaque<"\22model.embed_tokens.weight\22">, 0, false]} : (!emitc.opaque<"tprt::Context&">, !emitc.opaque<"tprt::Tensor">, !emitc.opaque<"tprt::Tensor">) -> ()
// EMITC: return %[[LOSS]]
// EMITC: emitc.func @tprt_model_optimizer_step(%[[CTX:.*]]: !emitc.opaque<"tprt::Context&">) -> !emitc.opaque<"tprt::Tensor">
// EMITC-NEXT: call_opaque "tprt::optimizer_boundary"(%[[CTX]])
// EMITC-NEXT: call_opaque "tprt::normalize_grads"(%[[CTX]])
// EMITC-NEXT: %[[NORM:.*]] = call_opaque "tprt::grad_norm"(%[[CTX]])
// EMITC-NEXT: call_opaque "tprt::clip_grads"(%[[CTX]], %[[NORM]])
// EMITC-NEXT: call_opaque "tprt::optimizer_update"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"\22adamw\22">, false, false]}
// EMITC-NEXT: return %[[NORM]]
module attributes {onnx.file = "m.onnx", tp.config = {architecture = "llama"}} {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "e", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %up: tensor<8x4xf32> {tp.fqn = "up.weight", tp.source = #tp.source<initializer = "u", file = "m.onnx", offset = 256, length = 128, transposed = false>},
      %down: tensor<4x8xf32> {tp.fqn = "down.weight", tp.source = #tp.source<initializer = "d", file = "m.onnx", offset = 384, length = 128, transposed = false>},
      %nw: tensor<4xf32> {tp.fqn = "norm.weight", tp.source = #tp.source<initializer = "n", file = "m.onnx", offset = 512, length = 16, transposed = false>}) -> tensor<?x?x16xf32> attributes {tp.entry = "forward"} {
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

//--- lora.mlir
// With LoRA factors only they train (PEFT's default): the base weight gets
// no gradient, and nothing computes one. The config's pad_token_id keeps
// the embedding's padding row untrained.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: tp.embedding_grad
// CHECK-NOT: into %arg3
// CHECK: tp.accumulate_grad %{{.*}} into %arg5 {fqn = "proj.lora_B.weight"}
// CHECK: tp.accumulate_grad %{{.*}} into %arg4 {fqn = "proj.lora_A.weight"}
// CHECK-NEXT: return
// CHECK: tp.optimizer_update {optimizer = "sgd"}
module attributes {tp.config = {architecture = "llama", pad_token_id = 0 : i64}} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight"},
      %w: tensor<16x4xf32> {tp.fqn = "proj.weight"},
      %a: tensor<2x4xf32> {tp.fqn = "proj.lora_A.weight"},
      %b: tensor<16x2xf32> {tp.fqn = "proj.lora_B.weight"}) -> tensor<?x?x16xf32> {
    %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %base = tp.linear %h, %w : (tensor<?x?x4xf32>, tensor<16x4xf32>) -> tensor<?x?x16xf32>
    %down = tp.linear %h, %a : (tensor<?x?x4xf32>, tensor<2x4xf32>) -> tensor<?x?x2xf32>
    %scaled = tp.scale %down by 2.0 : tensor<?x?x2xf32>
    %up = tp.linear %scaled, %b : (tensor<?x?x2xf32>, tensor<16x2xf32>) -> tensor<?x?x16xf32>
    %sum = tp.add %base, %up : tensor<?x?x16xf32>
    return %sum : tensor<?x?x16xf32>
  }
}

//--- sp.mlir
// Sequence parallelism: a row-split output reduce-scattered onto the
// sequence, a norm on the shards, its output gathered for a column-split
// linear. The backward holds each cotangent as its source was held in the
// forward (tp.hold_like), and tp-partition picks the transposes.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[DN:.*]] = tp.hold_like %{{.*}}, %[[NORMED:[^ ]*]] : tensor<?x?x4xf32>
// CHECK: tp.rms_norm_grad %{{.*}}, %{{.*}}, %[[DN]]
// CHECK: tp.hold_like %{{.*}}, %[[ROW:[^ ]*]] : tensor<?x?x4xf32>
// The gather's cotangent (a partial sum from the column-split linear) is
// reduce-scattered onto the sequence; the reduce-scatter's is gathered.
// PART-LABEL: func.func @train_step
// PART: %[[GI:.*]] = tp.linear_grad_input {{.*}} -> tensor<?x?x4xf32>
// PART: %[[RS:.*]] = shard.reduce_scatter %[[GI]] on @tp grid_axes = [0] scatter_axis = 1
// The norm weight's gradient is a partial sum over the sequence shards:
// accumulated as it is (replica class sum), not all-reduced per op.
// PART: %[[DX:.*]], %[[DW:.*]] = tp.rms_norm_grad %{{.*}}, %{{.*}}, %[[RS]]
// PART-NEXT: tp.accumulate_grad %[[DW]] into %arg4 {derived_reduction = #tp.grad_reduction<sum>, fqn = "norm.weight", reduction = #tp.grad_reduction<sum>}
// PART-NEXT: %[[AG:.*]] = shard.all_gather %[[DX]] on @tp grid_axes = [0] gather_axis = 1
// PART-NEXT: %[[DD:.*]] = tp.linear_grad_weight %[[AG]], %{{.*}} : (tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<4x4xf32>
// PART-NEXT: tp.accumulate_grad %[[DD]] into %arg3 {fqn = "down.weight", split_dim = 1 : i64}
// PART-NOT: tp.hold_like
module attributes {tp.config = {architecture = "llama"}} {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %up: tensor<8x4xf32> {tp.fqn = "up.weight"},
      %down: tensor<4x8xf32> {tp.fqn = "down.weight"},
      %nw: tensor<4xf32> {tp.fqn = "norm.weight"},
      %head: tensor<16x4xf32> {tp.fqn = "lm_head.weight"},
      %x: tensor<?x?x8xf32>) -> tensor<?x?x16xf32> {
    %s0 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %up to %s0 annotate_for_users : tensor<8x4xf32>
    %s1 = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %d = shard.shard %down to %s1 annotate_for_users : tensor<4x8xf32>
    %h = shard.shard %head to %s0 annotate_for_users : tensor<16x4xf32>
    %s2 = shard.sharding @tp split_axes = [[]] : !shard.sharding
    %n = shard.shard %nw to %s2 annotate_for_users : tensor<4xf32>
    %x0 = tp.silu %x : tensor<?x?x8xf32>
    %last = shard.sharding @tp split_axes = [[], [], [0]] : !shard.sharding
    %silu = shard.shard %x0 to %last annotate_for_users : tensor<?x?x8xf32>
    %row = tp.linear %silu, %d : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
    %seq = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %rs = shard.shard %row to %seq : tensor<?x?x4xf32>
    %normed = tp.rms_norm %rs, %n {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %whole = shard.sharding @tp split_axes = [[]] : !shard.sharding
    %g = shard.shard %normed to %whole annotate_for_users : tensor<?x?x4xf32>
    %a = tp.linear %g, %u : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %b = tp.linear %g, %h : (tensor<?x?x4xf32>, tensor<16x4xf32>) -> tensor<?x?x16xf32>
    return %b : tensor<?x?x16xf32>
  }
}

//--- classes.mlir
// Three replicated norm weights on sequence shards: each rank's weight
// gradient is a partial sum. tp-partition derives class sum for all three
// and all-reduces none of them; the plan's override (tp.grad_reduction)
// sets the class used, tp.exclude makes the copy each rank's own.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: shard.all_reduce
// CHECK: tp.accumulate_grad %{{.*}} into %arg4 {fqn = "n3.weight", owned}
// CHECK-NOT: shard.all_reduce
// CHECK: tp.accumulate_grad %{{.*}} into %arg3 {derived_reduction = #tp.grad_reduction<sum>, fqn = "n2.weight", reduction = #tp.grad_reduction<mean>}
// CHECK-NOT: shard.all_reduce
// CHECK: tp.accumulate_grad %{{.*}} into %arg2 {derived_reduction = #tp.grad_reduction<sum>, fqn = "n1.weight", reduction = #tp.grad_reduction<sum>}
module attributes {tp.config = {architecture = "llama"}} {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %n1w: tensor<4xf32> {tp.fqn = "n1.weight"},
      %n2w: tensor<4xf32> {tp.fqn = "n2.weight", tp.grad_reduction = #tp.grad_reduction<mean>},
      %n3w: tensor<4xf32> {tp.fqn = "n3.weight", tp.exclude},
      %x: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
    %seq = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %x0 = tp.silu %x : tensor<?x?x4xf32>
    %xs = shard.shard %x0 to %seq annotate_for_users : tensor<?x?x4xf32>
    %a = tp.rms_norm %xs, %n1w {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %b = tp.rms_norm %a, %n2w {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %c = tp.rms_norm %b, %n3w {epsilon = 1.0e-6 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %whole = shard.sharding @tp split_axes = [[]] : !shard.sharding
    %g = shard.shard %c to %whole annotate_for_users : tensor<?x?x4xf32>
    return %g : tensor<?x?x4xf32>
  }
}

//--- recompute.mlir
// Two decoder layers (their ops' tp.layer is 0 and 1).
// With recompute the forward keeps what enters each layer (the embedding,
// layer 0's output) and what follows them (the final norm, the head); each
// layer's backward starts by recomputing the layer's values it reads, from
// the kept input, and reads the clones. Layer 1's backward runs first.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[H:.*]] = tp.embedding {{.*}}{tp.saved}
// CHECK-NEXT: %[[A0:.*]] = tp.linear %[[H]], %{{[^ ]*}} {tp.layer = 0 : i64} :
// CHECK-NEXT: %[[S0:.*]] = tp.silu %[[A0]] {tp.layer = 0 : i64} :
// CHECK-NEXT: %[[X1:.*]] = tp.add %[[H]], %[[S0]] {tp.layer = 0 : i64, tp.saved}
// CHECK-NEXT: %[[A1:.*]] = tp.linear %[[X1]], %{{[^ ]*}} {tp.layer = 1 : i64} :
// CHECK-NEXT: %[[S1:.*]] = tp.silu %[[A1]] {tp.layer = 1 : i64} :
// CHECK-NEXT: %[[X2:.*]] = tp.add %[[X1]], %[[S1]] {tp.layer = 1 : i64, tp.saved}
// CHECK: tp.cross_entropy {{.*}}{tp.saved}
// CHECK: tp.cross_entropy_grad
// CHECK: %[[RA1:.*]] = tp.linear %[[X1]], %{{[^ ]*}} {tp.layer = 1 : i64, tp.recomputed}
// CHECK-NEXT: tp.silu_grad %[[RA1]],
// CHECK: tp.linear_grad_weight %{{.*}}, %[[X1]]
// CHECK: %[[RA0:.*]] = tp.linear %[[H]], %{{[^ ]*}} {tp.layer = 0 : i64, tp.recomputed}
// CHECK-NEXT: tp.silu_grad %[[RA0]],
// CHECK: return
// Without recompute the backward reads the layers' own values.
// KEEP-LABEL: func.func @train_step
// KEEP: tp.linear %{{.*}} {tp.layer = {{[01]}} : i64, tp.saved}
// KEEP-NOT: tp.recomputed
module attributes {tp.config = {architecture = "llama"}} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight"},
      %w0: tensor<4x4xf32> {tp.fqn = "model.layers.0.mlp.weight"},
      %w1: tensor<4x4xf32> {tp.fqn = "model.layers.1.mlp.weight"},
      %head: tensor<16x4xf32> {tp.fqn = "lm_head.weight"}) -> tensor<?x?x16xf32> {
    %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32> loc("/model/embed_tokens/Gather")
    %a0 = tp.linear %h, %w0 {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("/model/layers.0/mlp/MatMul")
    %s0 = tp.silu %a0 {tp.layer = 0 : i64} : tensor<?x?x4xf32> loc("/model/layers.0/mlp/Silu")
    %x1 = tp.add %h, %s0 {tp.layer = 0 : i64} : tensor<?x?x4xf32> loc("/model/layers.0/Add")
    %a1 = tp.linear %x1, %w1 {tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("/model/layers.1/mlp/MatMul")
    %s1 = tp.silu %a1 {tp.layer = 1 : i64} : tensor<?x?x4xf32> loc("/model/layers.1/mlp/Silu")
    %x2 = tp.add %x1, %s1 {tp.layer = 1 : i64} : tensor<?x?x4xf32> loc("/model/layers.1/Add")
    %l = tp.linear %x2, %head : (tensor<?x?x4xf32>, tensor<16x4xf32>) -> tensor<?x?x16xf32> loc("/lm_head/MatMul")
    return %l : tensor<?x?x16xf32>
  }
}

//--- errors.mlir
module attributes {tp.config = {architecture = "llama"}} {
  // expected-error @+1 {{tp-build-train-step: parameter 'w' is 'i64'; only float parameters train}}
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %e: tensor<16x4xf32> {tp.fqn = "e"},
      %w: tensor<16x4xi64> {tp.fqn = "w"}) -> tensor<?x?x4xf32> {
    %h = tp.embedding %ids, %e : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    return %h : tensor<?x?x4xf32>
  }
}

// -----

module attributes {tp.config = {architecture = "llama"}} {
  // expected-error @+1 {{tp-build-train-step: the forward has no attention_mask input, which the loss reads (the labels are the ids, the mask leaves padding out); an exporter drops an input that no layer of the model reads}}
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %w: tensor<16x4xf32> {tp.fqn = "w"}) -> tensor<?x?x4xf32> {
    %h = tp.embedding %ids, %w : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    return %h : tensor<?x?x4xf32>
  }
}

// -----

module attributes {tp.config = {architecture = "llama"}} {
  // expected-error @+1 {{tp-build-train-step: the forward has no input_ids input}}
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "tokens"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %w: tensor<16x4xf32> {tp.fqn = "w"}) -> tensor<?x?x4xf32> {
    %h = tp.embedding %ids, %w : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    return %h : tensor<?x?x4xf32>
  }
}

// -----

module attributes {tp.config = {architecture = "llama"}} {
  // expected-error @+1 {{tp-build-train-step: the forward must return the logits alone, not 2 results}}
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %w: tensor<16x4xf32> {tp.fqn = "w"}) -> (tensor<?x?x4xf32>, tensor<?x?x4xf32>) {
    %h = tp.embedding %ids, %w : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    return %h, %h : tensor<?x?x4xf32>, tensor<?x?x4xf32>
  }
}

// -----

module attributes {tp.config = {architecture = "llama"}} {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {tp.entry = "forward"} {
    return %x : tensor<4xf32>
  }
  // expected-error @+1 {{tp-build-train-step: the module already has a training step}}
  func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> attributes {tp.entry = "train_step"} {
    return %x : tensor<4xf32>
  }
}

// -----

module attributes {tp.config = {architecture = "llama"}} {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {tp.entry = "forward"} {
    return %x : tensor<4xf32>
  }
  // expected-error @+1 {{tp-build-train-step: the module already has a training step}}
  func.func @update() -> tensor<f32> attributes {tp.entry = "optimizer_step"} {
    %n = tp.grad_norm : tensor<f32>
    return %n : tensor<f32>
  }
}

//--- slices.mlir
// The parts of a fused projection: each part's cotangent is placed in
// zeros of the whole width at its offset, and the two are summed into the
// projection's output cotangent.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[GB:.*]] = tp.feature_slice_grad %{{.*}}[4] width 8 : tensor<?x?x4xf32> -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[GA:.*]] = tp.feature_slice_grad %{{.*}}[0] width 8 : tensor<?x?x4xf32> -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[DY:.*]] = tp.add %[[GB]], %[[GA]] : tensor<?x?x8xf32>
// CHECK-NEXT: %[[DW:.*]] = tp.linear_grad_weight %[[DY]], %{{.*}} : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: tp.accumulate_grad %[[DW]] into %arg2 {fqn = "fused.weight"}
module attributes {tp.config = {architecture = "llama"}} {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %w: tensor<8x4xf32> {tp.fqn = "fused.weight"},
      %x: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
    %y = tp.linear %x, %w : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %a = tp.feature_slice %y [0, 4] : tensor<?x?x8xf32> -> tensor<?x?x4xf32>
    %b = tp.feature_slice %y [4, 4] : tensor<?x?x8xf32> -> tensor<?x?x4xf32>
    %m = tp.mul %a, %b : tensor<?x?x4xf32>
    return %m : tensor<?x?x4xf32>
  }
}

//--- bf16.mlir
// Parameters held in bf16: FP32 master weights by default (auto), none
// when asked; forced (f32) on an f32 program, where the runtime has no
// narrower parameter to keep a master of.
// CHECK-LABEL: func.func @optimizer_step
// CHECK: tp.optimizer_update {master_weights, optimizer = "adamw"}
// NONE: tp.optimizer_update {optimizer = "adamw"}
// FORCED: tp.optimizer_update {master_weights, optimizer = "adamw"}
// BAD: error: tp-build-train-step: master-weights must be auto, f32 or none, got 'bf16'
module attributes {tp.config = {architecture = "llama", pad_token_id = 0 : i64}} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xbf16> {tp.fqn = "model.embed_tokens.weight"},
      %w: tensor<16x4xbf16> {tp.fqn = "lm_head.weight"}) -> tensor<?x?x16xbf16> {
    %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xbf16>) -> tensor<?x?x4xbf16>
    %logits = tp.linear %h, %w : (tensor<?x?x4xbf16>, tensor<16x4xbf16>) -> tensor<?x?x16xbf16>
    return %logits : tensor<?x?x16xbf16>
  }
}
