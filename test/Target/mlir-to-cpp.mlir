// RUN: tp-translate --mlir-to-cpp %s | FileCheck %s
// RUN: tp-translate --mlir-to-cpp --declare-variables-at-top %s | FileCheck %s --check-prefix=TOP

// A runtime call as the code generator will emit it, in a module that still
// carries tp attributes (tp-translate registers the tp dialect).
module attributes {tp.model = "llama"} {
  emitc.include "tprt/tprt.h"
  // CHECK: #include "tprt/tprt.h"
  // CHECK: void step(tprt::Comm* [[C:v[0-9]+]], float* [[G:v[0-9]+]], size_t [[N:v[0-9]+]])
  // CHECK-NEXT: tprt::all_reduce_sum([[C]], [[G]], [[N]]);
  emitc.func @step(%c: !emitc.ptr<!emitc.opaque<"tprt::Comm">>, %g: !emitc.ptr<f32>, %n: !emitc.size_t) {
    emitc.call_opaque "tprt::all_reduce_sum"(%c, %g, %n) : (!emitc.ptr<!emitc.opaque<"tprt::Comm">>, !emitc.ptr<f32>, !emitc.size_t) -> ()
    emitc.return
  }
  // TOP-LABEL: float axpy(
  // TOP-NEXT: float [[P:v[0-9]+]];
  // TOP: [[P]] = v1 * v2;
  emitc.func @axpy(%a: f32, %x: f32, %y: f32) -> f32 {
    %p = emitc.mul %a, %x : (f32, f32) -> f32
    %s = emitc.add %p, %y : (f32, f32) -> f32
    emitc.return %s : f32
  }
}
