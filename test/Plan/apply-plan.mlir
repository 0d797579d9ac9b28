// RUN: split-file %s %t
// RUN: tp-opt %t/ok.mlir "--tp-apply-plan=plan=llama tp=2" --verify-diagnostics | FileCheck %t/ok.mlir
// RUN: tp-opt %t/heads.mlir "--tp-apply-plan=plan=llama tp=6" --verify-diagnostics
// RUN: tp-opt %t/kv.mlir "--tp-apply-plan=plan=llama tp=4" --verify-diagnostics | FileCheck %t/kv.mlir
// RUN: tp-opt %t/kvrow.mlir "--tp-apply-plan=plan=llama tp=4" --verify-diagnostics
// RUN: tp-opt %t/kv3.mlir "--tp-apply-plan=plan=llama tp=3" --verify-diagnostics
// RUN: tp-opt %t/width.mlir "--tp-apply-plan=plan=llama tp=4" --verify-diagnostics
// RUN: tp-opt %t/vocab.mlir "--tp-apply-plan=plan=llama tp=4" --verify-diagnostics
// RUN: tp-opt %t/every.mlir "--tp-apply-plan=plan=llama tp=6" --verify-diagnostics
// RUN: tp-opt %t/tied.mlir "--tp-apply-plan=plan=file:%t/plan_head.json tp=2" --verify-diagnostics
// RUN: tp-opt %t/options.mlir "--tp-apply-plan=plan=mistral" --verify-diagnostics
// RUN: tp-opt %t/hf.mlir "--tp-apply-plan=plan=hf:%t/hf_plan.json tp=2" --verify-diagnostics | FileCheck %t/hf.mlir
// RUN: tp-opt %t/hf.mlir "--tp-apply-plan=plan=hf:%t/hf_class.json tp=2" --verify-diagnostics | FileCheck %t/hf.mlir
// RUN: tp-opt %t/hferr.mlir "--tp-apply-plan=plan=hf:%t/hf_unknown.json" --verify-diagnostics
// RUN: tp-opt %t/hferr2.mlir "--tp-apply-plan=plan=hf:%t/hf_packed.json" --verify-diagnostics
// RUN: tp-opt %t/hfnemotron.mlir "--tp-apply-plan=plan=hf:%t/hf_nemotron.json" --verify-diagnostics | FileCheck %t/hfnemotron.mlir
// RUN: sed -e 's/"model\./"backbone./' %t/hfnemotron.mlir > %t/hfbackbone.mlir
// RUN: tp-opt %t/hfbackbone.mlir "--tp-apply-plan=plan=hf:%t/hf_nemotron.json" 2>&1 | FileCheck %t/hfnemotron.mlir --check-prefix=BACKBONE
// RUN: tp-opt %t/hferr4.mlir "--tp-apply-plan=plan=hf:%t/missing.json" --verify-diagnostics
// RUN: tp-opt %t/json.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2" --verify-diagnostics | FileCheck %t/json.mlir
// RUN: tp-opt %t/jsonerr.mlir "--tp-apply-plan=plan=file:%t/plan.json sp=true" --verify-diagnostics
// RUN: tp-opt %t/jsonsp.mlir "--tp-apply-plan=plan=file:%t/plan_sp.json tp=2" --verify-diagnostics | FileCheck %t/jsonsp.mlir
// RUN: tp-opt %t/hfsp.mlir "--tp-apply-plan=plan=hf:%t/hf_class.json sp=true" --verify-diagnostics
// RUN: tp-opt %t/jsonerr4.mlir "--tp-apply-plan=plan=file:%t/plan_colseq.json" --verify-diagnostics
// RUN: tp-opt %t/jsonerr2.mlir "--tp-apply-plan=plan=file:%t/plan_layout.json" --verify-diagnostics
// RUN: tp-opt %t/jsonerr3.mlir "--tp-apply-plan=plan=file:%t/plan_style.json" --verify-diagnostics
// RUN: tp-opt %t/sp.mlir "--tp-apply-plan=plan=nemotron_h sp=true" --verify-diagnostics
// RUN: tp-opt %t/fused.mlir "--tp-apply-plan=plan=file:%t/plan_fused.json tp=4" --verify-diagnostics | FileCheck %t/fused.mlir

