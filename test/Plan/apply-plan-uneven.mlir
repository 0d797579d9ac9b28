// Uneven splits (allow-uneven): ceil/floor shares in whole units, as
// #tp.placement starts and sizes (one range per rank, in elements).
// RUN: split-file %s %t
// RUN: tp-opt %t/attn.mlir "--tp-apply-plan=plan=llama tp=2 allow-uneven=true" --verify-diagnostics | FileCheck %t/attn.mlir --check-prefix=TP2
// RUN: tp-opt %t/attn.mlir "--tp-apply-plan=plan=llama tp=4 allow-uneven=true" --verify-diagnostics | FileCheck %t/attn.mlir --check-prefix=TP4
// RUN: tp-opt %t/attn.mlir "--tp-apply-plan=plan=llama tp=5 allow-uneven=true" --verify-diagnostics | FileCheck %t/attn.mlir --check-prefix=TP5
// RUN: tp-opt %t/attn.mlir "--tp-apply-plan=plan=llama tp=3" --verify-diagnostics | FileCheck %t/attn.mlir --check-prefix=EVEN
// RUN: tp-opt %t/mlp.mlir "--tp-apply-plan=plan=llama tp=3 allow-uneven=true" --verify-diagnostics | FileCheck %t/mlp.mlir
// RUN: tp-opt %t/default.mlir "--tp-apply-plan=plan=llama tp=3" --verify-diagnostics
// RUN: tp-opt %t/few.mlir "--tp-apply-plan=plan=llama tp=8 allow-uneven=true" --verify-diagnostics

//--- attn.mlir
// 6 query heads over 3 KV heads (head_dim 16).
// tp=2 (no more ranks than KV heads): whole KV heads 2 + 1, each with its
// group's 2 query heads.
// TP2-DAG: tp.placement = #tp.placement<split(0), starts = [0, 64], sizes = [64, 32], key = "model.layers.*.self_attn.q_proj">
// TP2-DAG: tp.placement = #tp.placement<split(0), starts = [0, 32], sizes = [32, 16], key = "model.layers.*.self_attn.k_proj">
// TP2-DAG: tp.placement = #tp.placement<split(0), starts = [0, 32], sizes = [32, 16], key = "model.layers.*.self_attn.v_proj">
// TP2-DAG: tp.placement = #tp.placement<split(1), starts = [0, 64], sizes = [64, 32], key = "model.layers.*.self_attn.o_proj">
// tp=4: ranks over KV heads 2 + 1 + 1; KV head 0's 2 query heads over its
// 2 ranks, the others' on one rank each. KV head 0 is replicated on ranks
// 0 and 1.
// TP4-DAG: tp.placement = #tp.placement<split(0), starts = [0, 16, 32, 64], sizes = [16, 16, 32, 32], key = "model.layers.*.self_attn.q_proj">
// TP4-DAG: tp.placement = #tp.placement<split(0), starts = [0, 0, 16, 32], sizes = [16, 16, 16, 16], key = "model.layers.*.self_attn.k_proj">
// TP4-DAG: tp.placement = #tp.placement<split(1), starts = [0, 16, 32, 64], sizes = [16, 16, 32, 32], key = "model.layers.*.self_attn.o_proj">
// tp=5: 2 + 2 + 1 ranks; one query head each, but KV head 2's two.
// TP5-DAG: tp.placement = #tp.placement<split(0), starts = [0, 16, 32, 48, 64], sizes = [16, 16, 16, 16, 32], key = "model.layers.*.self_attn.q_proj">
// TP5-DAG: tp.placement = #tp.placement<split(0), starts = [0, 0, 16, 16, 32], sizes = [16, 16, 16, 16, 16], key = "model.layers.*.self_attn.k_proj">
// tp=3 divides everything: even blocks, no ranges.
// EVEN-DAG: tp.placement = #tp.placement<split(0), key = "model.layers.*.self_attn.q_proj">
// EVEN-DAG: tp.placement = #tp.placement<split(0), key = "model.layers.*.self_attn.k_proj">
// expected-warning @+1 {{matches no module}}
func.func @forward(%x: tensor<?x?x96xf32>,
    %wq: tensor<96x96xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"},
    %wk: tensor<48x96xf32> {tp.fqn = "model.layers.0.self_attn.k_proj.weight"},
    %wv: tensor<48x96xf32> {tp.fqn = "model.layers.0.self_attn.v_proj.weight"},
    %wo: tensor<96x96xf32> {tp.fqn = "model.layers.0.self_attn.o_proj.weight"}) -> tensor<?x?x96xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x96xf32>, tensor<96x96xf32>) -> tensor<?x?x96xf32>
  %k = tp.linear %x, %wk : (tensor<?x?x96xf32>, tensor<48x96xf32>) -> tensor<?x?x48xf32>
  %v = tp.linear %x, %wv : (tensor<?x?x96xf32>, tensor<48x96xf32>) -> tensor<?x?x48xf32>
  %a = tp.attention %q, %k, %v {causal, head_dim = 16 : i64, num_heads = 6 : i64, num_kv_heads = 3 : i64, scale = 0.25 : f64} : (tensor<?x?x96xf32>, tensor<?x?x48xf32>, tensor<?x?x48xf32>) -> tensor<?x?x96xf32>
  %o = tp.linear %a, %wo : (tensor<?x?x96xf32>, tensor<96x96xf32>) -> tensor<?x?x96xf32>
  return %o : tensor<?x?x96xf32>
}

