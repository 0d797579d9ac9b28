// RUN: tp-opt %s --tp-to-emitc | FileCheck %s
// RUN: tp-opt %s --tp-to-emitc | tp-translate --mlir-to-cpp | FileCheck %s --check-prefix=CPP

// One load_param per parameter (FQN, source, canonical shape, transposition)
// and one call per op, attributes as literals, the ONNX node in a comment.
// CHECK: emitc.include "tprt/tprt.h"
// CHECK: emitc.verbatim "const char *const tprt_model_path = \22m.onnx\22;"
// CHECK: emitc.verbatim "const int tprt_model_tp_size = 1;"
// CHECK: emitc.verbatim "const int tprt_model_sequence_multiple = 1;"
// CHECK: emitc.func @tprt_model_forward(%[[CTX:.*]]: !emitc.opaque<"tprt::Context&">, %[[IDS:.*]]: !emitc.opaque<"tprt::Tensor">, %[[MASK:.*]]: !emitc.opaque<"tprt::Tensor">) -> !emitc.opaque<"tprt::Tensor">
// CHECK: %[[E:.*]] = call_opaque "tprt::load_param"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"\22model.embed_tokens.weight\22">, #emitc.opaque<"\22model.embed_tokens.weight\22">, #emitc.opaque<"\22m.onnx\22">, 0, 256, #emitc.opaque<"tprt::DType::F32">, #emitc.opaque<"{16, 4}">, false, -1 : i32, 1, 1, #emitc.opaque<"{}">, #emitc.opaque<"{}">, #emitc.opaque<"tprt::DType::F32">, 0.000000e+00, false]}
// CHECK: %[[W:.*]] = call_opaque "tprt::load_param"(%[[CTX]]) {args = [0 : index, #emitc.opaque<"\22model.up.weight\22">, #emitc.opaque<"\22onnx::MatMul_3\22">, #emitc.opaque<"\22m.onnx\22">, 272, 128, #emitc.opaque<"tprt::DType::F32">, #emitc.opaque<"{8, 4}">, true, -1 : i32, 1, 1, #emitc.opaque<"{}">, #emitc.opaque<"{}">, #emitc.opaque<"tprt::DType::F32">, 0.000000e+00, false]}
// CHECK: verbatim "// /model/embed_tokens/Gather"
// CHECK-NEXT: %[[H:.*]] = call_opaque "tprt::embedding"(%[[CTX]], %[[IDS]], %[[E]])
// CHECK: %[[N:.*]] = call_opaque "tprt::rms_norm"(%[[CTX]], %[[H]], %{{.*}}) {args = [0 : index, 1 : index, 2 : index, 9.9999999999999995E-7, 1.000000e+00, 0, -1]}
// CHECK: %[[L:.*]] = call_opaque "tprt::linear_epilogue"(%[[CTX]], %[[N]], %[[W]], %{{.*}}) {args = [0 : index, 1 : index, 2 : index, 3 : index, #emitc.opaque<"tprt::LinearForm::Flat">, #emitc.opaque<"tprt::LinearEpilogue::Bias">, -1]}
// CHECK: call_opaque "tprt::attention"(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}, %[[MASK]]) {args = [0 : index, 1 : index, 2 : index, 3 : index, 4 : index, 2, 2, 4, 5.000000e-01, true, 3, 0.000000e+00, -1]}
// CHECK: call_opaque "tprt::attention"(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}) {args = [0 : index, 1 : index, 2 : index, 3 : index, #emitc.opaque<"tprt::Tensor()">, 2, 2, 4, 5.000000e-01, false, 0, 0.000000e+00, -1]}
// CHECK: call_opaque "tprt::gelu"(%[[CTX]], %{{.*}}) {args = [0 : index, 1 : index, true, -1]}
// CHECK: return %{{.*}} : !emitc.opaque<"tprt::Tensor">
// CHECK-NOT: func.func

// CPP: #include "tprt/tprt.h"
// CPP: const char *const tprt_model_path = "m.onnx";
// CPP: tprt::Tensor tprt_model_forward(tprt::Context& [[C:v[0-9]+]], tprt::Tensor [[I:v[0-9]+]], tprt::Tensor [[M:v[0-9]+]]) {
// CPP: tprt::load_param([[C]], "model.up.weight", "onnx::MatMul_3", "m.onnx", 272, 128, tprt::DType::F32, {8, 4}, true, -1, 1, 1, {}, {}, tprt::DType::F32, 0.0e+00, false);
// CPP: // /model/embed_tokens/Gather
// CPP-NEXT: tprt::embedding([[C]], [[I]], v{{[0-9]+}}, -1);
module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}, %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %nw: tensor<4xf32> {tp.fqn = "model.norm.weight", tp.source = #tp.source<initializer = "model.norm.weight", file = "m.onnx", offset = 256, length = 16, transposed = false>},
      %w: tensor<8x4xf32> {tp.fqn = "model.up.weight", tp.source = #tp.source<initializer = "onnx::MatMul_3", file = "m.onnx", offset = 272, length = 128, transposed = true>},
      %b: tensor<8xf32> {tp.fqn = "model.up.bias", tp.source = #tp.source<initializer = "model.up.bias", file = "m.onnx", offset = 400, length = 32, transposed = false>}) -> tensor<?x?x8xf32> {
    %h = tp.embedding %ids, %emb : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32> loc("/model/embed_tokens/Gather")
    %n = tp.rms_norm %h, %nw {epsilon = 1.0e-6 : f64, weight_offset = 1.0 : f64} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
    %u = tp.linear %n, %w, %b : (tensor<?x?x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
    %k = tp.linear %n, %w : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %a = tp.attention %u, %k, %k mask %mask {causal, head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64, sliding_window = 3 : i64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?xi64>) -> tensor<?x?x8xf32>
    %a2 = tp.attention %a, %k, %k {head_dim = 4 : i64, num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f64} : (tensor<?x?x8xf32>, tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
    %g = tp.gelu %a2 tanh : tensor<?x?x8xf32>
    return %g : tensor<?x?x8xf32>
  }
}

