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
// CHECK: // 3 layers (0 first, 2 last): one loop
// CHECK: tprt::Tensor [[RES:v[0-9]+]];
// CHECK-NEXT: [[RES]] = [[H0]];
// CHECK-NEXT: tprt::release([[H0]]);
// CHECK-NEXT: for (size_t [[I:i[0-9]+]] = {{v[0-9]+}}; [[I]] < {{v[0-9]+}}; [[I]] += {{v[0-9]+}}) {
// CHECK-NEXT: tprt::Tensor [[X:v[0-9]+]] = [[RES]];
// CHECK-NEXT: [[RES]] = tprt::Tensor();
// CHECK-NEXT: const char* [[F:v[0-9]+]] = [[NORM]]{{\[}}[[I]]{{\]}};
// CHECK-NEXT: int64_t [[O:v[0-9]+]] = [[NORMOFF]]{{\[}}[[I]]{{\]}};
// CHECK-NEXT: tprt::Tensor [[W:v[0-9]+]] = tprt::load_param([[CTX]], [[F]], [[F]], "m.onnx", [[O]], 16, tprt::DType::F32, {4}, false, -1, 1, 1, {}, {}, tprt::DType::F32, 0.0e+00, false);
// CHECK: double [[E:v[0-9]+]] = [[EPS]]{{\[}}[[I]]{{\]}};
// CHECK-NEXT: tprt::Tensor [[N:v[0-9]+]] = tprt::rms_norm([[CTX]], [[X]], [[W]], [[E]], 0.0e+00, 0, -1);
// CHECK: tprt::load_param([[CTX]], {{v[0-9]+}}, {{v[0-9]+}}, "m.onnx", {{v[0-9]+}}, 64, tprt::DType::F32, {4, 4}, false, -1, 1, 1, {}, {}, tprt::DType::F32, 0.0e+00, false);
// CHECK: tprt::linear([[CTX]], [[N]],
// CHECK: tprt::Tensor [[NEXT:v[0-9]+]] = tprt::add([[CTX]], [[X]],
// CHECK: [[RES]] = [[NEXT]];
// CHECK-NEXT: tprt::release([[NEXT]]);
// CHECK-NEXT: }
// CHECK-NEXT: tprt::Tensor [[OUT:v[0-9]+]] = [[RES]];
// CHECK-NEXT: [[RES]] = tprt::Tensor();
// CHECK: tprt::gelu(
// CHECK: tprt::add([[CTX]], [[OUT]],
// CHECK: tprt::add([[CTX]], {{v[0-9]+}}, [[OUT]], -1);
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
    %r0 = tp.rms_norm %h0, %n0 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32> loc("norm_0")
    %u0 = tp.linear %r0, %w0 {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("up_0")
    %h1 = tp.add %h0, %u0 : tensor<?x?x4xf32>
    %r1 = tp.rms_norm %h1, %n1 {epsilon = 1.0e-5 : f64, weight_offset = 0.0 : f64, tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32> loc("norm_1")
    %u1 = tp.linear %r1, %w1 {tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("up_1")
    %h2 = tp.add %h1, %u1 : tensor<?x?x4xf32>
    %r2 = tp.rms_norm %h2, %n2 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 2 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32> loc("norm_2")
    %u2 = tp.linear %r2, %w2 {tp.layer = 2 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("up_2")
    %h3 = tp.add %h2, %u2 : tensor<?x?x4xf32>
    %r3 = tp.rms_norm %h3, %n3 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 3 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32> loc("norm_3")
    %u3 = tp.linear %r3, %w3 {tp.layer = 3 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("up_3")
    %g3 = tp.gelu %u3 tanh : tensor<?x?x4xf32>
    %h4 = tp.add %h3, %g3 : tensor<?x?x4xf32>
    %o = tp.rms_norm %h4, %nf {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %y = tp.add %o, %h3 : tensor<?x?x4xf32>
    return %y : tensor<?x?x4xf32>
  }
}

// -----

// Layer 0's norm is read after the layers: the loop keeps each layer's
// norm in an array, and the add after it reads element 0, emptying it.
// CHECK: static const char *const tprt_layers0_0[] = {"model.layers.0.input_layernorm.weight", "model.layers.1.input_layernorm.weight", "model.layers.2.input_layernorm.weight"};
// CHECK: tprt::Tensor [[NORMS:v[0-9]+]][3];
// CHECK: // 3 layers (0 first, 2 last): one loop
// CHECK: for (size_t [[I:i[0-9]+]] =
// CHECK: tprt::Tensor [[N:v[0-9]+]] = tprt::rms_norm(
// CHECK-NEXT: [[NORMS]]{{\[}}[[I]]{{\]}} = [[N]];
// CHECK: }
// CHECK: size_t [[ZERO:v[0-9]+]] = 0;
// CHECK-NEXT: tprt::Tensor [[N0:v[0-9]+]] = [[NORMS]]{{\[}}[[ZERO]]{{\]}};
// CHECK-NEXT: [[NORMS]]{{\[}}[[ZERO]]{{\]}} = tprt::Tensor();
// CHECK-NEXT: tprt::add({{v[0-9]+}}, {{v[0-9]+}}, [[N0]], -1);
module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %n0: tensor<4xf32> {tp.fqn = "model.layers.0.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.0.input_layernorm.weight", file = "m.onnx", offset = 256, length = 16, transposed = false>},
      %n1: tensor<4xf32> {tp.fqn = "model.layers.1.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.1.input_layernorm.weight", file = "m.onnx", offset = 272, length = 16, transposed = false>},
      %n2: tensor<4xf32> {tp.fqn = "model.layers.2.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.2.input_layernorm.weight", file = "m.onnx", offset = 288, length = 16, transposed = false>}) -> tensor<?x?x4xf32> {
    %h0 = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %r0 = tp.rms_norm %h0, %n0 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h1 = tp.add %h0, %r0 : tensor<?x?x4xf32>
    %r1 = tp.rms_norm %h1, %n1 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h2 = tp.add %h1, %r1 : tensor<?x?x4xf32>
    %r2 = tp.rms_norm %h2, %n2 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 2 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h3 = tp.add %h2, %r2 : tensor<?x?x4xf32>
    %y = tp.add %h3, %r0 : tensor<?x?x4xf32>
    return %y : tensor<?x?x4xf32>
  }
}

// -----

// A pass over the layers backwards (2, 1, 0) reads each layer's norm and
// input from the forward loop: the forward keeps both per iteration (the
// input as the value carried into the layer), the backward loop reads
// them by the iteration that computed its layer and empties them.
// CHECK: static const int64_t [[BACK:tprt_layers1_[0-9]+]][] = {2, 1, 0};
// CHECK: tprt::Tensor [[IN:v[0-9]+]][3];
// CHECK-NEXT: tprt::Tensor [[NORMS:v[0-9]+]][3];
// CHECK: // 3 layers (0 first, 2 last): one loop
// CHECK: for (size_t [[I:i[0-9]+]] =
// CHECK: tprt::Tensor [[X:v[0-9]+]] = [[VAR:v[0-9]+]];
// CHECK-NEXT: [[VAR]] = tprt::Tensor();
// CHECK-NEXT: [[IN]]{{\[}}[[I]]{{\]}} = [[X]];
// CHECK: tprt::Tensor [[N:v[0-9]+]] = tprt::rms_norm({{v[0-9]+}}, [[X]],
// CHECK-NEXT: [[NORMS]]{{\[}}[[I]]{{\]}} = [[N]];
// CHECK: // 3 layers (2 first, 0 last): one loop
// CHECK: for (size_t [[J:i[0-9]+]] =
// CHECK: int64_t [[E:v[0-9]+]] = [[BACK]]{{\[}}[[J]]{{\]}};
// CHECK-NEXT: tprt::Tensor [[SN:v[0-9]+]] = [[NORMS]]{{\[}}[[E]]{{\]}};
// CHECK-NEXT: [[NORMS]]{{\[}}[[E]]{{\]}} = tprt::Tensor();
// CHECK: tprt::rms_norm({{v[0-9]+}}, [[SN]],
// CHECK: tprt::Tensor [[SX:v[0-9]+]] = [[IN]]{{\[}}[[E]]{{\]}};
// CHECK-NEXT: [[IN]]{{\[}}[[E]]{{\]}} = tprt::Tensor();
// CHECK-NEXT: tprt::mul({{v[0-9]+}}, {{v[0-9]+}}, [[SX]], -1);
module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %n0: tensor<4xf32> {tp.fqn = "model.layers.0.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.0.input_layernorm.weight", file = "m.onnx", offset = 256, length = 16, transposed = false>},
      %n1: tensor<4xf32> {tp.fqn = "model.layers.1.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.1.input_layernorm.weight", file = "m.onnx", offset = 272, length = 16, transposed = false>},
      %n2: tensor<4xf32> {tp.fqn = "model.layers.2.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.2.input_layernorm.weight", file = "m.onnx", offset = 288, length = 16, transposed = false>},
      %nf: tensor<4xf32> {tp.fqn = "model.norm.weight", tp.source = #tp.source<initializer = "model.norm.weight", file = "m.onnx", offset = 304, length = 16, transposed = false>}) -> tensor<?x?x4xf32> {
    %h0 = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %r0 = tp.rms_norm %h0, %n0 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h1 = tp.add %h0, %r0 : tensor<?x?x4xf32>
    %r1 = tp.rms_norm %h1, %n1 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h2 = tp.add %h1, %r1 : tensor<?x?x4xf32>
    %r2 = tp.rms_norm %h2, %n2 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 2 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h3 = tp.add %h2, %r2 : tensor<?x?x4xf32>
    %g3 = tp.rms_norm %h3, %nf {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %b2 = tp.rms_norm %r2, %n2 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 2 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %c2 = tp.mul %b2, %h2 : tensor<?x?x4xf32>
    %g2 = tp.add %g3, %c2 : tensor<?x?x4xf32>
    %b1 = tp.rms_norm %r1, %n1 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %c1 = tp.mul %b1, %h1 : tensor<?x?x4xf32>
    %g1 = tp.add %g2, %c1 : tensor<?x?x4xf32>
    %b0 = tp.rms_norm %r0, %n0 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %c0 = tp.mul %b0, %h0 : tensor<?x?x4xf32>
    %g0 = tp.add %g1, %c0 : tensor<?x?x4xf32>
    return %g0 : tensor<?x?x4xf32>
  }
}

// -----

// Layers in another order (as an init broadcasting in FQN order visits
// layers 0, 1, 10, 11, ..., 2): the tables list them in that order.
// CHECK: static const char *const tprt_layers0_0[] = {"model.layers.0.input_layernorm.weight", "model.layers.2.input_layernorm.weight", "model.layers.1.input_layernorm.weight"};
// CHECK: // 3 layers (0 first, 1 last): one loop
module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %n0: tensor<4xf32> {tp.fqn = "model.layers.0.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.0.input_layernorm.weight", file = "m.onnx", offset = 256, length = 16, transposed = false>},
      %n1: tensor<4xf32> {tp.fqn = "model.layers.1.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.1.input_layernorm.weight", file = "m.onnx", offset = 272, length = 16, transposed = false>},
      %n2: tensor<4xf32> {tp.fqn = "model.layers.2.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.2.input_layernorm.weight", file = "m.onnx", offset = 288, length = 16, transposed = false>}) -> tensor<?x?x4xf32> {
    %h0 = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %r0 = tp.rms_norm %h0, %n0 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %a0 = tp.add %h0, %r0 : tensor<?x?x4xf32>
    %r2 = tp.rms_norm %h0, %n2 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 2 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %a2 = tp.add %a0, %r2 : tensor<?x?x4xf32>
    %r1 = tp.rms_norm %h0, %n1 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %a1 = tp.add %a2, %r1 : tensor<?x?x4xf32>
    return %a1 : tensor<?x?x4xf32>
  }
}

