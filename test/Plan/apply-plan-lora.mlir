// RUN: split-file %s %t
// RUN: %tp_python %tp_src/test/Plan/Inputs/write_safetensors.py %t/adapter.safetensors base_model.model.q_proj.lora_A.weight=4x8 base_model.model.q_proj.lora_B.weight=8x4 o_proj.lora_A.weight=4x8 o_proj.lora_B.weight=8x4
// RUN: tp-opt %t/lora.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=4 lora-alpha=8 lora-weights=%t/adapter.safetensors" | FileCheck %t/lora.mlir
// RUN: tp-opt %t/lora.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=4 lora-alpha=8 lora-weights=%t/adapter.safetensors" --tp-partition | FileCheck %t/lora.mlir --check-prefix=PART
// RUN: tp-opt %t/lora.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=4 lora-targets=o_*" | FileCheck %t/lora.mlir --check-prefix=TARGETS
// RUN: tp-opt %t/rank.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=3" --verify-diagnostics
// RUN: tp-opt %t/missing.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=4 lora-weights=%t/adapter.safetensors lora-targets=v_proj" --verify-diagnostics
// RUN: %tp_python %tp_src/test/Plan/Inputs/write_safetensors.py %t/peft_model.safetensors base_model.model.model.layers.0.mixer.v_proj.lora_A.weight=4x8 base_model.model.model.layers.0.mixer.v_proj.lora_B.weight=8x4
// RUN: tp-opt %t/backbone.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=4 lora-weights=%t/peft_model.safetensors lora-targets=v_proj" | FileCheck %t/backbone.mlir
// RUN: tp-opt %t/backbone-missing.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=4 lora-weights=%t/adapter.safetensors lora-targets=v_proj" --verify-diagnostics
// RUN: %tp_python %tp_src/test/Plan/Inputs/write_safetensors.py %t/f16.safetensors q_proj.lora_A.weight=4x8:F16 q_proj.lora_B.weight=8x4
// RUN: tp-opt %t/dtype.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=4 lora-weights=%t/f16.safetensors lora-targets=q_proj" --verify-diagnostics | FileCheck %t/dtype.mlir
// RUN: tp-opt %t/shape.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=2 lora-weights=%t/adapter.safetensors" --verify-diagnostics
// RUN: %tp_python %tp_src/test/Plan/Inputs/write_safetensors.py %t/short.safetensors --raw '{}'
// RUN: tp-opt %t/header.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=4 lora-weights=%t/short.safetensors" --verify-diagnostics
// RUN: tp-opt %t/unused.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=4 lora-weights=%t/adapter.safetensors lora-targets=q_proj" --verify-diagnostics
// RUN: %tp_python %tp_src/test/Plan/Inputs/write_safetensors.py %t/dora.safetensors q_proj.lora_A.weight=4x8 q_proj.lora_B.weight=8x4 q_proj.lora_magnitude_vector=8
// RUN: tp-opt %t/dora.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=4 lora-weights=%t/dora.safetensors" --verify-diagnostics
// RUN: tp-opt %t/negative.mlir "--tp-apply-plan=plan=file:%t/plan.json lora-rank=-2" --verify-diagnostics
// RUN: tp-opt %t/none.mlir "--tp-apply-plan=plan=file:%t/plan.json tp=2 lora-rank=4 lora-targets=gate_proj" --verify-diagnostics

//--- plan.json
{"q_proj": "colwise", "o_proj": "rowwise"}

