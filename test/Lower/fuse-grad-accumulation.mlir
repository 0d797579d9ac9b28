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
// CHECK-NEXT: %[[SUM:.*]] = tp.replica_sum %[[DK]] {replicas = 2 : i64}
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
  %sum = tp.replica_sum %dk {replicas = 2 : i64} : tensor<8x4xf32>
  tp.accumulate_grad %sum into %k {fqn = "k.weight", split_dim = 0 : i64} : tensor<8x4xf32>
  %do = tp.linear_grad_weight %dy, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
  tp.accumulate_grad %do into %o {fqn = "o.weight"} : tensor<8x4xf32>
  return %do : tensor<8x4xf32>
}
