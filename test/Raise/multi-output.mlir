// RUN: tp-opt %s --split-input-file --tp-raise-onnx --verify-diagnostics | FileCheck %s

// A fused gate_up projection split by one Split with both outputs read
// (opset 18's num_outputs): each part is a tp.feature_slice of the
// projection's output.
// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]] = tp.linear %{{.*}}, %{{.*}} {tp.layer = {{[0-9]+}} : i64} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[G:.*]] = tp.feature_slice %[[P]][0, 4] {tp.layer = {{[0-9]+}} : i64} : tensor<?x?x8xf32> -> tensor<?x?x4xf32>
// CHECK-NEXT: %[[U:.*]] = tp.feature_slice %[[P]][4, 4] {tp.layer = {{[0-9]+}} : i64} : tensor<?x?x8xf32> -> tensor<?x?x4xf32>
// CHECK-NEXT: tp.mul %[[G]], %[[U]] {tp.layer = {{[0-9]+}} : i64} : tensor<?x?x4xf32>
// CHECK-NOT: onnx.node
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x8xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 512, transposed = false>},
    %w: tensor<8x8xf32> {onnx.name = "w", tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 512, length = 256, transposed = false>}) -> tensor<*xf32> {
  %h = "onnx.node"(%emb, %ids) <{domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, op_type = "Gather", scope = "model.embed_tokens"}> : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<*xf32>
  %p = "onnx.node"(%h, %w) <{domain = "", name = "/model/layers.0/mlp/gate_up_proj/MatMul", onnx_attrs = {}, op_type = "MatMul", scope = "model.layers.0.mlp.gate_up_proj"}> : (tensor<*xf32>, tensor<8x8xf32>) -> tensor<*xf32>
  %s:2 = "onnx.node"(%p) <{domain = "", name = "/model/layers.0/mlp/Split", onnx_attrs = {axis = -1 : i64, num_outputs = 2 : i64}, op_type = "Split", scope = "model.layers.0.mlp"}> : (tensor<*xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  %m = "onnx.node"(%s#0, %s#1) <{domain = "", name = "/model/layers.0/mlp/Mul", onnx_attrs = {}, op_type = "Mul", scope = "model.layers.0.mlp"}> : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  return %m : tensor<*xf32>
}

// -----

// Sizes from the `split` input, a zero-sized part and an unread one: only
// the parts read are sliced; Slice nodes (TorchScript's chunk) with an open
// end and a negative start cut the same way.
// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.*]] = tp.linear
// CHECK-NEXT: %[[A:.*]] = tp.feature_slice %[[P]][0, 5] {tp.layer = {{[0-9]+}} : i64} : tensor<?x?x8xf32> -> tensor<?x?x5xf32>
// CHECK-NEXT: %[[C:.*]] = tp.feature_slice %[[P]][5, 3] {tp.layer = {{[0-9]+}} : i64} : tensor<?x?x8xf32> -> tensor<?x?x3xf32>
// CHECK-NEXT: %[[T:.*]] = tp.feature_slice %[[P]][5, 3] {tp.layer = {{[0-9]+}} : i64} : tensor<?x?x8xf32> -> tensor<?x?x3xf32>
// CHECK-NEXT: tp.add %[[C]], %[[T]] {tp.layer = {{[0-9]+}} : i64} : tensor<?x?x3xf32>
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x8xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 512, transposed = false>},
    %w: tensor<8x8xf32> {onnx.name = "w", tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 512, length = 256, transposed = false>}) -> (tensor<*xf32>, tensor<*xf32>) {
  %h = "onnx.node"(%emb, %ids) <{domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, op_type = "Gather", scope = "model.embed_tokens"}> : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<*xf32>
  %p = "onnx.node"(%h, %w) <{domain = "", name = "/model/layers.0/mixer/in_proj/MatMul", onnx_attrs = {}, op_type = "MatMul", scope = "model.layers.0.mixer.in_proj"}> : (tensor<*xf32>, tensor<8x8xf32>) -> tensor<*xf32>
  %sizes = "onnx.node"() <{domain = "", name = "/model/layers.0/mixer/Constant", onnx_attrs = {value = dense<[5, 0, 3]> : tensor<3xi64>}, op_type = "Constant", scope = "model.layers.0.mixer"}> : () -> tensor<3xi64>
  %s:3 = "onnx.node"(%p, %sizes) <{domain = "", name = "/model/layers.0/mixer/Split", onnx_attrs = {axis = 2 : i64}, op_type = "Split", scope = "model.layers.0.mixer"}> : (tensor<*xf32>, tensor<3xi64>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  %start = "onnx.node"() <{domain = "", name = "/model/layers.0/mixer/Constant_1", onnx_attrs = {value = dense<-3> : tensor<1xi64>}, op_type = "Constant", scope = "model.layers.0.mixer"}> : () -> tensor<1xi64>
  %end = "onnx.node"() <{domain = "", name = "/model/layers.0/mixer/Constant_2", onnx_attrs = {value = dense<9223372036854775807> : tensor<1xi64>}, op_type = "Constant", scope = "model.layers.0.mixer"}> : () -> tensor<1xi64>
  %axis = "onnx.node"() <{domain = "", name = "/model/layers.0/mixer/Constant_3", onnx_attrs = {value = dense<-1> : tensor<1xi64>}, op_type = "Constant", scope = "model.layers.0.mixer"}> : () -> tensor<1xi64>
  %tail = "onnx.node"(%p, %start, %end, %axis) <{domain = "", name = "/model/layers.0/mixer/Slice", onnx_attrs = {}, op_type = "Slice", scope = "model.layers.0.mixer"}> : (tensor<*xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %sum = "onnx.node"(%s#2, %tail) <{domain = "", name = "/model/layers.0/mixer/Add", onnx_attrs = {}, op_type = "Add", scope = "model.layers.0.mixer"}> : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  return %s#0, %sum : tensor<*xf32>, tensor<*xf32>
}

// -----

// A split of an activation along the sequence is refused.
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x8xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 512, transposed = false>}) -> tensor<*xf32> {
  %h = "onnx.node"(%emb, %ids) <{domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, op_type = "Gather", scope = "model.embed_tokens"}> : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<*xf32>
  // expected-error @+2 {{cannot raise node '/model/Split' (Split, scope 'model'): a split of an activation along axis 1 is not supported (only its features, the last axis, are)}}
  // expected-note @+1 {{while raising a llama graph (as its parameter names suggest)}}
  %s:2 = "onnx.node"(%h) <{domain = "", name = "/model/Split", onnx_attrs = {axis = 1 : i64, num_outputs = 2 : i64}, op_type = "Split", scope = "model"}> : (tensor<*xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  %m = "onnx.node"(%s#0, %s#1) <{domain = "", name = "/model/Mul", onnx_attrs = {}, op_type = "Mul", scope = "model"}> : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  return %m : tensor<*xf32>
}

// -----

// Split sizes that do not add up to the features are refused.
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x8xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 512, transposed = false>}) -> tensor<*xf32> {
  %h = "onnx.node"(%emb, %ids) <{domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, op_type = "Gather", scope = "model.embed_tokens"}> : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<*xf32>
  // expected-error @+2 {{split sizes [4, 5] do not cut the 8 features into 2 parts}}
  // expected-note @+1 {{while raising}}
  %s:2 = "onnx.node"(%h) <{domain = "", name = "/model/Split", onnx_attrs = {axis = -1 : i64, split = array<i64: 4, 5>}, op_type = "Split", scope = "model"}> : (tensor<*xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  %m = "onnx.node"(%s#0, %s#1) <{domain = "", name = "/model/Mul", onnx_attrs = {}, op_type = "Mul", scope = "model"}> : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  return %m : tensor<*xf32>
}

// -----

// A node with several outputs read that no building block takes (a Split
// of the token ids) says which outputs are read and what raising takes.
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x8xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 512, transposed = false>}) -> (tensor<*xf32>, tensor<*xf32>) {
  // expected-error @+2 {{cannot raise node '/model/Split' (Split, scope 'model'): outputs 0, 1 of this node are read: raising takes a node with several read outputs when they are computed at compile time, when it is a fused block (GroupQueryAttention, SkipSimplifiedLayerNormalization), a Split of an activation's features (a fused projection's parts) or inside a Mamba2 mixer}}
  // expected-note @+1 {{while raising}}
  %s:2 = "onnx.node"(%ids) <{domain = "", name = "/model/Split", onnx_attrs = {axis = 1 : i64, num_outputs = 2 : i64}, op_type = "Split", scope = "model"}> : (tensor<?x?xi64>) -> (tensor<*xi64>, tensor<*xi64>)
  %a = "onnx.node"(%emb, %s#0) <{domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, op_type = "Gather", scope = "model.embed_tokens"}> : (tensor<16x8xf32>, tensor<*xi64>) -> tensor<*xf32>
  %b = "onnx.node"(%emb, %s#1) <{domain = "", name = "/model/embed_tokens/Gather_1", onnx_attrs = {}, op_type = "Gather", scope = "model.embed_tokens"}> : (tensor<16x8xf32>, tensor<*xi64>) -> tensor<*xf32>
  return %a, %b : tensor<*xf32>, tensor<*xf32>
}

// -----

// Within heads, only the whole head or none of it is taken: a partial
// rotary embedding's part is refused.
func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x8xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 512, transposed = false>}) -> tensor<*xf32> {
  %h = "onnx.node"(%emb, %ids) <{domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, op_type = "Gather", scope = "model.embed_tokens"}> : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<*xf32>
  %shape = "onnx.node"() <{domain = "", name = "/model/attn/Constant", onnx_attrs = {value = dense<[0, 0, 2, 4]> : tensor<4xi64>}, op_type = "Constant", scope = "model.attn"}> : () -> tensor<4xi64>
  %heads = "onnx.node"(%h, %shape) <{domain = "", name = "/model/attn/Reshape", onnx_attrs = {}, op_type = "Reshape", scope = "model.attn"}> : (tensor<*xf32>, tensor<4xi64>) -> tensor<*xf32>
  %start = "onnx.node"() <{domain = "", name = "/model/attn/Constant_1", onnx_attrs = {value = dense<0> : tensor<1xi64>}, op_type = "Constant", scope = "model.attn"}> : () -> tensor<1xi64>
  %end = "onnx.node"() <{domain = "", name = "/model/attn/Constant_2", onnx_attrs = {value = dense<3> : tensor<1xi64>}, op_type = "Constant", scope = "model.attn"}> : () -> tensor<1xi64>
  %axis = "onnx.node"() <{domain = "", name = "/model/attn/Constant_3", onnx_attrs = {value = dense<-1> : tensor<1xi64>}, op_type = "Constant", scope = "model.attn"}> : () -> tensor<1xi64>
  // expected-error @+2 {{features [0, 3) of each 4-feature head: a partial rotary embedding (partial_rotary_factor < 1) is not supported}}
  // expected-note @+1 {{while raising}}
  %rot = "onnx.node"(%heads, %start, %end, %axis) <{domain = "", name = "/model/attn/Slice", onnx_attrs = {}, op_type = "Slice", scope = "model.attn"}> : (tensor<*xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  return %rot : tensor<*xf32>
}
