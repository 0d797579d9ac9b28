// RUN: tp-opt %s --split-input-file --tp-fuse-linear-cross-entropy | FileCheck %s
// RUN: tp-opt %s --split-input-file --tp-fuse-linear-cross-entropy | tp-opt --split-input-file | FileCheck %s

// The head of a partitioned training step: the projection, the
// vocabulary-parallel loss, its gradient and the projection's two gradients
// become one op at the loss; the all-reduce of dx stays after it.
shard.grid @tp(shape = 2)

// CHECK-LABEL: func.func @head
// CHECK-SAME: (%[[H:.*]]: tensor<2x8x16xf32>, %[[W:.*]]: tensor<32x16xf32>, %[[IDS:.*]]: tensor<2x8xi64>, %[[MASK:.*]]: tensor<2x8xi64>)
// CHECK-NEXT: %[[LOSS:.*]], %[[DX:.*]], %[[DW:.*]] = tp.linear_cross_entropy %[[H]], %[[W]], %[[IDS]], %[[MASK]] {vocab_parallel} : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<2x8xi64>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8x16xf32>, tensor<32x16xf32>)
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[DX]]
// CHECK-NEXT: return %[[LOSS]], %[[R]], %[[DW]]
func.func @head(%h: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %ids: tensor<2x8xi64>, %mask: tensor<2x8xi64>)
    -> (tensor<f32>, tensor<2x8x16xf32>, tensor<32x16xf32>) {
  %logits = tp.linear %h, %w {form = #tp<linear_form linear>} : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %loss, %lse = tp.cross_entropy %logits, %ids, %mask {vocab_parallel} : (tensor<2x8x32xf32>, tensor<2x8xi64>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
  %dl = tp.cross_entropy_grad %logits, %ids, %mask, %lse {vocab_parallel} : (tensor<2x8x32xf32>, tensor<2x8xi64>, tensor<2x8xi64>, tensor<2x8xf32>) -> tensor<2x8x32xf32>
  %dh = tp.linear_grad_input %dl, %w : (tensor<2x8x32xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %r = shard.all_reduce %dh on @tp grid_axes = [0] : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  %dw = tp.linear_grad_weight %dl, %h : (tensor<2x8x32xf32>, tensor<2x8x16xf32>) -> tensor<32x16xf32>
  return %loss, %r, %dw : tensor<f32>, tensor<2x8x16xf32>, tensor<32x16xf32>
}

// -----

// Kept: logits something else reads (returned), a softcapped head, a
// frozen head (no weight gradient), a head with a bias.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: tp.linear_cross_entropy
// CHECK: return
func.func @kept(%h: tensor<2x8x16xf32>, %w: tensor<32x16xf32>, %b: tensor<32xf32>, %ids: tensor<2x8xi64>, %mask: tensor<2x8xi64>)
    -> (tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<32x16xf32>) {
  %l0 = tp.linear %h, %w : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %loss0, %lse0 = tp.cross_entropy %l0, %ids, %mask : (tensor<2x8x32xf32>, tensor<2x8xi64>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
  %dl0 = tp.cross_entropy_grad %l0, %ids, %mask, %lse0 : (tensor<2x8x32xf32>, tensor<2x8xi64>, tensor<2x8xi64>, tensor<2x8xf32>) -> tensor<2x8x32xf32>
  %dh0 = tp.linear_grad_input %dl0, %w : (tensor<2x8x32xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %dw0 = tp.linear_grad_weight %dl0, %h : (tensor<2x8x32xf32>, tensor<2x8x16xf32>) -> tensor<32x16xf32>

  %p1 = tp.linear %h, %w : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %l1 = tp.softcap %p1 cap 3.0e+01 : tensor<2x8x32xf32>
  %loss1, %lse1 = tp.cross_entropy %l1, %ids, %mask : (tensor<2x8x32xf32>, tensor<2x8xi64>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)

  %l2 = tp.linear %h, %w : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %loss2, %lse2 = tp.cross_entropy %l2, %ids, %mask : (tensor<2x8x32xf32>, tensor<2x8xi64>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
  %dl2 = tp.cross_entropy_grad %l2, %ids, %mask, %lse2 : (tensor<2x8x32xf32>, tensor<2x8xi64>, tensor<2x8xi64>, tensor<2x8xf32>) -> tensor<2x8x32xf32>
  %dh2 = tp.linear_grad_input %dl2, %w : (tensor<2x8x32xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>

  %l3 = tp.linear %h, %w, %b : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %loss3, %lse3 = tp.cross_entropy %l3, %ids, %mask : (tensor<2x8x32xf32>, tensor<2x8xi64>, tensor<2x8xi64>) -> (tensor<f32>, tensor<2x8xf32>)
  %dl3 = tp.cross_entropy_grad %l3, %ids, %mask, %lse3 : (tensor<2x8x32xf32>, tensor<2x8xi64>, tensor<2x8xi64>, tensor<2x8xf32>) -> tensor<2x8x32xf32>
  %dh3 = tp.linear_grad_input %dl3, %w : (tensor<2x8x32xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %dw3 = tp.linear_grad_weight %dl3, %h : (tensor<2x8x32xf32>, tensor<2x8x16xf32>) -> tensor<32x16xf32>
  return %l0, %dh0, %dw0, %dh2, %dh3, %dw3 : tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<32x16xf32>
}