//--- ok.mlir
// q/k/v column-split, o row-split, the norm replicated; keys of the llama
// plan this small program lacks are warnings.
// CHECK: shard.grid @tp(shape = 2)
// CHECK: func.func @forward(%arg0: tensor<?x?x64xf32>, %arg1: tensor<64xf32> {tp.fqn = "model.layers.0.input_layernorm.weight", tp.placement = #tp.placement<replicated, grad = mean>}, %arg2: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight", tp.placement = #tp.placement<split(0), key = "model.layers.*.self_attn.q_proj">}
// CHECK-SAME: %arg5: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.o_proj.weight", tp.placement = #tp.placement<split(1), key = "model.layers.*.self_attn.o_proj">}
// CHECK: %[[R:.*]] = shard.sharding @tp split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-NEXT: %[[N:.*]] = shard.shard %arg1 to %[[R]] annotate_for_users : tensor<64xf32>
// CHECK-NEXT: %[[C:.*]] = shard.sharding @tp split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK-NEXT: %[[Q:.*]] = shard.shard %arg2 to %[[C]] annotate_for_users : tensor<64x64xf32>
// CHECK: %[[RW:.*]] = shard.sharding @tp split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[O:.*]] = shard.shard %arg5 to %[[RW]] annotate_for_users : tensor<64x64xf32>
// CHECK: tp.rms_norm %arg0, %[[N]]
// CHECK: tp.linear %{{.*}}, %[[Q]]
// CHECK: tp.linear %{{.*}}, %[[O]]
// expected-warning @+5 {{plan key 'model.embed_tokens' matches no module}}
// expected-warning @+4 {{plan key 'model.layers.*.mlp.gate_proj' matches no module}}
// expected-warning @+3 {{plan key 'model.layers.*.mlp.up_proj' matches no module}}
// expected-warning @+2 {{plan key 'model.layers.*.mlp.down_proj' matches no module}}
// expected-warning @+1 {{plan key 'lm_head' matches no module}}
func.func @forward(%x: tensor<?x?x64xf32>,
    %n: tensor<64xf32> {tp.fqn = "model.layers.0.input_layernorm.weight"},
    %wq: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"},
    %wk: tensor<32x64xf32> {tp.fqn = "model.layers.0.self_attn.k_proj.weight"},
    %wv: tensor<32x64xf32> {tp.fqn = "model.layers.0.self_attn.v_proj.weight"},
    %wo: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.o_proj.weight"}) -> tensor<?x?x64xf32> {
  %h = tp.rms_norm %x, %n {epsilon = 1.0e-6 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %q = tp.linear %h, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = tp.linear %h, %wk : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %v = tp.linear %h, %wv : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %a = tp.attention %q, %k, %v {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  %o = tp.linear %a, %wo : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  return %o : tensor<?x?x64xf32>
}

//--- heads.mlir
// 12 features split 6 ways, but 4 heads of 3 do not (both the query and
// the KV heads: each is reported).
// expected-warning @+1 {{matches no module}}
func.func @forward(%x: tensor<?x?x12xf32>,
    %wq: tensor<12x12xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"},
    %wk: tensor<12x12xf32> {tp.fqn = "model.layers.0.self_attn.k_proj.weight"}) -> tensor<?x?x12xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x12xf32>, tensor<12x12xf32>) -> tensor<?x?x12xf32>
  %k = tp.linear %x, %wk : (tensor<?x?x12xf32>, tensor<12x12xf32>) -> tensor<?x?x12xf32>
  // expected-error @+2 {{plan key 'model.layers.*.self_attn.q_proj': 4 attention heads are not divisible by tp 6}}
  // expected-error @+1 {{plan key 'model.layers.*.self_attn.k_proj': 4 KV heads are not divisible by tp 6 (nor tp by them)}}
  %a = tp.attention %q, %k, %k {head_dim = 3 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.5 : f64} : (tensor<?x?x12xf32>, tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  return %a : tensor<?x?x12xf32>
}

//--- kv.mlir
// 2 KV heads on 4 ranks: k and v stay split on their output features, and
// each of their 2 blocks is shared by the 2 ranks of one query group.
// CHECK: %arg2: tensor<32x64xf32> {tp.fqn = "model.layers.0.self_attn.k_proj.weight", tp.placement = #tp.placement<split(0), replicas = 2, key = "model.layers.*.self_attn.k_proj">}
// CHECK-SAME: %arg3: tensor<32x64xf32> {tp.fqn = "model.layers.0.self_attn.v_proj.weight", tp.placement = #tp.placement<split(0), replicas = 2, key = "model.layers.*.self_attn.v_proj">}
// expected-warning @+1 {{matches no module}}
func.func @forward(%x: tensor<?x?x64xf32>,
    %wq: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"},
    %wk: tensor<32x64xf32> {tp.fqn = "model.layers.0.self_attn.k_proj.weight"},
    %wv: tensor<32x64xf32> {tp.fqn = "model.layers.0.self_attn.v_proj.weight"}) -> tensor<?x?x64xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = tp.linear %x, %wk : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %v = tp.linear %x, %wv : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %a = tp.attention %q, %k, %v {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

//--- kvrow.mlir
// KV-head replication needs k and v column-split; a v projection the plan
// leaves replicated cannot follow its heads.
// expected-warning @+1 {{matches no module}}
func.func @forward(%x: tensor<?x?x64xf32>,
    %wq: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"},
    %wk: tensor<32x64xf32> {tp.fqn = "model.layers.0.self_attn.k_proj.weight"},
    %wv: tensor<32x64xf32> {tp.fqn = "model.layers.0.self_attn.value.weight"}) -> tensor<?x?x64xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = tp.linear %x, %wk : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %v = tp.linear %x, %wv : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  // expected-error @+1 {{plan key 'model.layers.*.self_attn.k_proj': 2 KV heads on 4 ranks need the k and v projections split on their output features}}
  %a = tp.attention %q, %k, %v {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  return %a : tensor<?x?x64xf32>
}

//--- kv3.mlir
// 2 KV heads of 12 features: 24 split 3 ways, but the heads do not.
// expected-warning @+1 {{matches no module}}
func.func @forward(%x: tensor<?x?x48xf32>,
    %wq: tensor<72x48xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"},
    %wk: tensor<24x48xf32> {tp.fqn = "model.layers.0.self_attn.k_proj.weight"}) -> tensor<?x?x72xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x48xf32>, tensor<72x48xf32>) -> tensor<?x?x72xf32>
  %k = tp.linear %x, %wk : (tensor<?x?x48xf32>, tensor<24x48xf32>) -> tensor<?x?x24xf32>
  // expected-error @+1 {{plan key 'model.layers.*.self_attn.k_proj': 2 KV heads are not divisible by tp 3 (nor tp by them)}}
  %a = tp.attention %q, %k, %k {causal, head_dim = 12 : i64, num_heads = 6 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<?x?x72xf32>, tensor<?x?x24xf32>, tensor<?x?x24xf32>) -> tensor<?x?x72xf32>
  return %a : tensor<?x?x72xf32>
}

