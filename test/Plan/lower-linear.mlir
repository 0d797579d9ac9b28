// RUN: split-file %s %t
// RUN: tp-opt %t/forms.mlir --tp-lower-linear | FileCheck %t/forms.mlir
// RUN: tp-opt %t/forms.mlir "--tp-lower-linear=async-tp=true" | FileCheck %t/forms.mlir --check-prefix=ASYNC
// RUN: tp-opt %t/forms.mlir --tp-lower-linear --tp-lower-linear | FileCheck %t/forms.mlir
// RUN: tp-opt %t/errors.mlir --tp-lower-linear --verify-diagnostics -o /dev/null
// RUN: tp-opt %t/rowbias.mlir --tp-lower-linear | FileCheck %t/rowbias.mlir
// RUN: tp-opt %t/rowbias.mlir --tp-lower-linear --tp-partition | FileCheck %t/rowbias.mlir --check-prefix=PART
// RUN: tp-opt %t/lorabias.mlir --tp-lower-linear | FileCheck %t/lorabias.mlir
// RUN: tp-opt %t/lorabias.mlir --tp-lower-linear --tp-partition | FileCheck %t/lorabias.mlir --check-prefix=PART

//--- forms.mlir
// The TPLinear dispatch: sharded on batch or sequence -> bmm; replicated,
// unannotated or sharded on features -> linear; 2-D -> mm. With async-tp,
// the non-bmm linears lose their bias to a tp.bias_add.
shard.grid @tp(shape = 2)