// -----

// Every iteration of the second loop reads layer 1's norm from the first:
// it reads that one element of the array in each iteration and leaves it
// there (emptying it would leave the next iteration nothing to read).
// CHECK: tprt::Tensor [[NORMS:v[0-9]+]][3];
// CHECK: 3 layers (0 first, 2 last): one loop
// CHECK: [[NORMS]]{{\[}}[[I:i[0-9]+]]{{\]}} = {{v[0-9]+}};
// CHECK: 3 layers (2 first, 0 last): one loop
// CHECK: for (
// CHECK: size_t [[ONE:v[0-9]+]] = 1;
// CHECK-NEXT: tprt::Tensor [[R1:v[0-9]+]] = [[NORMS]]{{\[}}[[ONE]]{{\]}};
// CHECK-NOT: = tprt::Tensor();
// CHECK: tprt::mul({{v[0-9]+}}, {{v[0-9]+}}, [[R1]], -1);
module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %n0: tensor<4xf32> {tp.fqn = "model.layers.0.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.0.input_layernorm.weight", file = "m.onnx", offset = 256, length = 16, transposed = false>},
      %n1: tensor<4xf32> {tp.fqn = "model.layers.1.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.1.input_layernorm.weight", file = "m.onnx", offset = 272, length = 16, transposed = false>},
      %n2: tensor<4xf32> {tp.fqn = "model.layers.2.input_layernorm.weight", tp.source = #tp.source<initializer = "model.layers.2.input_layernorm.weight", file = "m.onnx", offset = 288, length = 16, transposed = false>},
      %nf: tensor<4xf32> {tp.fqn = "model.norm.weight", tp.source = #tp.source<initializer = "model.norm.weight", file = "m.onnx", offset = 304, length = 16, transposed = false>}) -> tensor<?x?x4xf32> {
    %h0 = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %r0 = tp.rms_norm %h0, %n0 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h1 = tp.add %h0, %r0 : tensor<?x?x4xf32>
    %r1 = tp.rms_norm %h1, %n1 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h2 = tp.add %h1, %r1 : tensor<?x?x4xf32>
    %r2 = tp.rms_norm %h2, %n2 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 2 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %h3 = tp.add %h2, %r2 : tensor<?x?x4xf32>
    %g3 = tp.rms_norm %h3, %nf {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %b2 = tp.rms_norm %g3, %n2 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 2 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %c2 = tp.mul %b2, %r1 : tensor<?x?x4xf32>
    %g2 = tp.add %g3, %c2 : tensor<?x?x4xf32>
    %b1 = tp.rms_norm %g2, %n1 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %c1 = tp.mul %b1, %r1 : tensor<?x?x4xf32>
    %g1 = tp.add %g2, %c1 : tensor<?x?x4xf32>
    %b0 = tp.rms_norm %g1, %n0 {epsilon = 1.0e-6 : f64, weight_offset = 0.0 : f64, tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %c0 = tp.mul %b0, %r1 : tensor<?x?x4xf32>
    %g0 = tp.add %g1, %c0 : tensor<?x?x4xf32>
    return %g0 : tensor<?x?x4xf32>
  }
}

// -----

// A call's consuming form survives the rolling: each iteration's
// all-reduce takes the product it alone reads.
// CHECK: // 3 layers (0 first, 2 last): one loop
// CHECK: for (size_t
// CHECK: tprt::Tensor [[P:v[0-9]+]] = tprt::linear(
// CHECK-NEXT: tprt::Tensor {{v[0-9]+}} = tprt::all_reduce_sum_consuming({{v[0-9]+}}, [[P]]);
// CHECK-NOT: tprt::release([[P]])
// CHECK: }
module attributes {onnx.file = "m.onnx"} {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %w0: tensor<4x4xf32> {tp.fqn = "model.layers.0.mlp.down_proj.weight", tp.source = #tp.source<initializer = "w0", file = "m.onnx", offset = 256, length = 64, transposed = false>},
      %w1: tensor<4x4xf32> {tp.fqn = "model.layers.1.mlp.down_proj.weight", tp.source = #tp.source<initializer = "w1", file = "m.onnx", offset = 320, length = 64, transposed = false>},
      %w2: tensor<4x4xf32> {tp.fqn = "model.layers.2.mlp.down_proj.weight", tp.source = #tp.source<initializer = "w2", file = "m.onnx", offset = 384, length = 64, transposed = false>}) -> tensor<?x?x4xf32> {
    %h0 = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %p0 = tp.linear %h0, %w0 {tp.layer = 0 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("down_0")
    %s0 = shard.all_reduce %p0 on @tp grid_axes = [0] : tensor<?x?x4xf32> -> tensor<?x?x4xf32>
    %h1 = tp.add %h0, %s0 : tensor<?x?x4xf32>
    %p1 = tp.linear %h1, %w1 {tp.layer = 1 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("down_1")
    %s1 = shard.all_reduce %p1 on @tp grid_axes = [0] : tensor<?x?x4xf32> -> tensor<?x?x4xf32>
    %h2 = tp.add %h1, %s1 : tensor<?x?x4xf32>
    %p2 = tp.linear %h2, %w2 {tp.layer = 2 : i64} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("down_2")
    %s2 = shard.all_reduce %p2 on @tp grid_axes = [0] : tensor<?x?x4xf32> -> tensor<?x?x4xf32>
    %h3 = tp.add %h2, %s2 : tensor<?x?x4xf32>
    return %h3 : tensor<?x?x4xf32>
  }
}
