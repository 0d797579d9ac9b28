// RUN: tp-opt %s | FileCheck %s
// Round trip: the printed form parses back to the same IR.
// RUN: tp-opt %s | tp-opt | FileCheck %s
// RUN: tp-opt %s --mlir-print-op-generic | tp-opt | FileCheck %s

// CHECK-LABEL: func.func @blocks
// CHECK-SAME: (%[[IDS:.*]]: tensor<?x?xi64>, %[[MASK:.*]]: tensor<?x?xi64>,
// CHECK-SAME: %[[EMB:.*]]: tensor<256x64xf32> {tp.fqn = "model.embed_tokens.weight"
// CHECK-SAME: tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 128, length = 65536, transposed = false>}
// CHECK-SAME: %[[WQ:.*]]: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight", tp.source = #tp.source<initializer = "onnx::MatMul_1", file = "m.onnx", offset = 65664, length = 16384, transposed = true>}
func.func @blocks(%ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>,
    %emb: tensor<256x64xf32> {tp.fqn = "model.embed_tokens.weight",
      tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 128, length = 65536, transposed = false>},
    %wq: tensor<64x64xf32> {tp.fqn = "model.layers.0.self_attn.q_proj.weight",
      tp.source = #tp.source<initializer = "onnx::MatMul_1", file = "m.onnx", offset = 65664, length = 16384, transposed = true>},
    %wk: tensor<32x64xf32>, %bk: tensor<32xf32>, %wv: tensor<32x64xf32>,
    %norm: tensor<64xf32>, %qnorm: tensor<16xf32>) -> tensor<?x?x64xf32> {
  // CHECK: %[[H:.*]] = tp.embedding %[[IDS]], %[[EMB]] : (tensor<?x?xi64>, tensor<256x64xf32>) -> tensor<?x?x64xf32>
  %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<256x64xf32>) -> tensor<?x?x64xf32>
  // CHECK: tp.scale %[[H]] by 8.000000e+00 : tensor<?x?x64xf32>
  %hs = tp.scale %h by 8.0 : tensor<?x?x64xf32>
  // CHECK: tp.softcap %[[H]] cap 3.000000e+01 : tensor<?x?x64xf32>
  %hc = tp.softcap %h cap 30.0 : tensor<?x?x64xf32>
  // CHECK: tp.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64, weight_offset = 1.000000e+00 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %n = tp.rms_norm %hs, %norm {epsilon = 1.0e-6 : f64, weight_offset = 1.0 : f64} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  // CHECK: %{{.*}}, %{{.*}} = tp.add_rms_norm %[[H]], %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64, weight_offset = 1.000000e+00 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>)
  %sn:2 = tp.add_rms_norm %h, %hs, %norm {epsilon = 1.0e-6 : f64, weight_offset = 1.0 : f64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>)
  // CHECK: tp.linear %{{.*}}, %[[WQ]] : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %q = tp.linear %n, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  // CHECK: tp.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<?x?x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  %k = tp.linear %n, %wk, %bk : (tensor<?x?x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  %v = tp.linear %n, %wv : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  // CHECK: tp.rms_norm %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64, group_size = 16 : i64} : (tensor<?x?x64xf32>, tensor<16xf32>) -> tensor<?x?x64xf32>
  %qn = tp.rms_norm %q, %qnorm {epsilon = 1.0e-6 : f64, group_size = 16 : i64} : (tensor<?x?x64xf32>, tensor<16xf32>) -> tensor<?x?x64xf32>
  // CHECK: tp.rotary %{{.*}} {head_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<?x?x64xf32>
  %qr = tp.rotary %qn {head_dim = 16 : i64, theta = 10000.0 : f64} : tensor<?x?x64xf32>
  // CHECK: tp.rotary %{{.*}} {factor = 8.000000e+00 : f64, head_dim = 16 : i64, high_freq_factor = 4.000000e+00 : f64, low_freq_factor = 1.000000e+00 : f64, original_max_position_embeddings = 8192 : i64, rope_type = "llama3", theta = 5.000000e+05 : f64} : tensor<?x?x64xf32>
  %ql = tp.rotary %qn {head_dim = 16 : i64, theta = 5.0e5 : f64, rope_type = "llama3", factor = 8.0 : f64, low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_max_position_embeddings = 8192 : i64} : tensor<?x?x64xf32>
  // CHECK: tp.rotary %{{.*}} {head_dim = 16 : i64, interleaved, rotary_dim = 8 : i64, theta = 1.000000e+06 : f64} : tensor<?x?x32xf32>
  %kr = tp.rotary %k {head_dim = 16 : i64, rotary_dim = 8 : i64, theta = 1.0e6 : f64, interleaved} : tensor<?x?x32xf32>
  // CHECK: tp.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[MASK]] {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f64, sliding_window = 512 : i64, softcap = 5.000000e+01 : f64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  %a = tp.attention %qr, %kr, %v mask %mask {causal, head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64, sliding_window = 512 : i64, softcap = 50.0 : f64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  // CHECK: tp.attention %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  %a2 = tp.attention %qr, %kr, %v {head_dim = 16 : i64, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.25 : f64} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
  // CHECK: tp.add %{{.*}}, %{{.*}} : tensor<?x?x64xf32>
  %r = tp.add %a, %a2 : tensor<?x?x64xf32>
  // CHECK: tp.silu %{{.*}} : tensor<?x?x64xf32>
  %s = tp.silu %r : tensor<?x?x64xf32>
  // CHECK: tp.gelu %{{.*}} tanh : tensor<?x?x64xf32>
  %g = tp.gelu %s tanh : tensor<?x?x64xf32>
  // CHECK: tp.gelu %{{.*}} none : tensor<?x?x64xf32>
  %g2 = tp.gelu %g none : tensor<?x?x64xf32>
  // CHECK: tp.relu_squared %{{.*}} : tensor<?x?x64xf32>
  %rs = tp.relu_squared %g2 : tensor<?x?x64xf32>
  // CHECK: tp.mul %{{.*}}, %{{.*}} : tensor<?x?x64xf32>
  %m = tp.mul %rs, %s : tensor<?x?x64xf32>
  return %m : tensor<?x?x64xf32>
}