//--- width.mlir
// expected-warning @+1 {{matches no module}}
func.func @forward(%x: tensor<?x?x64xf32>,
    %wg: tensor<90x64xf32> {tp.fqn = "model.layers.0.mlp.gate_proj.weight"}) -> tensor<?x?x90xf32> {
  // expected-error @+1 {{plan key 'model.layers.*.mlp.gate_proj': 90 output features are not divisible by tp 4}}
  %g = tp.linear %x, %wg : (tensor<?x?x64xf32>, tensor<90x64xf32>) -> tensor<?x?x90xf32>
  return %g : tensor<?x?x90xf32>
}

//--- vocab.mlir
// expected-warning @+1 {{matches no module}}
func.func @forward(%ids: tensor<?x?xi64>,
    %e: tensor<130x64xf32> {tp.fqn = "model.embed_tokens.weight"}) -> tensor<?x?x64xf32> {
  // expected-error @+1 {{plan key 'model.embed_tokens': 130 vocabulary rows are not divisible by tp 4}}
  %h = tp.embedding %ids, %e : (tensor<?x?xi64>, tensor<130x64xf32>) -> tensor<?x?x64xf32>
  return %h : tensor<?x?x64xf32>
}

//--- every.mlir
// Every distinct violation is reported, once per plan key and cut (layer 1
// repeats layer 0's heads): the heads and the vocabulary.
// expected-warning @+1 {{matches no module}}
func.func @forward(%ids: tensor<?x?xi64>,
    %e: tensor<130x12xf32> {tp.fqn = "model.embed_tokens.weight"},
    %wq0: tensor<12x12xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"},
    %wq1: tensor<12x12xf32> {tp.fqn = "model.layers.1.self_attn.q_proj.weight"}) -> tensor<?x?x12xf32> {
  // expected-error @+1 {{plan key 'model.embed_tokens': 130 vocabulary rows are not divisible by tp 6}}
  %x = tp.embedding %ids, %e : (tensor<?x?xi64>, tensor<130x12xf32>) -> tensor<?x?x12xf32>
  %q0 = tp.linear %x, %wq0 : (tensor<?x?x12xf32>, tensor<12x12xf32>) -> tensor<?x?x12xf32>
  // expected-error @+2 {{plan key 'model.layers.*.self_attn.q_proj': 4 attention heads are not divisible by tp 6}}
  // expected-error @+1 {{plan key 'model.layers.*.self_attn.q_proj': 4 KV heads are not divisible by tp 6 (nor tp by them)}}
  %a0 = tp.attention %q0, %q0, %q0 {head_dim = 3 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.5 : f64} : (tensor<?x?x12xf32>, tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  %q1 = tp.linear %a0, %wq1 : (tensor<?x?x12xf32>, tensor<12x12xf32>) -> tensor<?x?x12xf32>
  %a1 = tp.attention %q1, %q1, %q1 {head_dim = 3 : i64, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.5 : f64} : (tensor<?x?x12xf32>, tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
  return %a1 : tensor<?x?x12xf32>
}

//--- plan_head.json
{"lm_head": "colwise"}

//--- tied.mlir
// A tied table the plan splits for lm_head but leaves to the embedding:
// both sides are named, the one no key places as such.
// expected-error @+1 {{tied parameter 'model.embed_tokens.weight' is split on dim 0 by plan key 'lm_head' (tp.linear) and replicated (no plan key places its tp.embedding)}}
func.func @forward(%ids: tensor<?x?xi64>,
    %e: tensor<128x64xf32> {tp.fqn = "model.embed_tokens.weight"}) -> tensor<?x?x128xf32> {
  %x = tp.embedding %ids, %e : (tensor<?x?xi64>, tensor<128x64xf32>) -> tensor<?x?x64xf32>
  %l = tp.linear %x, %e : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  return %l : tensor<?x?x128xf32>
}

//--- options.mlir
// expected-error @+1 {{plan 'mistral': no such plan (auto, llama, qwen2, qwen3, gemma3, nemotron_h, default, hf:CONFIG.json, file:PLAN.json)}}
module {
  func.func @forward() {
    return
  }
}

//--- hf_plan.json
{"model_type": "qwen3", "base_model_tp_plan": {
  "layers.*.self_attn.q_proj": "colwise", "layers.*.self_attn.k_proj": "colwise",
  "layers.*.self_attn.v_proj": "colwise", "layers.*.self_attn.o_proj": "rowwise",
  "layers.*.self_attn.q_norm": "replicated_with_grad_allreduce",
  "layers.*.mlp.gate_proj": "colwise", "layers.*.mlp.up_proj": "colwise",
  "layers.*.mlp.down_proj": "rowwise"}}
//--- hf_class.json
{"model_type": "qwen3", "hidden_size": 64}
//--- hf_unknown.json
{"model_type": "llama", "base_model_tp_plan": {"layers.*.mlp.up_proj": "columnwise"}}
//--- hf_packed.json
{"model_type": "phi3", "base_model_tp_plan": {"layers.*.mlp.gate_up_proj": "packed_colwise"}}
//--- hf_nemotron.json
{"model_type": "nemotron_h", "mamba_num_heads": 8}
//--- hf.mlir
// An HF plan: keys under `model.`, the embedding added as vocabulary-split,
// lm_head column-split, and replicated_with_grad_allreduce kept as the sum
// class (given by the config, or by transformers' Qwen3 class plan).
// CHECK: %arg1: tensor<128x64xf32> {tp.fqn = "model.embed_tokens.weight", tp.placement = #tp.placement<split(0), key = "model.embed_tokens">}
// CHECK-SAME: %arg2: tensor<16xf32> {tp.fqn = "model.layers.0.self_attn.q_norm.weight", tp.placement = #tp.placement<replicated, grad = sum, key = "model.layers.*.self_attn.q_norm">}
// CHECK-SAME: %arg3: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight", tp.placement = #tp.placement<split(0), key = "model.layers.*.self_attn.q_proj">}
// CHECK-SAME: %arg4: tensor<128x64xf32> {tp.fqn = "lm_head.weight", tp.placement = #tp.placement<split(0), key = "lm_head">}
// expected-warning @+1 {{matches no module}}
func.func @forward(%ids: tensor<?x?xi64>,
    %emb: tensor<128x64xf32> {tp.fqn = "model.embed_tokens.weight"},
    %qn: tensor<16xf32> {tp.fqn = "model.layers.0.self_attn.q_norm.weight"},
    %wq: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"},
    %head: tensor<128x64xf32> {tp.fqn = "lm_head.weight"}) -> tensor<?x?x128xf32> {
  %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<128x64xf32>) -> tensor<?x?x64xf32>
  %q = tp.linear %h, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %n = tp.rms_norm %q, %qn {epsilon = 1.0e-6 : f64, group_size = 16 : i64} : (tensor<?x?x64xf32>, tensor<16xf32>) -> tensor<?x?x64xf32>
  %l = tp.linear %n, %head : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  return %l : tensor<?x?x128xf32>
}

//--- hferr.mlir
// expected-error-re @+1 {{plan 'hf:{{.*}}hf_unknown.json': '{{.*}}hf_unknown.json': plan key 'layers.*.mlp.up_proj': unknown style 'columnwise'}}
module {
  func.func @forward() {
    return
  }
}

//--- hferr2.mlir
// A style tp-opt does not implement is refused where it places a module.
func.func @forward(%x: tensor<?x?x64xf32>,
    %w: tensor<256x64xf32> {tp.fqn = "model.layers.0.mlp.gate_up_proj.weight"}) -> tensor<?x?x256xf32> {
  // expected-error @+1 {{plan key 'model.layers.*.mlp.gate_up_proj': style 'packed_colwise' (each rank's block of every part of a fused projection (gate_up_proj, qkv_proj); tp-opt splits one as colwise_gather_output) is not supported}}
  %y = tp.linear %x, %w : (tensor<?x?x64xf32>, tensor<256x64xf32>) -> tensor<?x?x256xf32>
  return %y : tensor<?x?x256xf32>
}

//--- hfnemotron.mlir
// transformers' NemotronHConfig plan: the embeddings vocabulary-split
// (embedding_rowwise, under the inner model's prefix); its MoE expert keys
// match no module of a dense model (warnings, not errors); no lm_head entry.
// CHECK: tp.fqn = "model.embeddings.weight", tp.placement = #tp.placement<split(0), key = "model.embeddings">
// CHECK-SAME: tp.fqn = "model.layers.0.mixer.up_proj.weight", tp.placement = #tp.placement<replicated, grad = mean>
// CHECK-SAME: tp.fqn = "lm_head.weight", tp.placement = #tp.placement<replicated, grad = mean>
// Under the remote code's `backbone.` names, the keys follow the prefix.
// BACKBONE: warning: plan key 'backbone.layers.*.mixer.experts.up_proj' matches no module
// BACKBONE: tp.fqn = "backbone.embeddings.weight", tp.placement = #tp.placement<split(0), key = "backbone.embeddings">
// expected-warning @+3 {{plan key 'model.layers.*.mixer.experts.up_proj' matches no module}}
// expected-warning @+2 {{plan key 'model.layers.*.mixer.experts.down_proj' matches no module}}
// expected-warning @+1 {{plan key 'model.layers.*.mixer.experts' matches no module}}
func.func @forward(%ids: tensor<?x?xi64>,
    %emb: tensor<128x64xf32> {tp.fqn = "model.embeddings.weight"},
    %up: tensor<64x64xf32> {tp.fqn = "model.layers.0.mixer.up_proj.weight"},
    %head: tensor<128x64xf32> {tp.fqn = "lm_head.weight"}) -> tensor<?x?x128xf32> {
  %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<128x64xf32>) -> tensor<?x?x64xf32>
  %u = tp.linear %h, %up : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %l = tp.linear %u, %head : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  return %l : tensor<?x?x128xf32>
}

