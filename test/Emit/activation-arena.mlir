// RUN: tp-opt %s --tp-to-emitc | tp-translate --mlir-to-cpp | FileCheck %s

// The plan (tp-plan-activations' attributes) becomes a table of buffers
// before the function, one tprt::ActivationArena sized from the input ids
// at its start, and each placed op's slot as its runtime call's last
// argument; ops without a slot pass -1.
// CHECK: static const tprt::PlannedBuffer tprt_model_forward_buffers[] = {{[{][{]}}64, 16}, {0, 32}};
// CHECK: tprt::Tensor tprt_model_forward(tprt::Context& [[C:v[0-9]+]], tprt::Tensor [[I:v[0-9]+]], tprt::Tensor [[M:v[0-9]+]]) {
// CHECK: tprt::ActivationArena {{v[0-9]+}} = tprt::ActivationArena([[C]], tprt_model_forward_buffers, 2, 128, [[I]]);
// CHECK: tprt::Tensor [[H:v[0-9]+]] = tprt::embedding([[C]], [[I]], {{v[0-9]+}}, 0);
// CHECK: tprt::linear([[C]], [[H]], {{v[0-9]+}}, tprt::LinearForm::Flat, 1);
// CHECK: tprt::linear([[C]], {{v[0-9]+}}, {{v[0-9]+}}, tprt::LinearForm::Flat, -1);
module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"}, %mask: tensor<?x?xi64> {onnx.name = "attention_mask"},
      %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "model.embed_tokens.weight", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %w: tensor<8x4xf32> {tp.fqn = "model.up.weight", tp.source = #tp.source<initializer = "onnx::MatMul_3", file = "m.onnx", offset = 272, length = 128, transposed = true>},
      %w2: tensor<8x8xf32> {tp.fqn = "model.out.weight", tp.source = #tp.source<initializer = "onnx::MatMul_4", file = "m.onnx", offset = 400, length = 256, transposed = true>}) -> tensor<?x?x8xf32>
      attributes {tp.activation_bytes_per_token = 128 : i64, tp.activation_buffers = array<i64: 64, 16, 0, 32>} {
    %h = tp.embedding %ids, %emb {tp.activation_slot = 0 : i64} : (tensor<?x?xi64>, tensor<16x4xf32>) -> tensor<?x?x4xf32>
    %u = tp.linear %h, %w {tp.activation_slot = 1 : i64} : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %o = tp.linear %u, %w2 : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    return %o : tensor<?x?x8xf32>
  }
}
