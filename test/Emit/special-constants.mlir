// Every kind of constant the emitter writes compiles: a non-finite double
// (a Mamba2 mixer's dt clamp of -inf: no lower bound), which EmitC's
// printer would spell as a <cmath> macro the file does not include, is
// spelled through std::numeric_limits, as a call argument and in the layer
// loops' tables; finite ones keep round-trip precision down to denormals.
// RUN: tp-opt %s --tp-to-emitc | tp-translate --mlir-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: %cxx -std=c++17 -fsyntax-only -I%tp_src/runtime/include %t.cpp
// RUN: tp-opt %s --tp-to-emitc=layer-loops=false | tp-translate --mlir-to-cpp > %t-flat.cpp
// RUN: FileCheck %s --check-prefix=FLAT < %t-flat.cpp
// RUN: %cxx -std=c++17 -fsyntax-only -I%tp_src/runtime/include %t-flat.cpp

// CHECK: #include <limits>
// CHECK: static const double [[DTMIN:tprt_layers0_[0-9]+]][] = {-std::numeric_limits<double>::infinity(), 0.0000000000000000e+00, -std::numeric_limits<double>::infinity()};
// CHECK: for (
// CHECK: double [[D:v[0-9]+]] = [[DTMIN]]{{\[}}
// CHECK: tprt::mamba2_mixer({{.*}}, [[D]],
// CHECK: }
// CHECK: tprt::scale({{.*}}, 4.94065645841246{{[0-9]*}}e-324, -1);
// CHECK: tprt::scale({{.*}}, 1.79769313486231{{[0-9]*}}e+308, -1);
// CHECK-NOT: INFINITY

// FLAT-NOT: for (
// FLAT: tprt::mamba2_mixer({{.*}}, -std::numeric_limits<double>::infinity(),
// FLAT: tprt::mamba2_mixer({{.*}}, 0.0e+00,
// FLAT: tprt::mamba2_mixer({{.*}}, -std::numeric_limits<double>::infinity(),
// FLAT-NOT: INFINITY

