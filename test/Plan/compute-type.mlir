// RUN: split-file %s %t
// RUN: tp-opt %t/f32-to-bf16.mlir "--tp-compute-type=type=bf16" | FileCheck %t/f32-to-bf16.mlir
// RUN: tp-opt %t/f32-to-bf16.mlir "--tp-compute-type=type=f32" | FileCheck %t/f32-to-bf16.mlir --check-prefix=SAME
// RUN: tp-opt %t/auto.mlir --tp-compute-type | FileCheck %t/auto.mlir
// RUN: tp-opt %t/auto.mlir "--tp-compute-type=type=f32" | FileCheck %t/auto.mlir --check-prefix=F32
// RUN: tp-opt %t/auto.mlir "--tp-compute-type=type=bf16" --tp-to-emitc | tp-translate --mlir-to-cpp | FileCheck %t/auto.mlir --check-prefix=CPP
// RUN: tp-opt %t/errors.mlir "--tp-compute-type=type=bf16" --split-input-file --verify-diagnostics -o /dev/null
// RUN: not tp-opt %t/f32-to-bf16.mlir "--tp-compute-type=type=fp8" 2>&1 | FileCheck %t/f32-to-bf16.mlir --check-prefix=NAME

//--- f32-to-bf16.mlir
// An f32 checkpoint run in bf16: every parameter is held in bf16 with its
// stored type on its source, every activation is bf16; f32 changes nothing.
shard.grid @tp(shape = 2)

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %{{.*}}: tensor<2x8xi64>
// CHECK-SAME: tensor<16x4xbf16> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "e", file = "m.onnx", offset = 0, length = 256, transposed = false, stored_type = f32>}
// CHECK-SAME: tensor<8x4xbf16> {tp.fqn = "model.up.weight", tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 256, length = 128, transposed = true, stored_type = f32>}
// CHECK-SAME: -> tensor<2x8x8xbf16>
// SAME-LABEL: func.func @forward
// SAME-SAME: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "e", file = "m.onnx", offset = 0, length = 256, transposed = false>}
// SAME-SAME: -> tensor<2x8x8xf32>
func.func @forward(%ids: tensor<2x8xi64>,
    %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "e", file = "m.onnx", offset = 0, length = 256, transposed = false>},
    %w: tensor<8x4xf32> {tp.fqn = "model.up.weight", tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 256, length = 128, transposed = true>})
    -> tensor<2x8x8xf32> {
  // CHECK: tp.embedding %{{.*}}, %{{.*}} : (tensor<2x8xi64>, tensor<16x4xbf16>) -> tensor<2x8x4xbf16>
  %h = tp.embedding %ids, %emb : (tensor<2x8xi64>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
  // The annotation of a parameter is of the parameter's type.
  // CHECK: shard.shard %{{.*}} to %{{.*}} : tensor<8x4xbf16>
  %s = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<8x4xf32>
  // CHECK: tp.linear %{{.*}}, %{{.*}} : (tensor<2x8x4xbf16>, tensor<8x4xbf16>) -> tensor<2x8x8xbf16>
  %y = tp.linear %h, %ws : (tensor<2x8x4xf32>, tensor<8x4xf32>) -> tensor<2x8x8xf32>
  // CHECK: tp.silu %{{.*}} : tensor<2x8x8xbf16>
  %z = tp.silu %y : tensor<2x8x8xf32>
  return %z : tensor<2x8x8xf32>
}
// NAME: error: tp-compute-type: type must be auto, f32, bf16 or f16, got 'fp8'

//--- auto.mlir
// A bf16 checkpoint with two parameters stored in f32. auto computes in
// bf16 (most bytes). The norm weight, which rms_norm reads in any float
// type, keeps f32 (as transformers keeps NemotronH's A_log and D); the
// embedding table, whose rows are the embedding's output, is held in bf16
// after all. In f32 every parameter is held in f32.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<16x4xbf16> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "e", file = "m.onnx", offset = 0, length = 256, transposed = false, stored_type = f32>}
// CHECK-SAME: tensor<4xf32> {tp.fqn = "model.norm.weight", tp.source = #tp.source<initializer = "n", file = "m.onnx", offset = 256, length = 16, transposed = false>}
// CHECK-SAME: tensor<64x4xbf16> {tp.fqn = "model.up.weight", tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 272, length = 512, transposed = false>}
// CHECK-SAME: -> tensor<2x8x64xbf16>
// F32-LABEL: func.func @forward
// F32-SAME: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "e", file = "m.onnx", offset = 0, length = 256, transposed = false>}
// F32-SAME: tensor<64x4xf32> {tp.fqn = "model.up.weight", tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 272, length = 512, transposed = false, stored_type = bf16>}
// F32-SAME: -> tensor<2x8x64xf32>
// The program loads each parameter from its stored type into its held one.
// CPP: tprt::load_param({{v[0-9]+}}, "model.embed_tokens.weight", "e", "m.onnx", 0, 256, tprt::DType::F32, {16, 4}, false, -1, 1, 1, {}, {}, tprt::DType::BF16, 0.0e+00, false);
// CPP: tprt::load_param({{v[0-9]+}}, "model.norm.weight", "n", "m.onnx", 256, 16, tprt::DType::F32, {4}, false, -1, 1, 1, {}, {}, tprt::DType::F32, 0.0e+00, false);
// CPP: tprt::load_param({{v[0-9]+}}, "model.up.weight", "w", "m.onnx", 272, 512, tprt::DType::BF16, {64, 4}, false, -1, 1, 1, {}, {}, tprt::DType::BF16, 0.0e+00, false);
func.func @forward(%ids: tensor<2x8xi64> {onnx.name = "input_ids"},
    %emb: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight", tp.source = #tp.source<initializer = "e", file = "m.onnx", offset = 0, length = 256, transposed = false>},
    %nw: tensor<4xf32> {tp.fqn = "model.norm.weight", tp.source = #tp.source<initializer = "n", file = "m.onnx", offset = 256, length = 16, transposed = false>},
    %w: tensor<64x4xbf16> {tp.fqn = "model.up.weight", tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 272, length = 512, transposed = false>})
    -> tensor<2x8x64xf32> {
  // CHECK: tp.embedding %{{.*}}, %{{.*}} : (tensor<2x8xi64>, tensor<16x4xbf16>) -> tensor<2x8x4xbf16>
  %h = tp.embedding %ids, %emb : (tensor<2x8xi64>, tensor<16x4xf32>) -> tensor<2x8x4xf32>
  // CHECK: tp.rms_norm %{{.*}}, %{{.*}} {epsilon = {{.*}}} : (tensor<2x8x4xbf16>, tensor<4xf32>) -> tensor<2x8x4xbf16>
  %n = tp.rms_norm %h, %nw {epsilon = 1.0e-06 : f64} : (tensor<2x8x4xf32>, tensor<4xf32>) -> tensor<2x8x4xf32>
  // CHECK: tp.linear %{{.*}}, %{{.*}} : (tensor<2x8x4xbf16>, tensor<64x4xbf16>) -> tensor<2x8x64xbf16>
  %y = tp.linear %n, %w : (tensor<2x8x4xf32>, tensor<64x4xbf16>) -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

//--- errors.mlir
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{tp-compute-type: arith.addf is not a tp or shard op: its types cannot be changed}}
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
