// convert-to-emitc only converts dialects whose ConvertToEmitC interface is
// registered; tp-opt registers arith's and func's.
// RUN: tp-opt %s --convert-to-emitc | FileCheck %s

// CHECK-LABEL: emitc.func @axpy
// CHECK: %[[P:.*]] = mul %arg0, %arg1 : (f32, f32) -> f32
// CHECK: %[[S:.*]] = add %[[P]], %arg2 : (f32, f32) -> f32
// CHECK: return %[[S]] : f32
func.func @axpy(%a: f32, %x: f32, %y: f32) -> f32 {
  %p = arith.mulf %a, %x : f32
  %s = arith.addf %p, %y : f32
  return %s : f32
}
