// RUN: tp-opt %s --split-input-file --tp-to-emitc | tp-translate --mlir-to-cpp | FileCheck %s
// RUN: tp-opt %s --split-input-file --tp-to-emitc | FileCheck %s --check-prefix=IR
// IR-NOT: tp.consuming_form

// An all-reduce that is its input's last reader takes the input (and may
// sum in its storage); one whose input is read afterwards copies it, and
// the input is released after that later reader.
// The IR keeps no trace of the choice.
// CHECK-LABEL: tprt::Tensor tprt_model_forward(
// CHECK: tprt::Tensor [[P:v[0-9]+]] = tprt::linear_add([[C:v[0-9]+]], [[X:v[0-9]+]], [[W:v[0-9]+]], [[X]], tprt::LinearForm::Flat, true);
// CHECK-NEXT: tprt::Tensor [[S:v[0-9]+]] = tprt::all_reduce_sum_consuming([[C]], [[P]]);
// CHECK-NOT: tprt::release([[P]])
// CHECK: tprt::Tensor [[Q:v[0-9]+]] = tprt::linear([[C]], [[S]], [[W]], tprt::LinearForm::Flat, -1);
// CHECK: tprt::Tensor [[T:v[0-9]+]] = tprt::all_reduce_sum([[C]], [[Q]]);
// CHECK-NEXT: tprt::Tensor [[U:v[0-9]+]] = tprt::add([[C]], [[Q]], [[T]], -1);
// CHECK-NEXT: tprt::release([[T]]);
// CHECK-NEXT: tprt::release([[Q]]);
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<4x8xf32> {onnx.name = "input_ids"},
                     %w: tensor<8x8xf32> {tp.fqn = "w", tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 0, length = 256, transposed = false>})
      -> tensor<4x8xf32> {
    %p = tp.linear_epilogue add_once %x, %w, %x : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s = shard.all_reduce %p on @tp grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
    %q = tp.linear %s, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %t = shard.all_reduce %q on @tp grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
    %u = tp.add %q, %t : tensor<4x8xf32>
    return %u : tensor<4x8xf32>
  }
}

// -----

// A residual add's product goes into the residual when the add is the
// residual's last reader; a residual read again stays the caller's.
// CHECK-LABEL: tprt::Tensor tprt_model_forward(
// CHECK: tprt::Tensor [[H:v[0-9]+]] = tprt::linear_add([[C:v[0-9]+]], [[X:v[0-9]+]], [[W:v[0-9]+]], [[R:v[0-9]+]], tprt::LinearForm::Flat, false);
// CHECK: tprt::Tensor {{v[0-9]+}} = tprt::linear_add_consuming([[C]], [[H]], [[W]], [[R]], tprt::LinearForm::Flat, false);
// CHECK-NOT: tprt::release([[R]])
// CHECK: return
module {
  func.func @forward(%x: tensor<4x8xf32> {onnx.name = "input_ids"},
                     %w: tensor<8x8xf32> {tp.fqn = "w", tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 0, length = 256, transposed = false>})
      -> tensor<4x8xf32> {
    %r = tp.silu %x : tensor<4x8xf32>
    %h = tp.linear_epilogue add %x, %w, %r : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %h2 = tp.linear_epilogue add %h, %w, %r : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %h2 : tensor<4x8xf32>
  }
}

// -----

// The halves of an all-reduce: a start that is its input's last reader
// sums in the input's storage, one whose input is read later copies it;
// the wait, the start result's one reader, always takes it.
// CHECK-LABEL: tprt::Tensor tprt_model_forward(
// CHECK: tprt::Tensor [[Q:v[0-9]+]] = tprt::linear([[C:v[0-9]+]],
// CHECK-NEXT: tprt::Tensor [[P:v[0-9]+]] = tprt::all_reduce_sum_start([[C]], [[Q]]);
// CHECK-NEXT: tprt::Tensor [[S:v[0-9]+]] = tprt::all_reduce_sum_wait_consuming([[C]], [[P]]);
// CHECK-NOT: tprt::release([[P]])
// CHECK: tprt::Tensor [[U:v[0-9]+]] = tprt::add([[C]], [[Q]], [[S]], -1);
// CHECK: tprt::Tensor [[P2:v[0-9]+]] = tprt::all_reduce_sum_start_consuming([[C]], [[U]]);
// CHECK-NEXT: tprt::Tensor {{v[0-9]+}} = tprt::all_reduce_sum_wait_consuming([[C]], [[P2]]);
module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<4x8xf32> {onnx.name = "input_ids"},
                     %w: tensor<8x8xf32> {tp.fqn = "w", tp.source = #tp.source<initializer = "w", file = "m.onnx", offset = 0, length = 256, transposed = false>})
      -> tensor<4x8xf32> {
    %q = tp.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %p = tp.all_reduce_start %q on @tp grid_axes = [0] : tensor<4x8xf32>
    %s = tp.all_reduce_wait %p : tensor<4x8xf32>
    %u = tp.add %q, %s : tensor<4x8xf32>
    %p2 = tp.all_reduce_start %u on @tp grid_axes = [0] : tensor<4x8xf32>
    %s2 = tp.all_reduce_wait %p2 : tensor<4x8xf32>
    return %s2 : tensor<4x8xf32>
  }
}
