//===- graphs.cpp - a generated forward captured as a CUDA graph ----------===//

#include "Graphs.h"

#include "Runtime.h"
#include "common/FatalScope.h"
#include "common/GraphCache.h"

namespace tprt {
namespace cuda {

namespace {

/// A captured forward: the graph and the buffers it reads and writes.
struct CapturedForward {
  std::shared_ptr<CUgraphExec_st> exec;
  Tensor ids, mask, logits;
};

/// A device tensor of t's type and shape holding its elements (from either
/// device).
Tensor deviceCopy(const Tensor &t) {
  if (!t.defined())
    return t;
  Tensor out = Tensor::uninitialized(t.dtype(), t.shape(), Device::CUDA);
  copy(out.raw(), Device::CUDA, t.raw(), t.device(), t.bytes());
  return out;
}

std::string keyOf(const Tensor &ids, const Tensor &mask) {
  return ids.describe() + (mask.defined() ? " " + mask.describe() : "");
}

} // namespace

struct ForwardGraphs::State {
  GraphCache<CapturedForward> cache;
  /// Each warmed-up key's logits, whose shape and type the graph's output
  /// buffer takes.
  std::map<std::string, Tensor> warmedUp;
};

ForwardGraphs::ForwardGraphs() : state_(std::make_unique<State>()) {}
ForwardGraphs::~ForwardGraphs() = default;

size_t ForwardGraphs::captured() const { return state_->cache.capturedCount(); }

Tensor ForwardGraphs::run(Context &ctx, const Tensor &ids, const Tensor &mask,
                          ForwardFn forward) {
  std::string key = keyOf(ids, mask);
  GraphCache<CapturedForward> &cache = state_->cache;
  // One shape at a time (Graphs.h): another one's call drops the graph.
  if (const std::string *other = cache.capturedKey(); other && *other != key) {
    std::string dropped = *other;
    if (cache.failed(dropped, "a call of another shape"))
      noteOnRank0("cuda graphs: the graph of " + dropped +
                  " is dropped: a call of " + key +
                  " came; both run eagerly from now on");
  }
  switch (cache.next(key)) {
  case GraphCache<CapturedForward>::Action::RunEagerly: {
    Tensor logits = forward(ctx, ids, mask);
    if (!state_->warmedUp.count(key))
      state_->warmedUp[key] =
          Tensor::uninitialized(logits.dtype(), logits.shape(), Device::CUDA);
    return logits;
  }
  case GraphCache<CapturedForward>::Action::Capture: {
    CapturedForward c;
    c.ids = deviceCopy(ids);
    c.mask = deviceCopy(mask);
    c.logits = state_->warmedUp.at(key);
    state_->warmedUp.erase(key);
    std::string why;
    cudaGraph_t graph = nullptr;
    // Thread-local: another thread's CUDA calls (the collective
    // watchdog's) do not break this capture.
    cudaError_t begun =
        cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal);
    if (begun != cudaSuccess) {
      why = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(begun);
    } else {
      try {
        ThrowingFatal scope;
        Tensor logits = forward(ctx, c.ids, c.mask);
        if (logits.bytes() != c.logits.bytes())
          fatal("the captured forward's logits " + logits.describe() +
                " differ from the first call's " + c.logits.describe());
        check(cudaMemcpyAsync(c.logits.raw(), logits.raw(), logits.bytes(),
                              cudaMemcpyDeviceToDevice, stream()),
              "cudaMemcpyAsync");
      } catch (const FatalError &e) {
        why = e.what();
      }
      cudaError_t ended = cudaStreamEndCapture(stream(), &graph);
      if (why.empty() && ended != cudaSuccess)
        why = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended);
    }
    cudaGraphExec_t exec = nullptr;
    if (why.empty()) {
      cudaError_t made = cudaGraphInstantiate(
          &exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
      if (made != cudaSuccess)
        why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(made);
    }
    if (graph)
      cudaGraphDestroy(graph);
    if (!why.empty()) {
      cudaGetLastError(); // the capture's error is not the next call's
      if (cache.failed(key, why))
        noteOnRank0("cuda graphs: the forward of " + key +
                    " is not captured (" + why + "); it runs eagerly");
      return forward(ctx, ids, mask);
    }
    c.exec = std::shared_ptr<CUgraphExec_st>(
        exec, [](cudaGraphExec_t e) { cudaGraphExecDestroy(e); });
    cache.captured(key, std::move(c));
    [[fallthrough]];
  }
  case GraphCache<CapturedForward>::Action::Replay: {
    CapturedForward &c = cache.replay(key);
    copy(c.ids.raw(), Device::CUDA, ids.raw(), ids.device(), ids.bytes());
    if (mask.defined())
      copy(c.mask.raw(), Device::CUDA, mask.raw(), mask.device(), mask.bytes());
    check(cudaGraphLaunch(c.exec.get(), stream()), "cudaGraphLaunch");
    return c.logits;
  }
  }
  return forward(ctx, ids, mask);
}

} // namespace cuda
} // namespace tprt
