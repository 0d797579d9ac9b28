//===- Graphs.h - a generated forward captured as a CUDA graph -*- C++ -*-===//
//
// `model --bench N --device cuda` replays the forward as a CUDA graph
// (--cuda-graphs, on by default there): per input shape the first call
// runs eagerly, the second is captured on the rank's stream and every later
// one replays it, its inputs first copied into the graph's own (the
// bookkeeping: common/GraphCache.h). NCCL's collectives are captured with
// the kernels. A forward that cannot be captured says why once and runs
// eagerly. A graph reads what the forward reads besides its inputs where
// the capture found it: the parameters (on the GPU for good after their
// first use) and the RoPE tables of the last sequence length (kernels.cu),
// so there is one graph at a time: a call of another shape drops it, and
// both shapes run eagerly from then on (--bench has one shape).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_GRAPHS_H
#define TPRT_CUDA_GRAPHS_H

#include "tprt/tprt.h"

#include <memory>
#include <string>

namespace tprt {
namespace cuda {

/// A generated program's tprt_model_forward.
using ForwardFn = Tensor (*)(Context &, Tensor, Tensor);

class ForwardGraphs {
public:
  ForwardGraphs();
  ~ForwardGraphs();

  /// forward(ctx, ids, mask) as above. A replay's logits are the graph's
  /// own buffer, valid until the next call with inputs of this shape.
  Tensor run(Context &ctx, const Tensor &ids, const Tensor &mask,
             ForwardFn forward);

  /// How many shapes replay a graph.
  size_t captured() const;

private:
  struct State;
  std::unique_ptr<State> state_;
};

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_GRAPHS_H