//--- hferr4.mlir
// expected-error-re @+1 {{plan 'hf:{{.*}}missing.json': cannot read '{{.*}}missing.json': No such file or directory}}
module {
  func.func @forward() {
    return
  }
}

//--- plan.json
{"model.layers.*.self_attn.q_proj": {"style": "colwise", "input_layouts": "replicate", "use_local_output": true},
 "model.layers.0.self_attn.q_proj": "rowwise",
 "model.layers.*.self_attn.q_norm": "replicated_with_grad_allreduce",
 "lm_head": {"style": "colwise", "output_layouts": "replicate"},
 "model.layers.*.mlp.up_proj": "colwise"}
//--- plan_sp.json
{"model.embed_tokens": {"style": "rowwise", "output_layouts": "shard(1)"},
 "model.norm": "sequence_parallel",
 "lm_head": {"style": "colwise", "input_layouts": "shard(1)"}}
//--- plan_layout.json
{"lm_head": {"style": "colwise", "output_layouts": "shard(0)"}}
//--- plan_colseq.json
{"lm_head": {"style": "colwise", "output_layouts": "shard(1)"}}
//--- plan_style.json
{"lm_head": {"style": "colwise", "layouts": "replicate"}}
//--- json.mlir
// A user plan, used verbatim (the embedding stays replicated: no key); the
// key with fewer wildcards wins for layer 0's q_proj (rowwise: split dim 1).
// CHECK: %arg1: tensor<128x64xf32> {tp.fqn = "model.embed_tokens.weight", tp.placement = #tp.placement<replicated, grad = mean>}
// CHECK-SAME: %arg2: tensor<16xf32> {tp.fqn = "model.layers.0.self_attn.q_norm.weight", tp.placement = #tp.placement<replicated, grad = sum, key = "model.layers.*.self_attn.q_norm">}
// CHECK-SAME: %arg3: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight", tp.placement = #tp.placement<split(1), key = "model.layers.0.self_attn.q_proj">}
// CHECK-SAME: %arg4: tensor<128x64xf32> {tp.fqn = "lm_head.weight", tp.placement = #tp.placement<split(0), key = "lm_head">}
// expected-warning @+2 {{plan key 'model.layers.*.self_attn.q_proj' matches no module}}
// expected-warning @+1 {{plan key 'model.layers.*.mlp.up_proj' matches no module}}
func.func @forward(%ids: tensor<?x?xi64>,
    %emb: tensor<128x64xf32> {tp.fqn = "model.embed_tokens.weight"},
    %qn: tensor<16xf32> {tp.fqn = "model.layers.0.self_attn.q_norm.weight"},
    %wq: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"},
    %head: tensor<128x64xf32> {tp.fqn = "lm_head.weight"}) -> tensor<?x?x128xf32> {
  %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<128x64xf32>) -> tensor<?x?x64xf32>
  %q = tp.linear %h, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %n = tp.rms_norm %q, %qn {epsilon = 1.0e-6 : f64, group_size = 16 : i64} : (tensor<?x?x64xf32>, tensor<16xf32>) -> tensor<?x?x64xf32>
  %l = tp.linear %n, %head : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  return %l : tensor<?x?x128xf32>
}

