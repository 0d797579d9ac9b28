// RUN: tp-opt %s --split-input-file --tp-partition --verify-diagnostics
// The partition rules of the training step's ops refuse what they cannot
// hold on one rank, naming the op. A training step (tp.entry = "train_step")
// is partitioned beside the forward.

module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> attributes {tp.entry = "forward"} {
    return %x : tensor<4xf32>
  }
  // A replicated parameter whose gradient comes out split: the weight
  // gradient of a column-split output is split on dim 0, the weight is not.
  func.func @step(%x: tensor<?x?x4xf32>, %up: tensor<8x4xf32>, %w: tensor<8x4xf32> {tp.fqn = "w"}) -> tensor<?x?x8xf32> attributes {tp.entry = "train_step"} {
    %s1 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %up to %s1 annotate_for_users : tensor<8x4xf32>
    %a = tp.linear %x, %u : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    %g = tp.linear_grad_weight %a, %x : (tensor<?x?x8xf32>, tensor<?x?x4xf32>) -> tensor<8x4xf32>
    // expected-error @+1 {{tp-partition: the gradient of 'w' is not held as its parameter is (replicated)}}
    tp.accumulate_grad %g into %w {fqn = "w"} : tensor<8x4xf32>
    return %a : tensor<?x?x8xf32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x8xf32>, %up: tensor<8x4xf32>) -> tensor<?x?x4xf32> {
    %s1 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %u = shard.shard %up to %s1 annotate_for_users : tensor<8x4xf32>
    // The output gradient of a column-split linear must be split like its
    // output; a whole one is a wrong program.
    // expected-error @+1 {{tp-partition: a column-split linear's output gradient must be split on its last dimension}}
    %dx = tp.linear_grad_input %x, %u : (tensor<?x?x8xf32>, tensor<8x4xf32>) -> tensor<?x?x4xf32>
    return %dx : tensor<?x?x4xf32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>, %ids: tensor<?x?xi64>, %mask: tensor<?x?xi64>) -> tensor<f32> {
    %y = tp.silu %x : tensor<?x?x4xf32>
    %s = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %xs = shard.shard %y to %s annotate_for_users : tensor<?x?x4xf32>
    // expected-error @+1 {{tp-partition: the loss needs whole sequences (each position's label is the next token)}}
    %loss, %lse = tp.cross_entropy %xs, %ids, %mask : (tensor<?x?x4xf32>, tensor<?x?xi64>, tensor<?x?xi64>) -> (tensor<f32>, tensor<?x?xf32>)
    return %loss : tensor<f32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @forward(%ids: tensor<?x?xi64>, %dy: tensor<?x?x4xf32>, %emb: tensor<16x4xf32>) -> tensor<16x4xf32> {
    %s = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %e = shard.shard %emb to %s annotate_for_users : tensor<16x4xf32>
    // A table split on its hidden dimension needs its output gradient split
    // the same way.
    // expected-error @+1 {{tp-partition: the embedding's output gradient is not held as its table is split}}
    %g = tp.embedding_grad %ids, %dy, %e : (tensor<?x?xi64>, tensor<?x?x4xf32>, tensor<16x4xf32>) -> tensor<16x4xf32>
    return %g : tensor<16x4xf32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  // An activation argument annotated as if it were a parameter: its
  // dynamic dimension cannot be split at compile time.
  // expected-error @+1 {{argument 0: dim 1 of 'tensor<?x?x4xf32>' is dynamic; only parameters (of static shape) are split by an annotation of the argument}}
  func.func @forward(%x: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
    %s = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
    %xs = shard.shard %x to %s annotate_for_users : tensor<?x?x4xf32>
    return %xs : tensor<?x?x4xf32>
  }
}

// -----

module {
  shard.grid @tp(shape = 2)
  func.func @forward(%x: tensor<?x?x4xf32>, %up: tensor<8x4xf32>, %u: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
    %s1 = shard.sharding @tp split_axes = [[0]] : !shard.sharding
    %w = shard.shard %up to %s1 annotate_for_users : tensor<8x4xf32>
    %gate = tp.linear %x, %w : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
    // A gated MLP's gradients from a column-split gate and a whole up.
    // expected-error @+1 {{tp-partition: operands are split differently}}
    %dg, %du = tp.silu_mul_grad %gate, %u, %gate : tensor<?x?x8xf32>
    return %dg : tensor<?x?x8xf32>
  }
}