// Low-precision parameters and static shapes.
// CHECK-LABEL: func.func @bf16
func.func @bf16(%x: tensor<2x8x64xbf16>, %w: tensor<128x64xbf16> {tp.fqn = "model.layers.0.mlp.up_proj.weight",
      tp.source = #tp.source<initializer = "w", file = "model.onnx_data", offset = 0, length = 16384, transposed = false>}) -> tensor<2x8x128xbf16> {
  // CHECK: tp.linear %{{.*}}, %{{.*}} : (tensor<2x8x64xbf16>, tensor<128x64xbf16>) -> tensor<2x8x128xbf16>
  %y = tp.linear %x, %w : (tensor<2x8x64xbf16>, tensor<128x64xbf16>) -> tensor<2x8x128xbf16>
  return %y : tensor<2x8x128xbf16>
}

// CHECK-LABEL: func.func @mamba
// CHECK: tp.mamba2_mixer %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} {conv_kernel = 4 : i64, dt_min = 1.000000e-03 : f64, folded_a, head_dim = 16 : i64, n_groups = 2 : i64, norm_eps = 1.000000e-05 : f64, num_heads = 4 : i64, state_size = 8 : i64} : (tensor<?x?x64xf32>, tensor<164x64xf32>, tensor<96x1x4xf32>, tensor<96xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<64xf32>, tensor<64x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
func.func @mamba(%x: tensor<?x?x64xf32>, %in: tensor<164x64xf32>, %cw: tensor<96x1x4xf32>, %cb: tensor<96xf32>, %dt: tensor<4xf32>, %a: tensor<4xf32>, %d: tensor<4xf32>, %nw: tensor<64xf32>, %out: tensor<64x64xf32>, %m: tensor<?x?xi64>) -> tensor<?x?x64xf32> {
  %y = tp.mamba2_mixer %x, %in, %cw, %cb, %dt, %a, %d, %nw, %out mask %m {conv_kernel = 4 : i64, dt_min = 1.0e-3 : f64, folded_a, head_dim = 16 : i64, n_groups = 2 : i64, norm_eps = 1.0e-5 : f64, num_heads = 4 : i64, state_size = 8 : i64} : (tensor<?x?x64xf32>, tensor<164x64xf32>, tensor<96x1x4xf32>, tensor<96xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<64xf32>, tensor<64x64xf32>, tensor<?x?xi64>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// CHECK-LABEL: func.func @linear_forms
// CHECK: %[[Y:.*]] = tp.linear %{{.*}}, %{{.*}} {form = #tp<linear_form bmm>} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
// CHECK: tp.linear %{{.*}}, %{{.*}}, %{{.*}} {form = #tp<linear_form mm>} : (tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<?x32xf32>
// CHECK: tp.bias_add %[[Y]], %{{.*}} : tensor<?x?x32xf32>, tensor<32xf32>
func.func @linear_forms(%x: tensor<?x?x64xf32>, %x2: tensor<?x64xf32>, %w: tensor<32x64xf32>, %b: tensor<32xf32>) -> (tensor<?x?x32xf32>, tensor<?x32xf32>) {
  %y = tp.linear %x, %w {form = #tp<linear_form bmm>} : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %y2 = tp.linear %x2, %w, %b {form = #tp<linear_form mm>} : (tensor<?x64xf32>, tensor<32x64xf32>, tensor<32xf32>) -> tensor<?x32xf32>
  %z = tp.bias_add %y, %b : tensor<?x?x32xf32>, tensor<32xf32>
  return %z, %y2 : tensor<?x?x32xf32>, tensor<?x32xf32>
}

// Placements round-trip (defaults elided).
// CHECK-LABEL: func.func @placements
// CHECK-SAME: tp.placement = #tp.placement<split(0), blocks = 2, replicas = 2, key = "model.layers.*.self_attn.k_proj">
// CHECK-SAME: tp.placement = #tp.placement<replicated, grad = sum, key = "model.norm">
// CHECK-SAME: tp.placement = #tp.placement<split(1)>
func.func @placements(
    %k: tensor<8x4xf32> {tp.placement = #tp.placement<split(0), replicas = 2, blocks = 2, key = "model.layers.*.self_attn.k_proj">},
    %n: tensor<4xf32> {tp.placement = #tp.placement<replicated, grad = sum, key = "model.norm">},
    %o: tensor<4x8xf32> {tp.placement = #tp.placement<split(1), grad = mean>}) {
  return
}

// An uneven split: each rank's range, before and after tp-partition; a
// vocabulary-parallel lookup of uneven rows and the gather of uneven blocks.
// CHECK-LABEL: func.func @uneven
// CHECK-SAME: tp.placement = #tp.placement<split(0), starts = [0, 3, 5], sizes = [3, 2, 2]>
// CHECK-SAME: tp.placement = #tp.placement<split(1), blocks = 3, starts = [0, 0, 16], sizes = [16, 16, 16]>
// CHECK: tp.embedding %{{.*}}, %{{.*}} {vocab_parallel, vocab_sizes = array<i64: 3, 2, 2>, vocab_starts = array<i64: 0, 3, 5>}
// CHECK: tp.all_gather_uneven %{{.*}} on @tp grid_axes = [0] gather_axis = 2 sizes = [3, 2, 2] : tensor<2x8x3xf32> -> tensor<2x8x7xf32>
// CHECK: tp.reduce_scatter_uneven %{{.*}} on @tp grid_axes = [0] scatter_axis = 2 sizes = [3, 2, 2] : tensor<2x8x7xf32> -> tensor<2x8x3xf32>
// CHECK: tp.all_slice_uneven %{{.*}} on @tp grid_axes = [0] slice_axis = 2 starts = [0, 3, 5] sizes = [3, 2, 2] : tensor<2x8x7xf32> -> tensor<2x8x3xf32>
func.func @uneven(%ids: tensor<2x8xi64>,
    %e: tensor<7x4xf32> {tp.placement = #tp.placement<split(0), starts = [0, 3, 5], sizes = [3, 2, 2]>},
    %k: tensor<4x16xf32> {tp.placement = #tp.placement<split(1), blocks = 3, starts = [0, 0, 16], sizes = [16, 16, 16]>},
    %t: tensor<3x4xf32>, %x: tensor<2x8x3xf32>) {
  %h = tp.embedding %ids, %t {vocab_parallel, vocab_starts = array<i64: 0, 3, 5>, vocab_sizes = array<i64: 3, 2, 2>} : (tensor<2x8xi64>, tensor<3x4xf32>) -> tensor<2x8x4xf32>
  %l = tp.all_gather_uneven %x on @tp grid_axes = [0] gather_axis = 2 sizes = [3, 2, 2] : tensor<2x8x3xf32> -> tensor<2x8x7xf32>
  %s = tp.reduce_scatter_uneven %l on @tp grid_axes = [0] scatter_axis = 2 sizes = [3, 2, 2] : tensor<2x8x7xf32> -> tensor<2x8x3xf32>
  %b = tp.all_slice_uneven %l on @tp grid_axes = [0] slice_axis = 2 starts = [0, 3, 5] sizes = [3, 2, 2] : tensor<2x8x7xf32> -> tensor<2x8x3xf32>
  return
}

// The optimizer step's ops, and a plan's replica-class override.
// CHECK-LABEL: func.func @optimizer_step
// CHECK-SAME: tp.grad_reduction = #tp.grad_reduction<mean>
// CHECK-NEXT: tp.optimizer_boundary
// CHECK-NEXT: tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 32 : i64, dtype = bf16, fqns = ["a", "b"], reduction = #tp.grad_reduction<sum>}
// CHECK-NEXT: tp.normalize_grads
// CHECK-NEXT: %[[N:.*]] = tp.grad_norm : tensor<f32>
// CHECK-NEXT: tp.clip_grads %[[N]] : tensor<f32>
// CHECK-NEXT: tp.optimizer_update {optimizer = "sgd"}
func.func @optimizer_step(%n: tensor<4xf32> {tp.grad_reduction = #tp.grad_reduction<mean>}) -> tensor<f32> {
  tp.optimizer_boundary
  tp.grad_bucket_all_reduce {bucket = 0 : i64, bytes = 32 : i64, dtype = bf16, fqns = ["a", "b"], reduction = #tp.grad_reduction<sum>}
  tp.normalize_grads
  %norm = tp.grad_norm : tensor<f32>
  tp.clip_grads %norm : tensor<f32>
  tp.optimizer_update {optimizer = "sgd"}
  return %norm : tensor<f32>
}

// A fused projection's parts and the gradient of one.
// CHECK-LABEL: func.func @feature_slices
// CHECK-NEXT: %[[Q:.*]] = tp.feature_slice %arg0[0, 64] : tensor<?x?x128xbf16> -> tensor<?x?x64xbf16>
// CHECK-NEXT: %[[V:.*]] = tp.feature_slice %arg0[96, 32] : tensor<?x?x128xbf16> -> tensor<?x?x32xbf16>
// CHECK-NEXT: %[[E:.*]] = tp.feature_slice %arg0[128, 0] : tensor<?x?x128xbf16> -> tensor<?x?x0xbf16>
// CHECK-NEXT: tp.feature_slice_grad %[[V]][96] width 128 : tensor<?x?x32xbf16> -> tensor<?x?x128xbf16>
func.func @feature_slices(%qkv: tensor<?x?x128xbf16>) -> tensor<?x?x128xbf16> {
  %q = tp.feature_slice %qkv [0, 64] : tensor<?x?x128xbf16> -> tensor<?x?x64xbf16>
  %v = tp.feature_slice %qkv [96, 32] : tensor<?x?x128xbf16> -> tensor<?x?x32xbf16>
  %e = tp.feature_slice %qkv [128, 0] : tensor<?x?x128xbf16> -> tensor<?x?x0xbf16>
  %dqkv = tp.feature_slice_grad %v [96] width 128 : tensor<?x?x32xbf16> -> tensor<?x?x128xbf16>
  return %dqkv : tensor<?x?x128xbf16>
}

// --zero 1's optimizer step: a reduce-scatter over @dp padded to equal
// runs, the norm and update of this rank's runs, the all-gather. With
// --zero 2, the reduce-scatter per micro-batch, in the training step.
// CHECK-LABEL: module @zero
// CHECK: tp.grad_bucket_reduce_scatter {bucket = 2 : i64, bytes = 64 : i64, dtype = f32, fqns = ["c"], micro_batch, padded_bytes = 1024 : i64}
// --zero 3: a bucket's parameters gathered for their reads, a gathered
// one taken by its gradient's accumulation, and the init keeping the runs.
// CHECK: %[[W:.*]]:2 = tp.param_bucket_gather {bucket = 2 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["c", "d"]} : tensor<16xf32>, tensor<4x4xf32>
// CHECK-NEXT: tp.accumulate_grad %{{.*}} into %[[W]]#1 {fqn = "d"} : tensor<4x4xf32>
// CHECK: tp.grad_bucket_reduce_scatter {bucket = 1 : i64, bytes = 400 : i64, dtype = bf16, fqns = ["a", "b"], padded_bytes = 1024 : i64}
// CHECK-NEXT: tp.normalize_grads
// CHECK-NEXT: %[[N:.*]] = tp.grad_norm {dp_sharded} : tensor<f32>
// CHECK-NEXT: tp.clip_grads %[[N]] : tensor<f32>
// CHECK-NEXT: tp.optimizer_update {dp_sharded, optimizer = "adamw"}
// CHECK-NEXT: tp.param_bucket_all_gather {bucket = 1 : i64, bytes = 512 : i64, dtype = bf16, fqns = ["a", "b"]}
module @zero {
  shard.grid @dp(shape = 2)
  func.func @train_step(%g: tensor<4x4xf32>) attributes {tp.entry = "train_step"} {
    tp.grad_bucket_reduce_scatter {bucket = 2 : i64, bytes = 64 : i64, dtype = f32, fqns = ["c"], micro_batch, padded_bytes = 1024 : i64}
    %w:2 = tp.param_bucket_gather {bucket = 2 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["c", "d"]} : tensor<16xf32>, tensor<4x4xf32>
    tp.accumulate_grad %g into %w#1 {fqn = "d"} : tensor<4x4xf32>
    return
  }
  func.func @optimizer_step() -> tensor<f32> {
    tp.optimizer_boundary
    tp.grad_bucket_reduce_scatter {bucket = 1 : i64, bytes = 400 : i64, dtype = bf16, fqns = ["a", "b"], padded_bytes = 1024 : i64}
    tp.normalize_grads
    %norm = tp.grad_norm {dp_sharded} : tensor<f32>
    tp.clip_grads %norm : tensor<f32>
    tp.optimizer_update {dp_sharded, optimizer = "adamw"}
    tp.param_bucket_all_gather {bucket = 1 : i64, bytes = 512 : i64, dtype = bf16, fqns = ["a", "b"]}
    return %norm : tensor<f32>
  }
  // CHECK-LABEL: func.func @init
  // CHECK-NEXT: tp.param_bucket_shard {bucket = 2 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["c", "d"]}
  func.func @init() attributes {tp.entry = "init"} {
    tp.param_bucket_shard {bucket = 2 : i64, bytes = 1024 : i64, dtype = f32, fqns = ["c", "d"]}
    return
  }
}

// The consuming form tp-to-emitc keeps on a call until it chooses.
// CHECK-LABEL: func.func @consuming_form
// CHECK: tp.consuming_form = #tp.consuming_form<callee = "tprt::all_reduce_sum_consuming", operand = 1>
func.func @consuming_form() attributes {tp.consuming_form = #tp.consuming_form<callee = "tprt::all_reduce_sum_consuming", operand = 1>} {
  return
}

// #tp.source with any optional field alone, or several in any order,
// reads back (tpc's model.mlir of a folded Gemma export holds
// stored_offset without stored_type, of a folded NemotronH export
// stored_form alone); stored_form's default, parameter, is not printed.
// CHECK-LABEL: func.func @source_fields
// CHECK-SAME: #tp.source<initializer = "n", file = "m.onnx", offset = 0, length = 64, transposed = false, stored_offset = 1.000000e+00 : f64>
// CHECK-SAME: #tp.source<initializer = "w", file = "m.onnx", offset = 64, length = 32, transposed = false, stored_type = bf16, stored_offset = 1.000000e+00 : f64>
// CHECK-SAME: #tp.source<initializer = "neg", file = "m.onnx", offset = 96, length = 16, transposed = false, stored_form = neg_exp>
// CHECK-SAME: #tp.source<initializer = "p", file = "m.onnx", offset = 112, length = 16, transposed = false>
func.func @source_fields(
    %n: tensor<16xf32> {tp.source = #tp.source<initializer = "n", file = "m.onnx", offset = 0, length = 64, transposed = false, stored_offset = 1.0 : f64>},
    %w: tensor<16xf32> {tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 64, length = 32, transposed = false, stored_offset = 1.0 : f64, stored_type = bf16>},
    %a: tensor<4xf32> {tp.source = #tp.source<initializer = "neg", file = "m.onnx", offset = 96, length = 16, transposed = false, stored_form = neg_exp>},
    %p: tensor<4xf32> {tp.source = #tp.source<initializer = "p", file = "m.onnx", offset = 112, length = 16, transposed = false, stored_form = parameter>}) {
  return
}
