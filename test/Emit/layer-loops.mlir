// RUN: tp-opt %s --split-input-file --tp-to-emitc | tp-translate --mlir-to-cpp | FileCheck %s
// RUN: tp-opt %s --split-input-file --tp-to-emitc=layer-loops=false | tp-translate --mlir-to-cpp | FileCheck %s --check-prefix=FLAT
// The first case's C++ compiles.
// RUN: sed '/^\/\/ -----/q' %s > %t.mlir
// RUN: tp-opt %t.mlir --tp-to-emitc | tp-translate --mlir-to-cpp > %t.cpp
// RUN: %cxx -std=c++17 -fsyntax-only -I%tp_src/runtime/include %t.cpp

// Layers 0 to 2 make the same calls (layer 1's norm has another epsilon: a
// column); layer 3 adds a GELU and stays as it is. Each iteration loads its
// layer's parameters from the tables (an FQN that is also the initializer's
// name is one column), the residual stream is carried in a variable, and
// layer 2's output, read after the loop by layer 3 and the last add, leaves
// it in that variable.
// CHECK: static const double [[EPS:tprt_layers0_[0-9]+]][] = {9.9999999999999995e-07, 1.0000000000000001e-05, 9.9999999999999995e-07};
// CHECK-NEXT: static const char *const [[NORM:tprt_layers0_[0-9]+]][] = {"model.layers.0.input_layernorm.weight", "model.layers.1.input_layernorm.weight", "model.layers.2.input_layernorm.weight"};
// CHECK-NEXT: static const int64_t [[NORMOFF:tprt_layers0_[0-9]+]][] = {256, 336, 416};
// CHECK-NEXT: static const char *const [[UP:tprt_layers0_[0-9]+]][] = {"model.layers.0.mlp.up_proj.weight", "model.layers.1.mlp.up_proj.weight", "model.layers.2.mlp.up_proj.weight"};
// CHECK-NEXT: static const char *const [[UPINIT:tprt_layers0_[0-9]+]][] = {"w0", "w1", "w2"};
// CHECK-NEXT: static const int64_t [[UPOFF:tprt_layers0_[0-9]+]][] = {272, 352, 432};
// CHECK: tprt::Tensor tprt_model_forward(tprt::Context& [[CTX:v[0-9]+]],
// CHECK-NOT: model.layers.{{[0-2]}}
// CHECK: tprt::load_param([[CTX]], "model.layers.3.input_layernorm.weight"
// CHECK: tprt::Tensor [[H0:v[0-9]+]] = tprt::embedding(
// CHECK: // layers 0 to 2: one loop
// CHECK: tprt::Tensor [[RES:v[0-9]+]];
// CHECK-NEXT: [[RES]] = [[H0]];
// CHECK-NEXT: tprt::release([[H0]]);
// CHECK-NEXT: for (size_t [[I:i[0-9]+]] = {{v[0-9]+}}; [[I]] < {{v[0-9]+}}; [[I]] += {{v[0-9]+}}) {
// CHECK-NEXT: tprt::Tensor [[X:v[0-9]+]] = [[RES]];
// CHECK-NEXT: [[RES]] = tprt::Tensor();
// CHECK-NEXT: const char* [[F:v[0-9]+]] = [[NORM]]{{\[}}[[I]]{{\]}};
// CHECK-NEXT: int64_t [[O:v[0-9]+]] = [[NORMOFF]]{{\[}}[[I]]{{\]}};
// CHECK-NEXT: tprt::Tensor [[W:v[0-9]+]] = tprt::load_param([[CTX]], [[F]], [[F]], "m.onnx", [[O]], 16, tprt::DType::F32, {4}, false, -1, 1, 1);
// CHECK: double [[E:v[0-9]+]] = [[EPS]]{{\[}}[[I]]{{\]}};
// CHECK-NEXT: tprt::Tensor [[N:v[0-9]+]] = tprt::rms_norm([[CTX]], [[X]], [[W]], [[E]], 0.0e+00, 0);
// CHECK: tprt::load_param([[CTX]], {{v[0-9]+}}, {{v[0-9]+}}, "m.onnx", {{v[0-9]+}}, 64, tprt::DType::F32, {4, 4}, false, -1, 1, 1);
// CHECK: tprt::linear([[CTX]], [[N]],
// CHECK: tprt::Tensor [[NEXT:v[0-9]+]] = tprt::add([[CTX]], [[X]],
// CHECK: [[RES]] = [[NEXT]];
// CHECK-NEXT: tprt::release([[NEXT]]);
// CHECK-NEXT: }
// CHECK-NEXT: tprt::Tensor [[OUT:v[0-9]+]] = [[RES]];
// CHECK-NEXT: [[RES]] = tprt::Tensor();
// CHECK: tprt::gelu(
// CHECK: tprt::add([[CTX]], [[OUT]],
// CHECK: tprt::add([[CTX]], {{v[0-9]+}}, [[OUT]]);
// CHECK-NOT: for (

