// RUN: tp-opt %s --split-input-file --verify-diagnostics

// The two halves of an all-reduce pair up one to one, in one block, with
// one all-reduce in flight at a time.

func.func @read_twice(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @below {{result must be read once, by a tp.all_reduce_wait in its block}}
  %p = tp.all_reduce_start %x on @tp grid_axes = [0] : tensor<?x4xf32>
  %s = tp.all_reduce_wait %p : tensor<?x4xf32>
  %t = tp.add %p, %s : tensor<?x4xf32>
  return %t : tensor<?x4xf32>
}

// -----

func.func @no_axis(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @below {{sums over no grid axis}}
  %p = tp.all_reduce_start %x on @tp grid_axes = [] : tensor<?x4xf32>
  %s = tp.all_reduce_wait %p : tensor<?x4xf32>
  return %s : tensor<?x4xf32>
}

// -----

func.func @not_started(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @below {{operand must be a tp.all_reduce_start's result in this block}}
  %s = tp.all_reduce_wait %x : tensor<?x4xf32>
  return %s : tensor<?x4xf32>
}

// -----

func.func @two_in_flight(%x: tensor<?x4xf32>, %y: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %p = tp.all_reduce_start %x on @tp grid_axes = [0] : tensor<?x4xf32>
  // expected-note @below {{started here}}
  %q = tp.all_reduce_start %y on @tp grid_axes = [0] : tensor<?x4xf32>
  // expected-error @below {{another all-reduce starts before this one ends}}
  %s = tp.all_reduce_wait %p : tensor<?x4xf32>
  %t = tp.all_reduce_wait %q : tensor<?x4xf32>
  %r = tp.add %s, %t : tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}