//--- mlp.mlir
// MLP 224 and vocabulary 322 over 3 ranks: single rows, the larger
// shares first; the embedding and the lm_head alike.
// CHECK-DAG: tp.placement = #tp.placement<split(0), starts = [0, 108, 215], sizes = [108, 107, 107], key = "model.embed_tokens">
// CHECK-DAG: tp.placement = #tp.placement<split(0), starts = [0, 75, 150], sizes = [75, 75, 74], key = "model.layers.*.mlp.gate_proj">
// CHECK-DAG: tp.placement = #tp.placement<split(0), starts = [0, 75, 150], sizes = [75, 75, 74], key = "model.layers.*.mlp.up_proj">
// CHECK-DAG: tp.placement = #tp.placement<split(1), starts = [0, 75, 150], sizes = [75, 75, 74], key = "model.layers.*.mlp.down_proj">
// CHECK-DAG: tp.placement = #tp.placement<split(0), starts = [0, 108, 215], sizes = [108, 107, 107], key = "lm_head">
// expected-warning @+1 {{matches no module}}
func.func @forward(%ids: tensor<?x?xi64>,
    %emb: tensor<322x64xf32> {tp.fqn = "model.embed_tokens.weight"},
    %wg: tensor<224x64xf32> {tp.fqn = "model.layers.0.mlp.gate_proj.weight"},
    %wu: tensor<224x64xf32> {tp.fqn = "model.layers.0.mlp.up_proj.weight"},
    %wd: tensor<64x224xf32> {tp.fqn = "model.layers.0.mlp.down_proj.weight"},
    %head: tensor<322x64xf32> {tp.fqn = "lm_head.weight"}) -> tensor<?x?x322xf32> {
  %x = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<322x64xf32>) -> tensor<?x?x64xf32>
  %g = tp.linear %x, %wg : (tensor<?x?x64xf32>, tensor<224x64xf32>) -> tensor<?x?x224xf32>
  %u = tp.linear %x, %wu : (tensor<?x?x64xf32>, tensor<224x64xf32>) -> tensor<?x?x224xf32>
  %s = tp.silu %g : tensor<?x?x224xf32>
  %m = tp.mul %s, %u : tensor<?x?x224xf32>
  %d = tp.linear %m, %wd : (tensor<?x?x224xf32>, tensor<64x224xf32>) -> tensor<?x?x64xf32>
  %l = tp.linear %d, %head : (tensor<?x?x64xf32>, tensor<322x64xf32>) -> tensor<?x?x322xf32>
  return %l : tensor<?x?x322xf32>
}

//--- default.mlir
// Without allow-uneven, NeMo's error, with the flag that lifts it.
// expected-warning @+1 {{matches no module}}
func.func @forward(%x: tensor<?x?x64xf32>,
    %wg: tensor<224x64xf32> {tp.fqn = "model.layers.0.mlp.gate_proj.weight"}) -> tensor<?x?x224xf32> {
  // expected-error @+1 {{plan key 'model.layers.*.mlp.gate_proj': 224 output features are not divisible by tp 3 (--allow-uneven splits it unevenly)}}
  %g = tp.linear %x, %wg : (tensor<?x?x64xf32>, tensor<224x64xf32>) -> tensor<?x?x224xf32>
  return %g : tensor<?x?x224xf32>
}

//--- few.mlir
// Every rank needs a query head.
// expected-warning @+1 {{matches no module}}
func.func @forward(%x: tensor<?x?x96xf32>,
    %wq: tensor<96x96xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight"},
    %wk: tensor<48x96xf32> {tp.fqn = "model.layers.0.self_attn.k_proj.weight"}) -> tensor<?x?x96xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x96xf32>, tensor<96x96xf32>) -> tensor<?x?x96xf32>
  %k = tp.linear %x, %wk : (tensor<?x?x96xf32>, tensor<48x96xf32>) -> tensor<?x?x48xf32>
  // expected-error @+1 {{plan key 'model.layers.*.self_attn.q_proj': 6 attention heads cannot give each of 8 ranks a head}}
  %a = tp.attention %q, %k, %k {causal, head_dim = 16 : i64, num_heads = 6 : i64, num_kv_heads = 3 : i64, scale = 0.25 : f64} : (tensor<?x?x96xf32>, tensor<?x?x48xf32>, tensor<?x?x48xf32>) -> tensor<?x?x96xf32>
  return %a : tensor<?x?x96xf32>
}