// CHECK-LABEL: func.func @forms
// ASYNC-LABEL: func.func @forms
func.func @forms(%x: tensor<4x8x16xf32>, %x2: tensor<32x16xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>)
    -> (tensor<4x8x8xf32>, tensor<4x8x8xf32>, tensor<4x8x8xf32>, tensor<4x8x8xf32>, tensor<32x8xf32>) {
  %rep = shard.sharding @tp split_axes = [[]] : !shard.sharding
  %seq = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %bat = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %feat = shard.sharding @tp split_axes = [[], [], [0]] : !shard.sharding
  %xr = shard.shard %x to %rep : tensor<4x8x16xf32>
  %xs = shard.shard %x to %seq : tensor<4x8x16xf32>
  %xb = shard.shard %x to %bat : tensor<4x8x16xf32>
  %xf = shard.shard %x to %feat : tensor<4x8x16xf32>
  // CHECK: tp.linear %{{.*}}, %{{.*}}, %{{.*}} {form = #tp<linear_form linear>} : (tensor<4x8x16xf32>
  // ASYNC: %[[R:.*]] = tp.linear %{{.*}}, %{{.*}} {form = #tp<linear_form linear>} : (tensor<4x8x16xf32>, tensor<8x16xf32>)
  // ASYNC-NEXT: tp.bias_add %[[R]], %{{.*}} : tensor<4x8x8xf32>, tensor<8xf32>
  %0 = tp.linear %xr, %w, %b : (tensor<4x8x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8x8xf32>
  // CHECK: tp.linear %{{.*}}, %{{.*}}, %{{.*}} {form = #tp<linear_form bmm>}
  // ASYNC: tp.linear %{{.*}}, %{{.*}}, %{{.*}} {form = #tp<linear_form bmm>}
  // ASYNC-NOT: tp.bias_add
  %1 = tp.linear %xs, %w, %b : (tensor<4x8x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8x8xf32>
  // CHECK: tp.linear %{{.*}}, %{{.*}} {form = #tp<linear_form bmm>}
  %2 = tp.linear %xb, %w : (tensor<4x8x16xf32>, tensor<8x16xf32>) -> tensor<4x8x8xf32>
  // CHECK: tp.linear %{{.*}}, %{{.*}} {form = #tp<linear_form linear>}
  // ASYNC: tp.linear %{{.*}}, %{{.*}} {form = #tp<linear_form linear>}
  %3 = tp.linear %xf, %w : (tensor<4x8x16xf32>, tensor<8x16xf32>) -> tensor<4x8x8xf32>
  // CHECK: tp.linear %{{.*}}, %{{.*}}, %{{.*}} {form = #tp<linear_form mm>} : (tensor<32x16xf32>
  // ASYNC: %[[M:.*]] = tp.linear %{{.*}}, %{{.*}} {form = #tp<linear_form linear>} : (tensor<32x16xf32>
  // ASYNC-NEXT: tp.bias_add %[[M]]
  %4 = tp.linear %x2, %w, %b : (tensor<32x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<32x8xf32>
  return %0, %1, %2, %3, %4 : tensor<4x8x8xf32>, tensor<4x8x8xf32>, tensor<4x8x8xf32>, tensor<4x8x8xf32>, tensor<32x8xf32>
}

// An unannotated input is replicated; a form already chosen is kept.
// CHECK-LABEL: func.func @kept
// CHECK: tp.linear %arg0, %arg1 {form = #tp<linear_form linear>}
// CHECK: tp.linear %arg0, %arg1 {form = #tp<linear_form bmm>}
func.func @kept(%x: tensor<?x?x16xf32>, %w: tensor<8x16xf32>) -> (tensor<?x?x8xf32>, tensor<?x?x8xf32>) {
  %0 = tp.linear %x, %w : (tensor<?x?x16xf32>, tensor<8x16xf32>) -> tensor<?x?x8xf32>
  %1 = tp.linear %x, %w {form = #tp<linear_form bmm>} : (tensor<?x?x16xf32>, tensor<8x16xf32>) -> tensor<?x?x8xf32>
  return %0, %1 : tensor<?x?x8xf32>, tensor<?x?x8xf32>
}

//--- errors.mlir
shard.grid @tp(shape = 2)
func.func @rank4(%x: tensor<2x4x8x16xf32>, %w: tensor<8x16xf32>) -> tensor<2x4x8x8xf32> {
  %s = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<2x4x8x16xf32>
  // expected-error @+1 {{tp-lower-linear: a rank-4 input sharded on a leading dimension has no form (bmm takes 3-D inputs)}}
  %0 = tp.linear %xs, %w : (tensor<2x4x8x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

//--- rowbias.mlir
// A row-split linear's bias is added once, after the reduction (PyTorch's
// RowwiseParallel): tp-lower-linear splits it into a tp.bias_add, after the
// output's layout annotation when there is one (sequence parallelism
// reduce-scatters there), and tp-partition then reduces before the add.
shard.grid @tp(shape = 2)

// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.*]] = tp.linear %{{.*}}, %{{.*}} {form = #tp<linear_form linear>} : (tensor<?x?x8xf32>, tensor<4x8xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT: tp.bias_add %[[Y]], %{{.*}} : tensor<?x?x4xf32>, tensor<4xf32>
// PART-LABEL: func.func @forward
// PART: %[[Y:.*]] = tp.linear %{{.*}}, %arg2 {form = #tp<linear_form linear>} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
// PART-NEXT: %[[R:.*]] = shard.all_reduce %[[Y]]
// PART-NEXT: tp.bias_add %[[R]], %{{.*}} : tensor<?x?x4xf32>, tensor<4xf32>
func.func @forward(%x: tensor<?x?x4xf32>, %w1: tensor<8x4xf32>, %w2: tensor<4x8xf32>, %b: tensor<4xf32>) -> tensor<?x?x4xf32> {
  %col = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %row = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %w1c = shard.shard %w1 to %col annotate_for_users : tensor<8x4xf32>
  %w2r = shard.shard %w2 to %row annotate_for_users : tensor<4x8xf32>
  %u = tp.linear %x, %w1c : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  %h = tp.linear %u, %w2r, %b : (tensor<?x?x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  return %h : tensor<?x?x4xf32>
}

//--- lorabias.mlir
// A LoRA branch on a biased row-split linear (o_proj with attention_bias)
// under sequence parallelism: base and branch are partial sums added before
// the sequence-split annotation, so the bias goes after that annotation
// too, and tp-partition reduce-scatters the sum once (before, the bias was
// added to the base's partial sum, which an all-reduce then completed, and
// the sequence split of a replicated sum was refused).
shard.grid @tp(shape = 2)

// CHECK-LABEL: func.func @forward
// CHECK: %[[Y:.*]] = tp.linear %[[U:.*]], %{{.*}} {form = #tp<linear_form linear>} : (tensor<2x6x8xf32>, tensor<4x8xf32>) -> tensor<2x6x4xf32>
// CHECK: %[[S:.*]] = tp.add %[[Y]], %{{.*}} : tensor<2x6x4xf32>
// CHECK-NEXT: %[[A:.*]] = shard.shard %[[S]] to %{{.*}} : tensor<2x6x4xf32>
// CHECK-NEXT: tp.bias_add %[[A]], %arg3 : tensor<2x6x4xf32>, tensor<4xf32>
// PART-LABEL: func.func @forward
// PART-NOT: shard.all_reduce
// PART: %[[S:.*]] = tp.add
// PART-NEXT: %[[R:.*]] = shard.reduce_scatter %[[S]]
// PART-NEXT: tp.bias_add %[[R]], %arg3 : tensor<2x3x4xf32>, tensor<4xf32>
// PART-NOT: shard.all_reduce
func.func @forward(%x: tensor<2x6x4xf32>, %w1: tensor<8x4xf32>, %w: tensor<4x8xf32>, %b: tensor<4xf32>, %a: tensor<2x8xf32>, %bb: tensor<4x2xf32>) -> tensor<2x6x4xf32> {
  %col = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %feat = shard.sharding @tp split_axes = [[], [], [0]] : !shard.sharding
  %row = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %rep = shard.sharding @tp split_axes = [[]] : !shard.sharding
  %w1c = shard.shard %w1 to %col annotate_for_users : tensor<8x4xf32>
  %us = tp.linear %x, %w1c : (tensor<2x6x4xf32>, tensor<8x4xf32>) -> tensor<2x6x8xf32>
  %wr = shard.shard %w to %row annotate_for_users : tensor<4x8xf32>
  %ar = shard.shard %a to %row annotate_for_users : tensor<2x8xf32>
  %bbr = shard.shard %bb to %row annotate_for_users : tensor<4x2xf32>
  %y = tp.linear %us, %wr, %b : (tensor<2x6x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x6x4xf32>
  %down = tp.linear %us, %ar : (tensor<2x6x8xf32>, tensor<2x8xf32>) -> tensor<2x6x2xf32>
  %downs = shard.shard %down to %feat : tensor<2x6x2xf32>
  %scaled = tp.scale %downs by 2.0 : tensor<2x6x2xf32>
  %up = tp.linear %scaled, %bbr : (tensor<2x6x2xf32>, tensor<4x2xf32>) -> tensor<2x6x4xf32>
  %sum = tp.add %y, %up : tensor<2x6x4xf32>
  %seq = shard.shard %sum to %row : tensor<2x6x4xf32>
  return %seq : tensor<2x6x4xf32>
}
