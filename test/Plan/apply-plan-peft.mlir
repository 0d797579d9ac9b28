// tp-apply-plan with lora-adapter=DIR: PEFT's adapter_config.json decides
// ranks, scales, lora_B biases and replaced base tensors.
// RUN: rm -rf %t && split-file %s %t && mkdir -p %t/peft %t/ambiguous %t/unused
// RUN: cp %t/peft.json %t/peft/adapter_config.json
// RUN: %tp_python %tp_src/test/Plan/Inputs/write_safetensors.py %t/peft/adapter_model.safetensors base_model.model.q_proj.lora_A.weight=2x8 base_model.model.q_proj.lora_B.weight=8x2 base_model.model.q_proj.lora_B.bias=8 base_model.model.o_proj.lora_A.weight=4x8 base_model.model.o_proj.lora_B.weight=8x4 base_model.model.o_proj.lora_B.bias=8 base_model.model.q_proj.base_layer.bias=8
// RUN: tp-opt %t/model.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-adapter=%t/peft" | FileCheck %t/model.mlir
// RUN: tp-opt %t/model.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-adapter=%t/peft" --tp-lower-linear --tp-partition | FileCheck %t/model.mlir --check-prefix=PART
// RUN: cp %t/ambiguous.json %t/ambiguous/adapter_config.json
// RUN: cp %t/peft/adapter_model.safetensors %t/ambiguous/
// RUN: tp-opt %t/ambiguous.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-adapter=%t/ambiguous" --verify-diagnostics
// RUN: cp %t/unused.json %t/unused/adapter_config.json
// RUN: cp %t/peft/adapter_model.safetensors %t/unused/
// RUN: tp-opt %t/unused.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-adapter=%t/unused" --verify-diagnostics
// RUN: tp-opt %t/missing.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-adapter=%t/nowhere" --verify-diagnostics

//--- plan.json
{"q_proj": "colwise", "o_proj": "rowwise"}

//--- peft.json
{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "use_rslora": true,
 "lora_bias": true, "bias": "lora_only",
 "target_modules": ["q_proj", "o_proj"], "rank_pattern": {"q_proj": 2}}