// Without loops every layer is spelled out.
// FLAT-NOT: for (
// FLAT: tprt::load_param({{v[0-9]+}}, "model.layers.2.mlp.up_proj.weight", "w2", "m.onnx", 432, 64,
// FLAT-NOT: for (

module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %n0: tensor<4xf32> {tp.fqn = "model.layers.0.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.0.input_layernorm.weight", file = "m.onnx", offset = 256, length = 16, transposed = false>},
      %w0: tensor<4x4xf32> {tp.fqn = "model.layers.0.mlp.up_proj.weight", tp.source = #tp.source<initializer = "w0", file = "m.onnx", offset = 272, length = 64, transposed = false>},
      %n1: tensor<4xf32> {tp.fqn = "model.layers.1.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.1.input_layernorm.weight", file = "m.onnx", offset = 336, length = 16, transposed = false>},
      %w1: tensor<4x4xf32> {tp.fqn = "model.layers.1.mlp.up_proj.weight", tp.source = #tp.source<initializer = "w1", file = "m.onnx", offset = 352, length = 64, transposed = false>},
      %n2: tensor<4xf32> {tp.fqn = "model.layers.2.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.2.input_layernorm.weight", file = "m.onnx", offset = 416, length = 16, transposed = false>},
      %w2: tensor<4x4xf32> {tp.fqn = "model.layers.2.mlp.up_proj.weight", tp.source = #tp.source<initializer = "w2", file = "m.onnx", offset = 432, length = 64, transposed = false>},
      %n3: tensor<4xf32> {tp.fqn = "model.layers.3.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.3.input_layernorm.weight", file = "m.onnx", offset = 496, length = 16, transposed = false>},
      %w3: tensor<4x4xf32> {tp.fqn = "model.layers.3.mlp.up_proj.weight", tp.source = #tp.source<initializer = "w3", file = "m.onnx", offset = 512, length = 64, transposed = false>},
      %nf: tensor<4xf32> {tp.fqn = "model.norm.weight", tp.source = #tp.source<initializer = "model.norm.weight", file = "m.onnx", offset = 576, length = 16, transposed = false>}) -> tensor<?x?x4xf32> {
    %h0 = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32> loc("/model/embed_tokens/Gather")
    %r0 = tp.rms_norm %h0, %n0 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32> loc("norm_0")
    %u0 = tp.linear %r0, %w0 : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("up_0")
    %h1 = tp.add %h0, %u0 : tensor<?x?x4xf32>
    %r1 = tp.rms_norm %h1, %n1 {epsilon = 1.0e-5 : f64, weight_offset = 0.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32> loc("norm_1")
    %u1 = tp.linear %r1, %w1 : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("up_1")
    %h2 = tp.add %h1, %u1 : tensor<?x?x4xf32>
    %r2 = tp.rms_norm %h2, %n2 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32> loc("norm_2")
    %u2 = tp.linear %r2, %w2 : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("up_2")
    %h3 = tp.add %h2, %u2 : tensor<?x?x4xf32>
    %r3 = tp.rms_norm %h3, %n3 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32> loc("norm_3")
    %u3 = tp.linear %r3, %w3 : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("up_3")
    %g3 = tp.gelu %u3 tanh : tensor<?x?x4xf32>
    %h4 = tp.add %h3, %g3 : tensor<?x?x4xf32>
    %o = tp.rms_norm %h4, %nf {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %y = tp.add %o, %h3 : tensor<?x?x4xf32>
    return %y : tensor<?x?x4xf32>
  }
}

// -----

// Layer 0's norm is read after the layers: a loop from layer 0 would have
// to keep it, so the loop starts at layer 1.
// CHECK: static const char *const tprt_layers0_0[] = {"model.layers.1.input_layernorm.weight", "model.layers.2.input_layernorm.weight"};
// CHECK: tprt::rms_norm(
// CHECK: // layers 1 to 2: one loop
// CHECK: for (
module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %n0: tensor<4xf32> {tp.fqn = "model.layers.0.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.0.input_layernorm.weight", file = "m.onnx", offset = 256, length = 16, transposed = false>},
      %n1: tensor<4xf32> {tp.fqn = "model.layers.1.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.1.input_layernorm.weight", file = "m.onnx", offset = 272, length = 16, transposed = false>},
      %n2: tensor<4xf32> {tp.fqn = "model.layers.2.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.2.input_layernorm.weight", file = "m.onnx", offset = 288, length = 16, transposed = false>}) -> tensor<?x?x4xf32> {
    %h0 = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %r0 = tp.rms_norm %h0, %n0 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h1 = tp.add %h0, %r0 : tensor<?x?x4xf32>
    %r1 = tp.rms_norm %h1, %n1 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h2 = tp.add %h1, %r1 : tensor<?x?x4xf32>
    %r2 = tp.rms_norm %h2, %n2 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h3 = tp.add %h2, %r2 : tensor<?x?x4xf32>
    %y = tp.add %h3, %r0 : tensor<?x?x4xf32>
    return %y : tensor<?x?x4xf32>
  }
}