//--- lora.mlir
// LoRA on a column-split and a row-split linear (rank 4, alpha 8: scale 2);
// all-linear leaves out only the output projection (a linear @forward
// returns).
// Colwise: A and B split on dim 0, x A^T wanted whole by B (all-gather over
// the rank). Rowwise: A and B split on dim 1, x A^T a partial sum split on
// its last dimension (reduce-scatter over the rank), and the base and LoRA
// partial sums meet in one all-reduce; each module's output (base plus
// LoRA) carries its output layout. The factors' sources point into the
// adapter (PEFT's base_model.model. prefix or the bare name).
// CHECK: %arg3: tensor<4x8xf32> {tp.fqn = "q_proj.lora_A.weight", tp.placement = #tp.placement<split(0), key = "q_proj">, tp.source = #tp.source<initializer = "base_model.model.q_proj.lora_A.weight", file = "{{[^"]*}}adapter.safetensors", offset = {{[0-9]+}}, length = 128, transposed = false>}
// CHECK-SAME: %arg4: tensor<8x4xf32> {tp.fqn = "q_proj.lora_B.weight", tp.placement = #tp.placement<split(0), key = "q_proj"
// CHECK-SAME: %arg5: tensor<4x8xf32> {tp.fqn = "o_proj.lora_A.weight", tp.placement = #tp.placement<split(1), key = "o_proj">, tp.source = #tp.source<initializer = "o_proj.lora_A.weight"
// CHECK-SAME: %arg6: tensor<8x4xf32> {tp.fqn = "o_proj.lora_B.weight", tp.placement = #tp.placement<split(1), key = "o_proj"
// CHECK: %[[Q:.*]] = tp.linear %arg0, %{{.*}} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[QA:.*]] = tp.linear %arg0, %{{.*}} : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT: %[[R:.*]] = shard.sharding @tp split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-NEXT: %[[QG:.*]] = shard.shard %[[QA]] to %[[R]] annotate_for_users : tensor<?x?x4xf32>
// CHECK-NEXT: %[[QS:.*]] = tp.scale %[[QG]] by 2.000000e+00
// CHECK-NEXT: %[[QB:.*]] = tp.linear %[[QS]], %{{.*}} : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[QO:.*]] = tp.add %[[Q]], %[[QB]]
// CHECK-NEXT: %[[SPLIT:.*]] = shard.sharding @tp split_axes = {{\[\[}}], [], [0]] : !shard.sharding
// CHECK-NEXT: %[[QM:.*]] = shard.shard %[[QO]] to %[[SPLIT]] : tensor<?x?x8xf32>
// CHECK-NEXT: %[[O:.*]] = tp.linear %[[QM]], %{{.*}} : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[OA:.*]] = tp.linear %[[QM]], %{{.*}} : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT: %[[S:.*]] = shard.sharding @tp split_axes = {{\[\[}}], [], [0]] : !shard.sharding
// CHECK-NEXT: %[[OR:.*]] = shard.shard %[[OA]] to %[[S]] : tensor<?x?x4xf32>
// CHECK-NEXT: %[[OS:.*]] = tp.scale %[[OR]] by 2.000000e+00
// CHECK-NEXT: %[[OB:.*]] = tp.linear %[[OS]], %{{.*}} : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
// CHECK-NEXT: %[[OO:.*]] = tp.add %[[O]], %[[OB]]
// CHECK-NEXT: %[[REP:.*]] = shard.sharding @tp split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-NEXT: %[[OM:.*]] = shard.shard %[[OO]] to %[[REP]] : tensor<?x?x8xf32>
// CHECK-NEXT: tp.silu %[[OM]]
// PART: %[[QA:.*]] = tp.linear %arg0, %arg3 : (tensor<?x?x8xf32>, tensor<2x8xf32>) -> tensor<?x?x2xf32>
// PART-NEXT: %[[QG:.*]] = shard.all_gather %[[QA]] on @tp grid_axes = [0] gather_axis = 2 : tensor<?x?x2xf32> -> tensor<?x?x4xf32>
// PART-NEXT: %[[QS:.*]] = tp.scale %[[QG]]
// PART-NEXT: tp.linear %[[QS]], %arg4 : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
// PART: %[[O:.*]] = tp.linear %{{.*}}, %arg2 : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
// PART-NEXT: %[[OA:.*]] = tp.linear %{{.*}}, %arg5 : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
// PART-NEXT: %[[OR:.*]] = shard.reduce_scatter %[[OA]] on @tp grid_axes = [0] scatter_axis = 2 : tensor<?x?x4xf32> -> tensor<?x?x2xf32>
// PART-NEXT: %[[OS:.*]] = tp.scale %[[OR]]
// PART-NEXT: %[[OB:.*]] = tp.linear %[[OS]], %arg6 : (tensor<?x?x2xf32>, tensor<8x2xf32>) -> tensor<?x?x8xf32>
// PART-NEXT: %[[OO:.*]] = tp.add %[[O]], %[[OB]]
// PART-NEXT: %[[SUM:.*]] = shard.all_reduce %[[OO]] on @tp grid_axes = [0]
// PART-NEXT: tp.silu %[[SUM]]
// PART-NOT: shard.all_reduce
// TARGETS-NOT: q_proj.lora
// TARGETS: tp.fqn = "o_proj.lora_A.weight"
module attributes {onnx.file = "m.onnx"} {
  func.func @forward(%x: tensor<?x?x8xf32> {onnx.name = "input_ids"},
      %wq: tensor<8x8xf32> {tp.fqn = "q_proj.weight", tp.source = #tp.source<initializer = "q", file = "m.onnx", offset = 0, length = 256, transposed = false>},
      %wo: tensor<8x8xf32> {tp.fqn = "o_proj.weight", tp.source = #tp.source<initializer = "o", file = "m.onnx", offset = 256, length = 256, transposed = false>}) -> tensor<?x?x8xf32> {
    %q = tp.linear %x, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %o = tp.linear %q, %wo : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
    %y = tp.silu %o : tensor<?x?x8xf32>
    return %y : tensor<?x?x8xf32>
  }
}

//--- rank.mlir
func.func @forward(%x: tensor<?x?x8xf32>,
    %wq: tensor<8x8xf32> {tp.fqn = "q_proj.weight"},
    %wo: tensor<8x8xf32> {tp.fqn = "o_proj.weight"}) -> tensor<?x?x8xf32> {
  // expected-error @+1 {{plan key 'q_proj': 3 LoRA rank dimensions are not divisible by tp 2}}
  %q = tp.linear %x, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %o = tp.linear %q, %wo : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %o : tensor<?x?x8xf32>
}

//--- missing.mlir
func.func @forward(%x: tensor<?x?x8xf32>,
    %wv: tensor<8x8xf32> {tp.fqn = "v_proj.weight"}) -> tensor<?x?x8xf32> {
  // expected-error-re @+1 {{lora-weights '{{.*}}adapter.safetensors': no lora_A for 'v_proj' (looked for 'base_model.model.v_proj.lora_A.weight' and 'v_proj.lora_A.weight')}}
  %v = tp.linear %x, %wv : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %v : tensor<?x?x8xf32>
}

//--- backbone.mlir
// NemotronH's checkpoint names (backbone.), an adapter PEFT made on
// transformers' model (model.): the factors are found under model.
// CHECK: tp.source = #tp.source<initializer = "base_model.model.model.layers.0.mixer.v_proj.lora_A.weight"
// CHECK: tp.source = #tp.source<initializer = "base_model.model.model.layers.0.mixer.v_proj.lora_B.weight"
func.func @forward(%x: tensor<?x?x8xf32>,
    %wv: tensor<8x8xf32> {tp.fqn = "backbone.layers.0.mixer.v_proj.weight"}) -> tensor<?x?x8xf32> {
  %v = tp.linear %x, %wv : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %v : tensor<?x?x8xf32>
}

//--- backbone-missing.mlir
func.func @forward(%x: tensor<?x?x8xf32>,
    %wv: tensor<8x8xf32> {tp.fqn = "backbone.layers.0.mixer.v_proj.weight"}) -> tensor<?x?x8xf32> {
  // expected-error-re @+1 {{no lora_A for 'backbone.layers.0.mixer.v_proj' (looked for 'base_model.model.backbone.layers.0.mixer.v_proj.lora_A.weight' and 'backbone.layers.0.mixer.v_proj.lora_A.weight' and 'base_model.model.model.layers.0.mixer.v_proj.lora_A.weight' and 'model.layers.0.mixer.v_proj.lora_A.weight')}}
  %v = tp.linear %x, %wv : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %v : tensor<?x?x8xf32>
}

//--- dtype.mlir
// A factor keeps the type it is stored in (an f16 lora_A beside an f32
// lora_B and base); the runtime reads each in its own type.
// CHECK: tensor<4x8xf16> {tp.fqn = "q_proj.lora_A.weight"
// CHECK-SAME: tensor<8x4xf32> {tp.fqn = "q_proj.lora_B.weight"
// expected-warning @+1 {{plan key 'o_proj' matches no module}}
func.func @forward(%x: tensor<?x?x8xf32>,
    %wq: tensor<8x8xf32> {tp.fqn = "q_proj.weight"}) -> tensor<?x?x8xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %q : tensor<?x?x8xf32>
}

//--- shape.mlir
func.func @forward(%x: tensor<?x?x8xf32>,
    %wq: tensor<8x8xf32> {tp.fqn = "q_proj.weight"},
    %wo: tensor<8x8xf32> {tp.fqn = "o_proj.weight"}) -> tensor<?x?x8xf32> {
  // expected-error-re @+1 {{tensor 'base_model.model.q_proj.lora_A.weight' is F32 [4, 8], expected F32, BF16 or F16 [2, 8] (lora-rank 2)}}
  %q = tp.linear %x, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %o = tp.linear %q, %wo : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %o : tensor<?x?x8xf32>
}

//--- header.mlir
// expected-error-re @+1 {{lora-weights: '{{.*}}short.safetensors': header length 102 at offset 0 runs past the end of the file (10 bytes)}}
func.func @forward(%x: tensor<?x?x8xf32>,
    %wq: tensor<8x8xf32> {tp.fqn = "q_proj.weight"}) -> tensor<?x?x8xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %q : tensor<?x?x8xf32>
}

