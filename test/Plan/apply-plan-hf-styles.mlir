// transformers' styles beyond colwise/rowwise, applied and partitioned at
// tp=2: embedding_colwise (hidden split, lookups gathered), colwise_rep
// (output gathered), rowwise_rep (a replicated input sliced locally, the
// partial sum all-reduced), replicate, local_params and all_reduce on
// blocks (no warning, no effect), sequence_parallel (a replicated input
// sliced onto the sequence shards).
// RUN: split-file %s %t
// RUN: tp-opt %t/model.mlir "--tp-apply-plan=plan=hf:%t/config.json tp=2" --verify-diagnostics | FileCheck %t/model.mlir --check-prefix=PLAN
// RUN: tp-opt %t/model.mlir "--tp-apply-plan=plan=hf:%t/config.json tp=2" --tp-lower-linear --tp-partition | FileCheck %t/model.mlir
// RUN: not tp-opt %t/model.mlir "--tp-apply-plan=plan=hf:%t/unknown.json tp=2" -o /dev/null 2>&1 | FileCheck %t/model.mlir --check-prefix=UNKNOWN

//--- config.json
{"model_type": "llama", "base_model_tp_plan": {
  "embed_tokens": "embedding_colwise",
  "layers.*.mlp.up_proj": "colwise_rep",
  "layers.*.mlp.down_proj": "rowwise_rep",
  "layers.*.mlp": "all_reduce",
  "layers.*.self_attn": "local_params",
  "layers.*.input_layernorm": "replicate",
  "norm": "sequence_parallel"}}

//--- unknown.json
{"model_type": "llama", "base_model_tp_plan": {"layers.*.mlp.up_proj": "colwise_rep", "layers.*.mlp.down_proj": "rowwise_scatter"}}

//--- model.mlir
// PLAN: module attributes {tp.plan_source = "transformers plan: the base_model_tp_plan of '{{.*}}config.json', keys under 'model.', with LlamaForCausalLM._tp_plan"}
// PLAN: tp.fqn = "model.embed_tokens.weight", tp.placement = #tp.placement<split(1), key = "model.embed_tokens">
// PLAN-SAME: tp.fqn = "model.layers.0.input_layernorm.weight", tp.placement = #tp.placement<replicated, grad = mean, key = "model.layers.*.input_layernorm">
// PLAN-SAME: tp.fqn = "model.layers.0.mlp.up_proj.weight", tp.placement = #tp.placement<split(0), key = "model.layers.*.mlp.up_proj">
// PLAN-SAME: tp.fqn = "model.layers.0.mlp.down_proj.weight", tp.placement = #tp.placement<split(1), key = "model.layers.*.mlp.down_proj">
// PLAN-SAME: tp.fqn = "model.norm.weight", tp.placement = #tp.placement<replicated, grad = sum, key = "model.norm">
// CHECK: %[[E:.*]] = tp.embedding %arg0, %arg1 : (tensor<?x?xi64>, tensor<128x32xf32>) -> tensor<?x?x32xf32>
// CHECK-NEXT: %[[EG:.*]] = shard.all_gather %[[E]] on @tp grid_axes = [0] gather_axis = 2 : tensor<?x?x32xf32> -> tensor<?x?x64xf32>
// CHECK: %[[U:.*]] = tp.linear %{{.*}}, %arg3 {{.*}} -> tensor<?x?x64xf32>
// CHECK-NEXT: %[[UG:.*]] = shard.all_gather %[[U]] on @tp grid_axes = [0] gather_axis = 2 : tensor<?x?x64xf32> -> tensor<?x?x128xf32>
// CHECK-NEXT: %[[A:.*]] = tp.silu %[[UG]]
// CHECK-NEXT: %[[S:.*]] = shard.all_slice %[[A]] on @tp grid_axes = [0] slice_axis = 2 : tensor<?x?x128xf32> -> tensor<?x?x64xf32>
// CHECK-NEXT: %[[D:.*]] = tp.linear %[[S]], %arg4 {{.*}}: (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[D]]
// CHECK-NEXT: %[[H:.*]] = tp.add %[[EG]], %[[R]]
// CHECK-NEXT: %[[SEQ:.*]] = shard.all_slice %[[H]] on @tp grid_axes = [0] slice_axis = 1 : tensor<?x?x64xf32> -> tensor<?x?x64xf32>
// CHECK-NEXT: %[[N:.*]] = tp.rms_norm %[[SEQ]], %arg5
// The unplanned head runs per token on the sequence shards; the logits are
// gathered back.
// CHECK-NEXT: %[[L:.*]] = tp.linear %[[N]], %arg6
// CHECK-NEXT: shard.all_gather %[[L]] on @tp grid_axes = [0] gather_axis = 1
// UNKNOWN: error: plan 'hf:{{.*}}unknown.json': '{{.*}}unknown.json': plan key 'layers.*.mlp.down_proj': unknown style 'rowwise_scatter' (not a transformers 5.23 style)
// The mlp block holds up/down_proj (no warning); this program has no
// attention block, and names its head model.head.
// expected-warning @+2 {{plan key 'model.layers.*.self_attn' matches no module}}
// expected-warning @+1 {{plan key 'lm_head' matches no module}}
func.func @forward(%ids: tensor<?x?xi64>,
    %emb: tensor<128x64xf32> {tp.fqn = "model.embed_tokens.weight"},
    %n0: tensor<64xf32> {tp.fqn = "model.layers.0.input_layernorm.weight"},
    %up: tensor<128x64xf32> {tp.fqn = "model.layers.0.mlp.up_proj.weight"},
    %down: tensor<64x128xf32> {tp.fqn = "model.layers.0.mlp.down_proj.weight"},
    %nf: tensor<64xf32> {tp.fqn = "model.norm.weight"},
    %head: tensor<128x64xf32> {tp.fqn = "model.head.weight"}) -> tensor<?x?x128xf32> {
  %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<128x64xf32>) -> tensor<?x?x64xf32>
  %x = tp.rms_norm %h, %n0 {epsilon = 1.0e-6 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %u = tp.linear %x, %up : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %a = tp.silu %u : tensor<?x?x128xf32>
  %d = tp.linear %a, %down : (tensor<?x?x128xf32>, tensor<64x128xf32>) -> tensor<?x?x64xf32>
  %r = tp.add %h, %d : tensor<?x?x64xf32>
  %n = tp.rms_norm %r, %nf {epsilon = 1.0e-6 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %l = tp.linear %n, %head : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  return %l : tensor<?x?x128xf32>
}
