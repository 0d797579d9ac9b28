// RUN: tp-opt %s --tp-fuse-grad-accumulation | FileCheck %s
// RUN: tp-opt %s --tp-fuse-grad-accumulation | tp-opt | FileCheck %s

// A weight gradient that only its accumulation reads is added into the
// buffer by the product, with the accumulation's attributes (split_dim,
// the replica classes, owned). One that goes through tp.replica_sum first,
// or that something else reads too, stays as it is.
// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: tp.accumulate_linear_grad_weight %arg0, %arg1 into %arg2 {fqn = "up.weight", split_dim = 0 : i64} : tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: tp.accumulate_linear_grad_weight %arg0, %arg1 into %arg3 {derived_reduction = #tp.grad_reduction<sum>, fqn = "rep.weight", reduction = #tp.grad_reduction<mean>} : tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: tp.accumulate_linear_grad_weight %arg0, %arg1 into %arg4 {fqn = "own.weight", owned} : tensor<?x?x8xf32>, tensor<?x?x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[DK:.*]] = tp.linear_grad_weight %arg0, %arg1
// CHECK-NEXT: %[[SUM:.*]] = tp.replica_sum %[[DK]] {blocks = array<i64: 0, 0>}
// CHECK-NEXT: tp.accumulate_grad %[[SUM]] into %arg5 {fqn = "k.weight", split_dim = 0 : i64}
// CHECK-NEXT: %[[DO:.*]] = tp.linear_grad_weight %arg0, %arg1
// CHECK-NEXT: tp.accumulate_grad %[[DO]] into %arg6 {fqn = "o.weight"}
// CHECK-NEXT: return %[[DO]]
// CHECK-NOT: tp.linear_grad_weight
func.func @train_step(%dy: tensor<?x?x8xf32>, %x: tensor<?x?x4xf32>,
    %up: tensor<8x4xf32> {tp.fqn = "up.weight"},
    %rep: tensor<8x4xf32> {tp.fqn = "rep.weight"},
    %own: tensor<8x4xf32> {tp.fqn = "own.weight"},
    %k: tensor<8x4xf32> {tp.fqn = "k.weight"},
    %o: tensor<8x4xf32> {tp.fqn = "o.weight"}) -> tensor<8x4xf32> attributes {tp.entry = "train_step"} {
  %dup = tp.linear_grad_weight %dy, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
  tp.accumulate_grad %dup into %up {fqn = "up.weight", split_dim = 0 : i64} : tensor<8x4xf32>
  %drep = tp.linear_grad_weight %dy, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
  tp.accumulate_grad %drep into %rep {fqn = "rep.weight", reduction = #tp.grad_reduction<mean>, derived_reduction = #tp.grad_reduction<sum>} : tensor<8x4xf32>
  %down = tp.linear_grad_weight %dy, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
  tp.accumulate_grad %down into %own {fqn = "own.weight", owned} : tensor<8x4xf32>
  %dk = tp.linear_grad_weight %dy, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
  %sum = tp.replica_sum %dk {blocks = array<i64: 0, 0>} : tensor<8x4xf32>
  tp.accumulate_grad %sum into %k {fqn = "k.weight", split_dim = 0 : i64} : tensor<8x4xf32>
  %do = tp.linear_grad_weight %dy, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
  tp.accumulate_grad %do into %o {fqn = "o.weight"} : tensor<8x4xf32>
  return %do : tensor<8x4xf32>
}

// A tied embedding: the LM head's and the embedding's gradients summed
// into one accumulation. Each term is accumulated on its own where it is
// made: the loss's weight gradient by the fused loss itself, the
// embedding's rows into the buffer; the attributes of the accumulation go
// with both, and no [vocab, hidden] tensor is left.
// CHECK-LABEL: func.func @tied_loss
// CHECK-NEXT: %[[LOSS:.*]], %[[DX:.*]] = tp.accumulate_linear_cross_entropy %arg0, %arg1, %arg2 into %arg3 {derived_reduction = #tp.grad_reduction<sum>, fqn = "embed.weight", reduction = #tp.grad_reduction<sum>, vocab_parallel} : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<?x?xi64>, tensor<8x4xf32>) -> (tensor<f32>, tensor<?x?x4xf32>)
// CHECK-NEXT: tp.accumulate_embedding_grad %arg1, %[[DX]] into %arg3 {derived_reduction = #tp.grad_reduction<sum>, fqn = "embed.weight", padding_idx = 0 : i64, reduction = #tp.grad_reduction<sum>, vocab_parallel} : tensor<?x?xi64>, tensor<?x?x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: return %[[LOSS]]
func.func @tied_loss(%x: tensor<?x?x4xf32>, %ids: tensor<?x?xi64>,
    %mask: tensor<?x?xi64>,
    %table: tensor<8x4xf32> {tp.fqn = "embed.weight"}) -> tensor<f32> attributes {tp.entry = "train_step"} {
  %loss, %dx, %dw = tp.linear_cross_entropy %x, %table, %ids, %mask {vocab_parallel} : (tensor<?x?x4xf32>, tensor<8x4xf32>, tensor<?x?xi64>, tensor<?x?xi64>) -> (tensor<f32>, tensor<?x?x4xf32>, tensor<8x4xf32>)
  %de = tp.embedding_grad %ids, %dx, %table {vocab_parallel, padding_idx = 0 : i64} : (tensor<?x?xi64>, tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %sum = tp.add %dw, %de : tensor<8x4xf32>
  tp.accumulate_grad %sum into %table {fqn = "embed.weight", reduction = #tp.grad_reduction<sum>, derived_reduction = #tp.grad_reduction<sum>} : tensor<8x4xf32>
  return %loss : tensor<f32>
}

// A parameter used three times (nested sums), its terms made apart: each
// accumulated just after it is made, the product's by the product. A sum
// that something else reads stays one accumulation, and an embedding
// gradient of another table (or the loss's weight gradient of another
// parameter) is not fused into this buffer.
// CHECK-LABEL: func.func @three_uses
// CHECK-NEXT: tp.accumulate_linear_grad_weight %arg0, %arg1 into %arg3 {fqn = "w", split_dim = 0 : i64}
// CHECK-NEXT: %[[A:.*]] = tp.linear_grad_weight %arg0, %arg1
// CHECK-NEXT: tp.accumulate_grad %[[A]] into %arg3 {fqn = "w", split_dim = 0 : i64}
// CHECK-NEXT: tp.accumulate_embedding_grad %arg2, %arg1 into %arg3 {fqn = "w", split_dim = 0 : i64}
// CHECK-NEXT: %[[S:.*]] = tp.add %[[A]], %[[A]]
// CHECK-NEXT: tp.accumulate_grad %[[S]] into %arg4 {fqn = "v"}
// CHECK-NEXT: %[[O:.*]] = tp.embedding_grad %arg2, %arg1, %arg4
// CHECK-NEXT: tp.accumulate_grad %[[O]] into %arg3 {fqn = "w"}
// CHECK-NEXT: return %[[S]]
func.func @three_uses(%dy: tensor<?x?x8xf32>, %x: tensor<?x?x4xf32>,
    %ids: tensor<?x?xi64>,
    %w: tensor<8x4xf32> {tp.fqn = "w"},
    %v: tensor<8x4xf32> {tp.fqn = "v"}) -> tensor<8x4xf32> attributes {tp.entry = "train_step"} {
  %d1 = tp.linear_grad_weight %dy, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
  %d2 = tp.linear_grad_weight %dy, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
  %d3 = tp.embedding_grad %ids, %x, %w : (tensor<?x?xi64>, tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %s12 = tp.add %d1, %d2 : tensor<8x4xf32>
  %s = tp.add %s12, %d3 : tensor<8x4xf32>
  tp.accumulate_grad %s into %w {fqn = "w", split_dim = 0 : i64} : tensor<8x4xf32>
  %kept = tp.add %d2, %d2 : tensor<8x4xf32>
  tp.accumulate_grad %kept into %v {fqn = "v"} : tensor<8x4xf32>
  %other = tp.embedding_grad %ids, %x, %v : (tensor<?x?xi64>, tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  tp.accumulate_grad %other into %w {fqn = "w"} : tensor<8x4xf32>
  return %kept : tensor<8x4xf32>
}
