// RUN: tp-opt %s --tp-to-emitc | tp-translate --mlir-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: %cxx -std=c++17 -fsyntax-only -I%tp_src/runtime/include %t.cpp

// Names and paths from the model file reach the generated C++ only escaped:
// a node name with a newline, `*/`, a byte that is not UTF-8 or a trailing
// backslash stays inside its comment, and a file name with quotes stays
// inside its string literal (the C++ compiles).
// CHECK: const char *const tprt_model_path = "dir/\"q\"\134\012.onnx";
// CHECK: tprt::load_param({{v[0-9]+}}, "w\"\012x", "init\134", "dir/\"q\"\134\012.onnx", 0, 64, tprt::DType::F32, {4, 4}, false, -1, 1, 1, {}, {}, tprt::DType::F32, 0.0e+00, false);
// CHECK-NEXT: // /model/a\012int injected = 1; */ \377\134
// CHECK-NEXT: tprt::Tensor {{v[0-9]+}} = tprt::linear(
// CHECK-NOT: injected = 1;{{$}}
module attributes {onnx.file = "dir/\22q\22\\\0A.onnx"} {
  func.func @forward(%ids: tensor<?x?xi64> {onnx.name = "input_ids"},
      %x: tensor<?x?x4xf32> {onnx.name = "attention_mask"},
      %w: tensor<4x4xf32> {tp.fqn = "w\22\0Ax", tp.source = #tp.source<initializer = "init\\", file = "dir/\22q\22\\\0A.onnx", offset = 0, length = 64, transposed = false>}) -> tensor<?x?x4xf32> {
    %y = tp.linear %x, %w : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32> loc("/model/a\0Aint injected = 1; */ \FF\\")
    return %y : tensor<?x?x4xf32>
  }
}