//--- jsonerr.mlir
// expected-error-re @+1 {{sp=true, but the JSON plan has no sequence_parallel module nor shard(1) layout (a JSON plan is used verbatim)}}
module {
  func.func @forward() {
    return
  }
}

//--- jsonerr4.mlir
// expected-error-re @+1 {{plan key 'lm_head': a colwise module gives an output split on its last dimension or replicated}}
module {
  func.func @forward() {
    return
  }
}

//--- hfsp.mlir
// expected-error-re @+1 {{plan 'hf:{{.*}}hf_class.json': transformers' base_model_tp_plan has no sequence-parallel form (use a built-in plan, or a JSON plan with shard(1) layouts)}}
module {
  func.func @forward() {
    return
  }
}

//--- jsonsp.mlir
// A JSON plan with sequence parallelism: the embedding reduce-scatters onto
// the sequence, the final norm runs on sequence shards (sum class), and
// lm_head's input is gathered back (annotated replicated for its users).
// CHECK: %arg2: tensor<64xf32> {tp.fqn = "model.norm.weight", tp.placement = #tp.placement<replicated, grad = sum, key = "model.norm">}
// CHECK: %[[E:.*]] = tp.embedding
// CHECK-NEXT: %[[SEQ:.*]] = shard.sharding @tp split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[H:.*]] = shard.shard %[[E]] to %[[SEQ]] : tensor<?x?x64xf32>
// CHECK-NEXT: %[[N:.*]] = tp.rms_norm %[[H]]
// CHECK-NEXT: %[[REP:.*]] = shard.sharding @tp split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-NEXT: %[[G:.*]] = shard.shard %[[N]] to %[[REP]] annotate_for_users : tensor<?x?x64xf32>
// CHECK-NEXT: tp.linear %[[G]]
func.func @forward(%ids: tensor<?x?xi64>,
    %emb: tensor<128x64xf32> {tp.fqn = "model.embed_tokens.weight"},
    %nw: tensor<64xf32> {tp.fqn = "model.norm.weight"},
    %head: tensor<128x64xf32> {tp.fqn = "lm_head.weight"}) -> tensor<?x?x128xf32> {
  %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<128x64xf32>) -> tensor<?x?x64xf32>
  %n = tp.rms_norm %h, %nw {epsilon = 1.0e-6 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %l = tp.linear %n, %head : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  return %l : tensor<?x?x128xf32>
}

