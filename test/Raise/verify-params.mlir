// RUN: tp-opt %s --split-input-file --tp-verify-params --verify-diagnostics | FileCheck %s

// Distinct FQNs and disjoint byte ranges: accepted, IR unchanged.
// CHECK-LABEL: func.func @ok
// CHECK-SAME: tp.fqn = "model.embed_tokens.weight"
// CHECK-SAME: tp.fqn = "model.norm.weight"
func.func @ok(%e: tensor<16x4xf32> {tp.fqn = "model.embed_tokens.weight",
      tp.source = #tp.source<initializer = "e", file = "m.onnx", offset = 0, length = 256, transposed = false>},
    %n: tensor<4xf32> {tp.fqn = "model.norm.weight",
      tp.source = #tp.source<initializer = "n", file = "m.onnx", offset = 256, length = 16, transposed = false>},
    %x: tensor<4xf32>) {
  return
}

// Two arguments reading one identical byte range (the same bytes) are allowed.
// CHECK-LABEL: func.func @same_range
func.func @same_range(%a: tensor<4xf32> {tp.fqn = "a.weight",
      tp.source = #tp.source<initializer = "a", file = "m.onnx", offset = 64, length = 16, transposed = false>},
    %b: tensor<4xf32> {tp.fqn = "b.weight",
      tp.source = #tp.source<initializer = "a", file = "m.onnx", offset = 64, length = 16, transposed = false>}) {
  return
}

// Same offsets in different files do not overlap.
// CHECK-LABEL: func.func @two_files
func.func @two_files(%a: tensor<4xf32> {tp.fqn = "a.weight",
      tp.source = #tp.source<initializer = "a", file = "m.onnx", offset = 0, length = 16, transposed = false>},
    %b: tensor<4xf32> {tp.fqn = "b.weight",
      tp.source = #tp.source<initializer = "b", file = "m.onnx_data", offset = 0, length = 16, transposed = false>}) {
  return
}

// -----

// expected-error @+1 {{parameter 'model.norm.weight' is declared twice, by arguments 0 and 2}}
func.func @duplicate(%a: tensor<4xf32> {tp.fqn = "model.norm.weight"},
    %b: tensor<4xf32> {tp.fqn = "model.layers.0.input_layernorm.weight"},
    %c: tensor<4xf32> {tp.fqn = "model.norm.weight"}) {
  return
}

// -----

// expected-error @+1 {{parameter 'b.weight' (bytes [8, 24) of 'm.onnx') overlaps parameter 'a.weight' (bytes [0, 16))}}
func.func @overlap(%a: tensor<4xf32> {tp.fqn = "a.weight",
      tp.source = #tp.source<initializer = "a", file = "m.onnx", offset = 0, length = 16, transposed = false>},
    %b: tensor<4xf32> {tp.fqn = "b.weight",
      tp.source = #tp.source<initializer = "b", file = "m.onnx", offset = 8, length = 16, transposed = false>}) {
  return
}

// -----

// expected-error @+1 {{parameter 'a.weight': source range overflows (offset 18446744073709551615, length 16)}}
func.func @wrap(%a: tensor<4xf32> {tp.fqn = "a.weight",
      tp.source = #tp.source<initializer = "a", file = "m.onnx", offset = 18446744073709551615, length = 16, transposed = false>}) {
  return
}