//--- none.mlir
// expected-warning @+2 {{lora-targets 'gate_proj' match no linear}}
// expected-warning @+1 {{plan key 'o_proj' matches no module}}
func.func @forward(%x: tensor<?x?x8xf32>,
    %wq: tensor<8x8xf32> {tp.fqn = "q_proj.weight"}) -> tensor<?x?x8xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %q : tensor<?x?x8xf32>
}

//--- unused.mlir
// expected-warning-re @+1 {{lora-weights '{{.*}}adapter.safetensors': 2 tensors adapt no targeted linear (first: 'o_proj.lora_A.weight')}}
func.func @forward(%x: tensor<?x?x8xf32>,
    %wq: tensor<8x8xf32> {tp.fqn = "q_proj.weight"},
    %wo: tensor<8x8xf32> {tp.fqn = "o_proj.weight"}) -> tensor<?x?x8xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %o = tp.linear %q, %wo : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %y = tp.silu %o : tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

//--- dora.mlir
// expected-error-re @+1 {{lora-weights '{{.*}}dora.safetensors': tensor 'q_proj.lora_magnitude_vector' is DoRA or embedding LoRA, which is not supported}}
func.func @forward(%x: tensor<?x?x8xf32>,
    %wq: tensor<8x8xf32> {tp.fqn = "q_proj.weight"}) -> tensor<?x?x8xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  %y = tp.silu %q : tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

//--- negative.mlir
// expected-error @+1 {{lora-rank must be positive, got -2}}
func.func @forward(%x: tensor<?x?x8xf32>,
    %wq: tensor<8x8xf32> {tp.fqn = "q_proj.weight"}) -> tensor<?x?x8xf32> {
  %q = tp.linear %x, %wq : (tensor<?x?x8xf32>, tensor<8x8xf32>) -> tensor<?x?x8xf32>
  return %q : tensor<?x?x8xf32>
}
