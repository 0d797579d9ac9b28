//===- Graphs.h - entry points replayed as CUDA graphs ----------*- C++ -*-===//
//-*-===//
//
// The entry points that take (ids, key mask) replay as CUDA graphs on the
// GPU (--cuda-graphs, on by default): the forward under `model --bench N`
// and each micro-batch of `model --train`'s step (from the second step on,
// train.cpp). Per input shape (and whether the mask keeps every key) the
// first call runs eagerly, the second is captured on the rank's stream and
// every later one replays it, its inputs first copied into the graph's own
// (the bookkeeping: common/GraphCache.h). NCCL's collectives are captured
// with the kernels. A call that cannot be captured says why once and runs
// eagerly.
//
// A graph reads and writes, besides its inputs, memory where the capture
// found it: the parameters and the gradient buffers (checked before each
// replay: a graph whose parameters or buffers moved is dropped, and the
// call runs eagerly) and the RoPE tables (kernels.cu keeps the last few
// pairs on the GPU, and a capture that needs others fails; the graph keeps
// the ones it read alive, keepForGraph). Each key has its own graph, up to
// eight (rows of a few lengths, and a padded batch beside unpadded ones);
// a ninth runs eagerly. Their activations need not add up: CUDA lets
// graphs launched on one stream share the physical memory of what each
// allocates and frees. Host-side effects of the captured call do not
// happen on a replay: the caller makes them none (the training loop's
// gradient buffers take every micro-batch's gradient by adding).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_GRAPHS_H
#define TPRT_CUDA_GRAPHS_H

#include "tprt/tprt.h"

#include <memory>
#include <string>

namespace tprt {
namespace cuda {

/// A generated program's entry point taking (ids, key mask):
/// tprt_model_forward, tprt_model_train_step.
using EntryFn = Tensor (*)(Context &, Tensor, Tensor);

class EntryGraphs {
public:
  /// `fn` is the entry point; `what` names it in notes ("the forward").
  EntryGraphs(EntryFn fn, std::string what);
  ~EntryGraphs();

  /// fn(ctx, ids, mask) as above (a mask the context knows keeps every key
  /// is none in the graph too). A replay's result is the graph's own
  /// buffer, valid until the next call with inputs of this key.
  Tensor run(Context &ctx, const Tensor &ids, const Tensor &mask);

  /// How many keys replay a graph.
  size_t captured() const;

private:
  struct State;
  std::unique_ptr<State> state_;
};

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_GRAPHS_H