//--- jsonerr2.mlir
// expected-error-re @+1 {{plan 'file:{{.*}}plan_layout.json': '{{.*}}plan_layout.json': plan key 'lm_head': layout 'shard(0)' is not supported (replicate, shard(-1), shard(1))}}
module {
  func.func @forward() {
    return
  }
}

//--- jsonerr3.mlir
// expected-error-re @+1 {{plan key 'lm_head': unknown field 'layouts'}}
module {
  func.func @forward() {
    return
  }
}

//--- sp.mlir
// expected-error @+1 {{NemotronH does not support sequence parallelism (its Mamba mixers run on whole sequences)}}
module {
  func.func @forward() {
    return
  }
}

//--- plan_fused.json
{"model.layers.*.self_attn.qkv_proj": "colwise_gather_output",
 "model.layers.*.self_attn.o_proj": {"style": "rowwise", "input_layouts": "replicate"}}
//--- fused.mlir
// Transformers' Phi-3 plan as JSON: the fused projection's output is
// gathered; the row-split o_proj takes its block of a replicated input
// (input_layouts replicate: an annotation for the linear, split on the
// features). The attention reads parts of the fused output, so its heads
// decide no KV replication of the fused weight.
// CHECK: %arg1: tensor<128x64xf32> {tp.fqn = "model.layers.0.self_attn.qkv_proj.weight", tp.placement = #tp.placement<split(0), key = "model.layers.*.self_attn.qkv_proj">}
// CHECK-SAME: %arg2: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.o_proj.weight", tp.placement = #tp.placement<split(1), key = "model.layers.*.self_attn.o_proj">}
// CHECK: %[[REP:.*]] = shard.sharding @tp split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-NEXT: %[[QKV:.*]] = shard.shard %{{.*}} to %[[REP]] : tensor<?x?x128xf32>
// CHECK: %[[A:.*]] = tp.attention
// CHECK-NEXT: %[[SPLIT:.*]] = shard.sharding @tp split_axes = {{\[\[}}], [], [0]] : !shard.sharding
// CHECK-NEXT: %[[X:.*]] = shard.shard %[[A]] to %[[SPLIT]] annotate_for_users : tensor<?x?x64xf32>
// CHECK-NEXT: tp.linear %[[X]], %{{.*}} :
func.func @forward(%x: tensor<?x?x64xf32>,
    %wqkv: tensor<128x64xf32> {tp.fqn = "model.layers.0.self_attn.qkv_proj.weight"},
    %wo: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.o_proj.weight"}) -> tensor<?x?x64xf32> {
  %qkv = tp.linear %x, %wqkv : (tensor<?x?x64xf32>, tensor<128x64xf32>) -> tensor<?x?x128xf32>
  %q = tp.feature_slice %qkv [0, 64] : tensor<?x?x128xf32> -> tensor<?x?x64xf32>
  %k = tp.feature_slice %qkv [64, 32] : tensor<?x?x128xf32> -> tensor<?x?x32xf32>
  %v = tp.feature_slice %qkv [96, 32] : tensor<?x?x128xf32> -> tensor<?x?x32xf32>
  %a = tp.attention %q, %k, %v {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  %o = tp.linear %a, %wo : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  return %o : tensor<?x?x64xf32>
}