module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x64xf32> {tp.fqn = "model.embeddings.weight", tp.source = #tp.source<initializer = "model.embeddings.weight", file = "m.onnx", offset = 0, length = 4096, transposed = false>},
      %p0_0: tensor<164x64xf32> {tp.fqn = "model.layers.0.mixer.in_proj.weight", tp.source = #tp.source<initializer = "model.layers.0.mixer.in_proj.weight", file = "m.onnx", offset = 4096, length = 41984, transposed = false>},
      %p0_1: tensor<96x1x4xf32> {tp.fqn = "model.layers.0.mixer.conv1d.weight", tp.source = #tp.source<initializer = "model.layers.0.mixer.conv1d.weight", file = "m.onnx", offset = 46080, length = 1536, transposed = false>},
      %p0_2: tensor<96xf32> {tp.fqn = "model.layers.0.mixer.conv1d.bias", tp.source = #tp.source<initializer = "model.layers.0.mixer.conv1d.bias", file = "m.onnx", offset = 47616, length = 384, transposed = false>},
      %p0_3: tensor<4xf32> {tp.fqn = "model.layers.0.mixer.dt_bias", tp.source = #tp.source<initializer = "model.layers.0.mixer.dt_bias", file = "m.onnx", offset = 48000, length = 16, transposed = false>},
      %p0_4: tensor<4xf32> {tp.fqn = "model.layers.0.mixer.A_log", tp.source = #tp.source<initializer = "model.layers.0.mixer.A_log", file = "m.onnx", offset = 48016, length = 16, transposed = false>},
      %p0_5: tensor<4xf32> {tp.fqn = "model.layers.0.mixer.D", tp.source = #tp.source<initializer = "model.layers.0.mixer.D", file = "m.onnx", offset = 48032, length = 16, transposed = false>},
      %p0_6: tensor<64xf32> {tp.fqn = "model.layers.0.mixer.norm.weight", tp.source = #tp.source<initializer = "model.layers.0.mixer.norm.weight", file = "m.onnx", offset = 48048, length = 256, transposed = false>},
      %p0_7: tensor<64x64xf32> {tp.fqn = "model.layers.0.mixer.out_proj.weight", tp.source = #tp.source<initializer = "model.layers.0.mixer.out_proj.weight", file = "m.onnx", offset = 48304, length = 16384, transposed = false>},
      %p1_0: tensor<164x64xf32> {tp.fqn = "model.layers.1.mixer.in_proj.weight", tp.source = #tp.source<initializer = "model.layers.1.mixer.in_proj.weight", file = "m.onnx", offset = 64688, length = 41984, transposed = false>},
      %p1_1: tensor<96x1x4xf32> {tp.fqn = "model.layers.1.mixer.conv1d.weight", tp.source = #tp.source<initializer = "model.layers.1.mixer.conv1d.weight", file = "m.onnx", offset = 106672, length = 1536, transposed = false>},
      %p1_2: tensor<96xf32> {tp.fqn = "model.layers.1.mixer.conv1d.bias", tp.source = #tp.source<initializer = "model.layers.1.mixer.conv1d.bias", file = "m.onnx", offset = 108208, length = 384, transposed = false>},
      %p1_3: tensor<4xf32> {tp.fqn = "model.layers.1.mixer.dt_bias", tp.source = #tp.source<initializer = "model.layers.1.mixer.dt_bias", file = "m.onnx", offset = 108592, length = 16, transposed = false>},
      %p1_4: tensor<4xf32> {tp.fqn = "model.layers.1.mixer.A_log", tp.source = #tp.source<initializer = "model.layers.1.mixer.A_log", file = "m.onnx", offset = 108608, length = 16, transposed = false>},
      %p1_5: tensor<4xf32> {tp.fqn = "model.layers.1.mixer.D", tp.source = #tp.source<initializer = "model.layers.1.mixer.D", file = "m.onnx", offset = 108624, length = 16, transposed = false>},
      %p1_6: tensor<64xf32> {tp.fqn = "model.layers.1.mixer.norm.weight", tp.source = #tp.source<initializer = "model.layers.1.mixer.norm.weight", file = "m.onnx", offset = 108640, length = 256, transposed = false>},
      %p1_7: tensor<64x64xf32> {tp.fqn = "model.layers.1.mixer.out_proj.weight", tp.source = #tp.source<initializer = "model.layers.1.mixer.out_proj.weight", file = "m.onnx", offset = 108896, length = 16384, transposed = false>},
      %p2_0: tensor<164x64xf32> {tp.fqn = "model.layers.2.mixer.in_proj.weight", tp.source = #tp.source<initializer = "model.layers.2.mixer.in_proj.weight", file = "m.onnx", offset = 125280, length = 41984, transposed = false>},
      %p2_1: tensor<96x1x4xf32> {tp.fqn = "model.layers.2.mixer.conv1d.weight", tp.source = #tp.source<initializer = "model.layers.2.mixer.conv1d.weight", file = "m.onnx", offset = 167264, length = 1536, transposed = false>},
      %p2_2: tensor<96xf32> {tp.fqn = "model.layers.2.mixer.conv1d.bias", tp.source = #tp.source<initializer = "model.layers.2.mixer.conv1d.bias", file = "m.onnx", offset = 168800, length = 384, transposed = false>},
      %p2_3: tensor<4xf32> {tp.fqn = "model.layers.2.mixer.dt_bias", tp.source = #tp.source<initializer = "model.layers.2.mixer.dt_bias", file = "m.onnx", offset = 169184, length = 16, transposed = false>},
      %p2_4: tensor<4xf32> {tp.fqn = "model.layers.2.mixer.A_log", tp.source = #tp.source<initializer = "model.layers.2.mixer.A_log", file = "m.onnx", offset = 169200, length = 16, transposed = false>},
      %p2_5: tensor<4xf32> {tp.fqn = "model.layers.2.mixer.D", tp.source = #tp.source<initializer = "model.layers.2.mixer.D", file = "m.onnx", offset = 169216, length = 16, transposed = false>},
      %p2_6: tensor<64xf32> {tp.fqn = "model.layers.2.mixer.norm.weight", tp.source = #tp.source<initializer = "model.layers.2.mixer.norm.weight", file = "m.onnx", offset = 169232, length = 256, transposed = false>},
      %p2_7: tensor<64x64xf32> {tp.fqn = "model.layers.2.mixer.out_proj.weight", tp.source = #tp.source<initializer = "model.layers.2.mixer.out_proj.weight", file = "m.onnx", offset = 169488, length = 16384, transposed = false>}) -> tensor<?x?x64xf32> {
    %h0 = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x64xf32>) -> tensor<?x?x64xf32>
    %m0 = tp.mamba2_mixer %h0, %p0_0, %p0_1, %p0_2, %p0_3, %p0_4, %p0_5, %p0_6, %p0_7 {conv_kernel = 4 : i64, dt_min = 0xFFF0000000000000 : f64, head_dim = 16 : i64, n_groups = 2 : i64, norm_eps = 1.0e-5 : f64, num_heads = 4 : i64, state_size = 8 : i64, tp.layer = 0 : i64} : (tensor<?x?x64xf32>, tensor<164x64xf32>, tensor<96x1x4xf32>, tensor<96xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %h1 = tp.add %h0, %m0 : tensor<?x?x64xf32>
    %m1 = tp.mamba2_mixer %h1, %p1_0, %p1_1, %p1_2, %p1_3, %p1_4, %p1_5, %p1_6, %p1_7 {conv_kernel = 4 : i64, dt_min = 0.0 : f64, head_dim = 16 : i64, n_groups = 2 : i64, norm_eps = 1.0e-5 : f64, num_heads = 4 : i64, state_size = 8 : i64, tp.layer = 1 : i64} : (tensor<?x?x64xf32>, tensor<164x64xf32>, tensor<96x1x4xf32>, tensor<96xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %h2 = tp.add %h1, %m1 : tensor<?x?x64xf32>
    %m2 = tp.mamba2_mixer %h2, %p2_0, %p2_1, %p2_2, %p2_3, %p2_4, %p2_5, %p2_6, %p2_7 {conv_kernel = 4 : i64, dt_min = 0xFFF0000000000000 : f64, head_dim = 16 : i64, n_groups = 2 : i64, norm_eps = 1.0e-5 : f64, num_heads = 4 : i64, state_size = 8 : i64, tp.layer = 2 : i64} : (tensor<?x?x64xf32>, tensor<164x64xf32>, tensor<96x1x4xf32>, tensor<96xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
    %h3 = tp.add %h2, %m2 : tensor<?x?x64xf32>
    %s0 = tp.scale %h3 by 4.9406564584124654E-324 : tensor<?x?x64xf32>
    %s1 = tp.scale %s0 by 1.7976931348623157E+308 : tensor<?x?x64xf32>
    return %s1 : tensor<?x?x64xf32>
  }
}