//--- model.mlir
// q_proj: rank 2 from rank_pattern, scale 8 / sqrt(2); o_proj: rank 4,
// scale 8 / sqrt(4) = 4. Each lora_B bias is placed as its linear's bias
// (split(0) under Colwise, replicated under Rowwise), scaled, and added
// after the module output's layout annotation. The trained q_proj bias
// (bias: lora_only) reads the adapter.
// CHECK: %arg2: tensor<8xf32> {tp.fqn = "q_proj.bias", tp.placement = #tp.placement<split(0), key = "q_proj">, tp.source = #tp.source<initializer = "base_model.model.q_proj.base_layer.bias", file = "{{[^"]*}}adapter_model.safetensors"
// CHECK-SAME: %arg4: tensor<2x8xf32> {tp.fqn = "q_proj.lora_A.weight"
// CHECK-SAME: %arg6: tensor<8xf32> {tp.fqn = "q_proj.lora_B.bias", tp.placement = #tp.placement<split(0), key = "q_proj">
// CHECK-SAME: %arg7: tensor<4x8xf32> {tp.fqn = "o_proj.lora_A.weight"
// CHECK-SAME: %arg9: tensor<8xf32> {tp.fqn = "o_proj.lora_B.bias", tp.placement = #tp.placement<replicated, grad = mean, key = "o_proj">
// CHECK: tp.scale %{{.*}} by 5.6568542494923797
// CHECK: %[[QSUM:.*]] = tp.add
// CHECK: %[[QM:.*]] = shard.shard %[[QSUM]] to %{{.*}} : tensor<?x?x8xf32>
// CHECK: %[[QBIAS:.*]] = tp.scale %{{.*}} by 5.6568542494923797 : tensor<8xf32>
// CHECK-NEXT: tp.bias_add %[[QM]], %[[QBIAS]]
// CHECK: tp.scale %{{.*}} by 4.000000e+00 : tensor<?x?x4xf32>
// CHECK: %[[OSUM:.*]] = tp.add
// CHECK: %[[OM:.*]] = shard.shard %[[OSUM]] to %{{.*}} : tensor<?x?x8xf32>
// CHECK: %[[OBIAS:.*]] = tp.scale %{{.*}} by 4.000000e+00 : tensor<8xf32>
// CHECK-NEXT: tp.bias_add %[[OM]], %[[OBIAS]]
// After partition: the q_proj LoRA bias is this rank's half; the o_proj
// one is added after the all-reduce of base plus LoRA.
// PART: tp.bias_add %{{.*}}, %{{.*}} : tensor<?x?x4xf32>, tensor<4xf32>
// PART: %[[SUM:.*]] = shard.all_reduce
// PART-NEXT: %[[B:.*]] = tp.scale %arg9 by 4.000000e+00 : tensor<8xf32>
// PART-NEXT: tp.bias_add %[[SUM]], %[[B]] : tensor<?x?x8xf32>, tensor<8xf32>
module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%x: tensor<?x?x8xf32> {onnx.name = "input_ids"},
      %wq: tensor<8x8xf32> {tp.fqn = "q_proj.weight", tp.source = #tp.source<initializer = "q", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %bq: tensor<8xf32> {tp.fqn = "q_proj.bias", tp.source = #tp.source<initializer = "qb", file = "m.onnx", offset = 512, length = 32, transposed = false>},
      %wo: tensor<8x8xf32> {tp.fqn = "o_proj.weight", tp.source = #tp.source<initializer = "o", file = "m.onnx", offset = 256, length = 256, transposed = false>}) -> tensor<?x?x8xf32> {
    %q = tp.linear %x, %wq, %bq : (tensor<?x?x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
    %o = tp.linear %q, %wo : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %y = tp.silu %o : tensor<?x?x8xf32>
    return %y : tensor<?x?x8xf32>
  }
}

//--- ambiguous.json
{"peft_type": "LORA", "r": 4, "target_modules": ["q_proj"],
 "rank_pattern": {"q_proj": 2, "^q_proj": 4}}

//--- ambiguous.mlir
func.func @forward(%x: tensor<?x?x8xf32>,
    %wq: tensor<8x8xf32> {tp.fqn = "q_proj.weight"}) -> tensor<?x?x8xf32> {
  // expected-error-re @+1 {{'{{.*}}adapter_config.json': rank_pattern keys '{{.*}}q_proj' and '{{.*}}q_proj' both match module 'q_proj' with different values (PEFT takes the first in file order; keep one)}}
  %q = tp.linear %x, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %q : tensor<?x?x8xf32>
}

//--- unused.json
{"peft_type": "LORA", "r": 4, "target_modules": ["o_proj"]}

//--- unused.mlir
// The file holds q_proj's factors and lora_B biases, but this
// configuration targets o_proj only, without lora_bias: PEFT would load
// them all the same (another model than the one compiled).
// expected-error-re @+1 {{lora-adapter '{{.*}}unused': 5 tensors that PEFT would load are not used (first: 'base_model.model.o_proj.lora_B.bias'): the configuration does not describe this file}}
func.func @forward(%x: tensor<?x?x8xf32>,
    %wo: tensor<8x8xf32> {tp.fqn = "o_proj.weight"}) -> tensor<?x?x8xf32> {
  %o = tp.linear %x, %wo : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %o : tensor<?x?x8xf32>
}

//--- missing.mlir
// expected-error-re @+1 {{lora-adapter: cannot read '{{.*}}nowhere{{/|\\}}adapter_config.json'}}
func.func @forward(%x: tensor<?x?x8xf32>,
    %wo: tensor<8x8xf32> {tp.fqn = "o_proj.weight"}) -> tensor<?x?x8xf32> {
  %o = tp.linear %x, %wo : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %o : tensor<?x?x8xf32>
}
