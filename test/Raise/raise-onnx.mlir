// RUN: tp-opt %s --split-input-file --tp-raise-onnx --verify-diagnostics | FileCheck %s

// An RMS norm spelled out node by node (Gemma's (1 + w) form), a linear with
// a folded [in, out] weight plus a bias, SiLU as x * sigmoid(x), a constant
// scale, and an unfolded lm_head behind a Transpose.
// CHECK: module attributes {tp.config = {architecture = "gemma3"
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:.*]]: tensor<?x?xi64> {onnx.name = "input_ids"},
// CHECK-SAME: %[[EMB:.*]]: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
// CHECK-SAME: %[[NW:.*]]: tensor<4xf32> {tp.fqn = "model.norm.weight"
// CHECK-SAME: %[[W:.*]]: tensor<8x4xf32> {tp.fqn = "model.up.weight", tp.source = #tp.source<initializer = "onnx::MatMul_3", file = "m.onnx", offset = 272, length = 128, transposed = true>},
// CHECK-SAME: %[[B:.*]]: tensor<8xf32> {tp.fqn = "model.up.bias"
// CHECK-SAME: %[[LM:.*]]: tensor<16x8xf32> {tp.fqn = "lm_head.weight", tp.source = #tp.source<initializer = "lm_head.weight", file = "m.onnx", offset = 432, length = 512, transposed = false>})
// CHECK-SAME: -> tensor<?x?x16xf32>
// CHECK-SAME: attributes {tp.entry = "forward"}
// CHECK-NEXT: %[[H:.*]] = tp.embedding %[[IDS]], %[[EMB]]
// CHECK-NEXT: %[[N:.*]] = tp.rms_norm %[[H]], %[[NW]] {epsilon = 9.9999999999999995E-7 : f64, weight_offset = 1.000000e+00 : f64}
// CHECK-NEXT: %[[U:.*]] = tp.linear %[[N]], %[[W]], %[[B]] : (tensor<?x?x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[S:.*]] = tp.silu %[[U]]
// CHECK-NEXT: %[[SC:.*]] = tp.scale %[[S]] by 5.000000e-01
// CHECK-NEXT: %[[L:.*]] = tp.linear %[[SC]], %[[LM]] : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
// CHECK-NEXT: return %[[L]]
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x4xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
    %nw: tensor<4xf32> {onnx.name = "model.norm.weight", tp.source = #tp.source<initializer = "model.norm.weight", file = "m.onnx", offset = 256, length = 16, transposed = false>},
    %w: tensor<4x8xf32> {onnx.name = "onnx::MatMul_3", tp.source = #tp.source<initializer = "onnx::MatMul_3", file = "m.onnx", offset = 272, length = 128, transposed = false>},
    %b: tensor<8xf32> {onnx.name = "model.up.bias", tp.source = #tp.source<initializer = "model.up.bias", file = "m.onnx", offset = 400, length = 32, transposed = false>},
    %lm: tensor<16x8xf32> {onnx.name = "lm_head.weight", tp.source = #tp.source<initializer = "lm_head.weight", file = "m.onnx", offset = 432, length = 512, transposed = false>},
    %two: tensor<f32> {onnx.name = "two", onnx.value = dense<2.0> : tensor<f32>}) -> tensor<?x?x16xf32> {
  %h = onnx.node "Gather"(%emb, %ids) {domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, scope = "model.embed_tokens"} : (tensor<16x4xf32>, tensor<?x?xi64>) -> tensor<*xf32>
  %sq = onnx.node "Pow"(%h, %two) {domain = "", name = "/model/norm/Pow", onnx_attrs = {}, scope = "model.norm"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %mean = onnx.node "ReduceMean"(%sq) {domain = "", name = "/model/norm/ReduceMean", onnx_attrs = {axes = array<i64: -1>, keepdims = 1 : i64}, scope = "model.norm"} : (tensor<*xf32>) -> tensor<*xf32>
  %eps = onnx.node "Constant"() {domain = "", name = "/model/norm/Constant", onnx_attrs = {value = dense<1.0e-6> : tensor<f32>}, scope = "model.norm"} : () -> tensor<f32>
  %add = onnx.node "Add"(%mean, %eps) {domain = "", name = "/model/norm/Add", onnx_attrs = {}, scope = "model.norm"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %rms = onnx.node "Sqrt"(%add) {domain = "", name = "/model/norm/Sqrt", onnx_attrs = {}, scope = "model.norm"} : (tensor<*xf32>) -> tensor<*xf32>
  %normed = onnx.node "Div"(%h, %rms) {domain = "", name = "/model/norm/Div", onnx_attrs = {}, scope = "model.norm"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %one = onnx.node "Constant"() {domain = "", name = "/model/norm/Constant_1", onnx_attrs = {value = dense<1.0> : tensor<f32>}, scope = "model.norm"} : () -> tensor<f32>
  %w1 = onnx.node "Add"(%nw, %one) {domain = "", name = "/model/norm/Add_1", onnx_attrs = {}, scope = "model.norm"} : (tensor<4xf32>, tensor<f32>) -> tensor<*xf32>
  %n = onnx.node "Mul"(%normed, %w1) {domain = "", name = "/model/norm/Mul", onnx_attrs = {}, scope = "model.norm"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %mm = onnx.node "MatMul"(%n, %w) {domain = "", name = "/model/up/MatMul", onnx_attrs = {}, scope = "model.up"} : (tensor<*xf32>, tensor<4x8xf32>) -> tensor<*xf32>
  %u = onnx.node "Add"(%b, %mm) {domain = "", name = "/model/up/Add", onnx_attrs = {}, scope = "model.up"} : (tensor<8xf32>, tensor<*xf32>) -> tensor<*xf32>
  %sig = onnx.node "Sigmoid"(%u) {domain = "", name = "/model/act/Sigmoid", onnx_attrs = {}, scope = "model.act"} : (tensor<*xf32>) -> tensor<*xf32>
  %s = onnx.node "Mul"(%u, %sig) {domain = "", name = "/model/act/Mul", onnx_attrs = {}, scope = "model.act"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %half = onnx.node "Constant"() {domain = "", name = "/model/Constant", onnx_attrs = {value = dense<0.5> : tensor<f32>}, scope = "model"} : () -> tensor<f32>
  %sc = onnx.node "Mul"(%s, %half) {domain = "", name = "/model/Mul", onnx_attrs = {}, scope = "model"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %lmT = onnx.node "Transpose"(%lm) {domain = "", name = "/lm_head/Transpose", onnx_attrs = {perm = array<i64: 1, 0>}, scope = "lm_head"} : (tensor<16x8xf32>) -> tensor<*xf32>
  %logits = onnx.node "MatMul"(%sc, %lmT) {domain = "", name = "/lm_head/MatMul", onnx_attrs = {}, scope = "lm_head"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}

// -----

// A weight whose shape does not take the activation's features.
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x4xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
    %w: tensor<8x4xf32> {onnx.name = "onnx::MatMul_3", tp.source = #tp.source<initializer = "onnx::MatMul_3", file = "m.onnx", offset = 256, length = 128, transposed = false>}) -> tensor<?x?x4xf32> {
  %h = onnx.node "Gather"(%emb, %ids) {domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, scope = "model.embed_tokens"} : (tensor<16x4xf32>, tensor<?x?xi64>) -> tensor<*xf32>
  // expected-note @+2 {{while raising a llama graph (as its parameter names suggest)}}
  // expected-error @+1 {{cannot raise node '/model/up/MatMul' (MatMul, scope 'model.up'): weight 'tensor<8x4xf32>' does not take 4 input features}}
  %mm = onnx.node "MatMul"(%h, %w) {domain = "", name = "/model/up/MatMul", onnx_attrs = {}, scope = "model.up"} : (tensor<*xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
  return %mm : tensor<?x?x4xf32>
}

// -----

// An additive attention bias is not a mask.
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x4xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>}) -> tensor<?x?x4xf32> {
  %h = onnx.node "Gather"(%emb, %ids) {domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, scope = "model.embed_tokens"} : (tensor<16x4xf32>, tensor<?x?xi64>) -> tensor<*xf32>
  %shape = onnx.node "Constant"() {domain = "", name = "/model/attn/Constant", onnx_attrs = {value = dense<[0, 0, 2, 2]> : tensor<4xi64>}, scope = "model.attn"} : () -> tensor<4xi64>
  %heads = onnx.node "Reshape"(%h, %shape) {domain = "", name = "/model/attn/Reshape", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<4xi64>) -> tensor<*xf32>
  %q = onnx.node "Transpose"(%heads) {domain = "", name = "/model/attn/Transpose", onnx_attrs = {perm = array<i64: 0, 2, 1, 3>}, scope = "model.attn"} : (tensor<*xf32>) -> tensor<*xf32>
  %kt = onnx.node "Transpose"(%heads) {domain = "", name = "/model/attn/Transpose_1", onnx_attrs = {perm = array<i64: 0, 2, 3, 1>}, scope = "model.attn"} : (tensor<*xf32>) -> tensor<*xf32>
  %scores = onnx.node "MatMul"(%q, %kt) {domain = "", name = "/model/attn/MatMul", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %bias = onnx.node "Constant"() {domain = "", name = "/model/attn/Constant_1", onnx_attrs = {value = dense<0.5> : tensor<f32>}, scope = "model.attn"} : () -> tensor<f32>
  %masked = onnx.node "Add"(%scores, %bias) {domain = "", name = "/model/attn/Add", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %p = onnx.node "Softmax"(%masked) {domain = "", name = "/model/attn/Softmax", onnx_attrs = {axis = -1 : i64}, scope = "model.attn"} : (tensor<*xf32>) -> tensor<*xf32>
  // expected-note @+2 {{while raising a llama graph (as its parameter names suggest)}}
  // expected-error @+1 {{cannot raise node '/model/attn/MatMul_1' (MatMul, scope 'model.attn'): the attention mask adds values other than 0 and a large negative number}}
  %o = onnx.node "MatMul"(%p, %q) {domain = "", name = "/model/attn/MatMul_1", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<?x?x4xf32>
  return %o : tensor<?x?x4xf32>
}

// -----

// SDPA as the exporters write it: k transposed through a [batch * heads,
// seq, head_dim] reshape (dynamo), sqrt(scale) on each of q and k^T, and
// softmax guarded by where(isnan(p), 0, p) (fully masked rows). One head of
// 4 features: the guard is dropped (tp.attention gives such rows zeros).
// CHECK-LABEL: func.func @forward
// CHECK: tp.attention %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 4 : i64, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 2.500000e-01 : f64}
// CHECK-NOT: onnx.node
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x4xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>}) -> tensor<?x?x4xf32> {
  %h = onnx.node "Gather"(%emb, %ids) {domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, scope = "model.embed_tokens"} : (tensor<16x4xf32>, tensor<?x?xi64>) -> tensor<*xf32>
  %shape = onnx.node "Constant"() {domain = "", name = "/model/attn/Constant", onnx_attrs = {value = dense<[0, 0, 1, 4]> : tensor<4xi64>}, scope = "model.attn"} : () -> tensor<4xi64>
  %heads = onnx.node "Reshape"(%h, %shape) {domain = "", name = "/model/attn/Reshape", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<4xi64>) -> tensor<*xf32>
  %q = onnx.node "Transpose"(%heads) {domain = "", name = "/model/attn/Transpose", onnx_attrs = {perm = array<i64: 0, 2, 1, 3>}, scope = "model.attn"} : (tensor<*xf32>) -> tensor<*xf32>
  %qShape = onnx.node "Shape"(%q) {domain = "", name = "/model/attn/Shape_0", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>) -> tensor<4xi64>
  %last2 = onnx.node "Constant"() {domain = "", name = "/model/attn/Constant_1", onnx_attrs = {value = dense<[2, 3]> : tensor<2xi64>}, scope = "model.attn"} : () -> tensor<2xi64>
  %sd = onnx.node "Gather"(%qShape, %last2) {domain = "", name = "/model/attn/Gather_0", onnx_attrs = {}, scope = "model.attn"} : (tensor<4xi64>, tensor<2xi64>) -> tensor<2xi64>
  %minus1 = onnx.node "Constant"() {domain = "", name = "/model/attn/Constant_6", onnx_attrs = {value = dense<[-1]> : tensor<1xi64>}, scope = "model.attn"} : () -> tensor<1xi64>
  %flatShape = onnx.node "Concat"(%minus1, %sd) {domain = "", name = "/model/attn/Concat", onnx_attrs = {axis = 0 : i64}, scope = "model.attn"} : (tensor<1xi64>, tensor<2xi64>) -> tensor<3xi64>
  %flat = onnx.node "Reshape"(%q, %flatShape) {domain = "", name = "/model/attn/Reshape_1", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<3xi64>) -> tensor<*xf32>
  %flatT = onnx.node "Transpose"(%flat) {domain = "", name = "/model/attn/Transpose_1", onnx_attrs = {perm = array<i64: 0, 2, 1>}, scope = "model.attn"} : (tensor<*xf32>) -> tensor<*xf32>
  %ktShape = onnx.node "Shape"(%q) {domain = "", name = "/model/attn/Shape", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>) -> tensor<4xi64>
  %perm = onnx.node "Constant"() {domain = "", name = "/model/attn/Constant_2", onnx_attrs = {value = dense<[0, 1, 3, 2]> : tensor<4xi64>}, scope = "model.attn"} : () -> tensor<4xi64>
  %ktDims = onnx.node "Gather"(%ktShape, %perm) {domain = "", name = "/model/attn/Gather", onnx_attrs = {}, scope = "model.attn"} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %kt = onnx.node "Reshape"(%flatT, %ktDims) {domain = "", name = "/model/attn/Reshape_2", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<4xi64>) -> tensor<*xf32>
  %root = onnx.node "Constant"() {domain = "", name = "/model/attn/Constant_3", onnx_attrs = {value = dense<0.5> : tensor<f32>}, scope = "model.attn"} : () -> tensor<f32>
  %qs = onnx.node "Mul"(%q, %root) {domain = "", name = "/model/attn/Mul", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %ks = onnx.node "Mul"(%kt, %root) {domain = "", name = "/model/attn/Mul_1", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<f32>) -> tensor<*xf32>
  %scores = onnx.node "MatMul"(%qs, %ks) {domain = "", name = "/model/attn/MatMul", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %p = onnx.node "Softmax"(%scores) {domain = "", name = "/model/attn/Softmax", onnx_attrs = {axis = -1 : i64}, scope = "model.attn"} : (tensor<*xf32>) -> tensor<*xf32>
  %nan = onnx.node "IsNaN"(%p) {domain = "", name = "/model/attn/IsNaN", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>) -> tensor<*xi1>
  %zero = onnx.node "Constant"() {domain = "", name = "/model/attn/Constant_4", onnx_attrs = {value = dense<0.0> : tensor<f32>}, scope = "model.attn"} : () -> tensor<f32>
  %guarded = onnx.node "Where"(%nan, %zero, %p) {domain = "", name = "/model/attn/Where", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xi1>, tensor<f32>, tensor<*xf32>) -> tensor<*xf32>
  %o = onnx.node "MatMul"(%guarded, %q) {domain = "", name = "/model/attn/MatMul_1", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %back = onnx.node "Transpose"(%o) {domain = "", name = "/model/attn/Transpose_2", onnx_attrs = {perm = array<i64: 0, 2, 1, 3>}, scope = "model.attn"} : (tensor<*xf32>) -> tensor<*xf32>
  %packShape = onnx.node "Constant"() {domain = "", name = "/model/attn/Constant_5", onnx_attrs = {value = dense<[0, 0, 4]> : tensor<3xi64>}, scope = "model.attn"} : () -> tensor<3xi64>
  %y = onnx.node "Reshape"(%back, %packShape) {domain = "", name = "/model/attn/Reshape_3", onnx_attrs = {}, scope = "model.attn"} : (tensor<*xf32>, tensor<3xi64>) -> tensor<?x?x4xf32>
  return %y : tensor<?x?x4xf32>
}

// -----

// A failure inside a decoder layer names the layer and block; a fused
// projection (Phi-3's qkv_proj) says which of its cuts tp-opt raises.
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x4xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>}) -> tensor<?x?x4xf32> {
  %h = onnx.node "Gather"(%emb, %ids) {domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, scope = "model.embed_tokens"} : (tensor<16x4xf32>, tensor<?x?xi64>) -> tensor<*xf32>
  // expected-note @+2 {{while raising a llama graph (as its parameter names suggest)}}
  // expected-error @+1 {{cannot raise node '/model/layers.2/self_attn/qkv_proj/Celu' (Celu, scope 'model.layers.2.self_attn.qkv_proj', layer 2's block 'self_attn.qkv_proj': a fused projection (Phi-3, Falcon, GPT-NeoX), whose parts tp-opt raises when the export cuts its features with Split or Slice): no building block matches it}}
  %c = onnx.node "Celu"(%h) {domain = "", name = "/model/layers.2/self_attn/qkv_proj/Celu", onnx_attrs = {}, scope = "model.layers.2.self_attn.qkv_proj"} : (tensor<*xf32>) -> tensor<?x?x4xf32>
  return %c : tensor<?x?x4xf32>
}

// -----

// The architecture in the note is the one the parameter names suggest
// (per-head q/k norms: Qwen3), before any op is raised.
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x4xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
    %qn: tensor<4xf32> {onnx.name = "model.layers.0.self_attn.q_norm.weight", tp.source = #tp.source<initializer = "model.layers.0.self_attn.q_norm.weight", file = "m.onnx", offset = 256, length = 16, transposed = false>}) -> tensor<?x?x4xf32> {
  %h = onnx.node "Gather"(%emb, %ids) {domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, scope = "model.embed_tokens"} : (tensor<16x4xf32>, tensor<?x?xi64>) -> tensor<*xf32>
  // expected-note @+2 {{while raising a qwen3 graph (as its parameter names suggest)}}
  // expected-error @+1 {{cannot raise node '/model/layers.0/mlp/Celu' (Celu, scope 'model.layers.0.mlp', layer 0's block 'mlp'): no building block matches it}}
  %c = onnx.node "Celu"(%h) {domain = "", name = "/model/layers.0/mlp/Celu", onnx_attrs = {}, scope = "model.layers.0.mlp"} : (tensor<*xf32>) -> tensor<?x?x4xf32>
  return %c : tensor<?x?x4xf32>
}
