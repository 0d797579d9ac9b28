// RUN: tp-opt %s --tp-raise-onnx --verify-diagnostics

// A Split of an activation outside a Mamba2 mixer (a fused gate_up
// projection) with both outputs read is refused, saying which outputs are
// read and which multi-output nodes raising takes.
module {
  func.func @main_graph(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %emb: tensor<16x8xf32> {onnx.name = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 512, transposed = false>},
      %w: tensor<8x8xf32> {onnx.name = "w", tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 512, length = 256, transposed = false>}) -> tensor<*xf32> {
    %h = "onnx.node"(%emb, %ids) <{domain = "", name = "/model/embed_tokens/Gather", onnx_attrs = {}, op_type = "Gather", scope = "model.embed_tokens"}> : (tensor<16x8xf32>, tensor<?x?xi64>) -> tensor<*xf32>
    %p = "onnx.node"(%h, %w) <{domain = "", name = "/model/layers.0/mlp/gate_up_proj/MatMul", onnx_attrs = {}, op_type = "MatMul", scope = "model.layers.0.mlp.gate_up_proj"}> : (tensor<*xf32>, tensor<8x8xf32>) -> tensor<*xf32>
    // expected-error @+2 {{cannot raise node '/model/layers.0/mlp/Split' (Split, scope 'model.layers.0.mlp', layer 0's block 'mlp'): outputs 0, 1 of this node are read: raising takes a node with several read outputs when they are computed at compile time, when it is a fused block (GroupQueryAttention, SkipSimplifiedLayerNormalization) or inside a Mamba2 mixer; an activation split elsewhere (a fused projection such as qkv_proj or gate_up_proj) is not supported yet}}
    // expected-note @+1 {{while raising a llama graph (as its parameter names suggest)}}
    %s:2 = "onnx.node"(%p) <{domain = "", name = "/model/layers.0/mlp/Split", onnx_attrs = {axis = -1 : i64, num_outputs = 2 : i64}, op_type = "Split", scope = "model.layers.0.mlp"}> : (tensor<*xf32>) -> (tensor<*xf32>, tensor<*xf32>)
    %m = "onnx.node"(%s#0, %s#1) <{domain = "", name = "/model/layers.0/mlp/Mul", onnx_attrs = {}, op_type = "Mul", scope = "model.layers.0.mlp"}> : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
    return %m : tensor<*xf32>
  }
}
