//===- graphs.cpp - entry points replayed as CUDA graphs ------------------===//

#include "Graphs.h"

#include "Runtime.h"
#include "common/FatalScope.h"
#include "common/GraphCache.h"

#include <vector>

namespace tprt {
namespace cuda {

namespace {

/// A captured call: the graph, the buffers it reads and writes, and the
/// memory it found the parameters and gradient buffers in.
struct CapturedCall {
  std::shared_ptr<CUgraphExec_st> exec;
  Tensor ids, mask, result;
  std::vector<const void *> held;
  /// What the kernels' own caches lent the capture (keepForGraph).
  std::vector<Tensor> kept;
};

/// Where keepForGraph puts what it is given: the capture under way's.
thread_local std::vector<Tensor> *keptByCapture = nullptr;

/// A device tensor of t's type and shape holding its elements (from either
/// device).
Tensor deviceCopy(const Tensor &t) {
  if (!t.defined())
    return t;
  Tensor out = Tensor::uninitialized(t.dtype(), t.shape(), Device::CUDA);
  copy(out.raw(), Device::CUDA, t.raw(), t.device(), t.bytes());
  return out;
}

std::string keyOf(const Tensor &ids, const Tensor &mask, bool keepsAll) {
  return ids.describe() + (mask.defined() ? " " + mask.describe() : "") +
         (keepsAll ? " keeping every key" : "");
}

/// Where the parameters and the gradient buffers are now, in FQN order.
std::vector<const void *> heldMemory(Context &ctx) {
  std::vector<const void *> held;
  for (const auto &entry : ctx.paramLayouts())
    if (Tensor *param = ctx.cachedParam(entry.first))
      held.push_back(param->raw());
  for (const auto &entry : ctx.grads())
    held.push_back(entry.second.grad.raw());
  return held;
}

/// The stream-ordered pool's free blocks back to the driver: what the
/// eager calls cached for their activations, which the graph's own pool
/// now holds.
void trimPool() {
  int device = 0;
  cudaMemPool_t pool;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess)
    cudaMemPoolTrimTo(pool, 0);
}

} // namespace

void keepForGraph(const Tensor &t) {
  if (keptByCapture)
    keptByCapture->push_back(t);
}

struct EntryGraphs::State {
  EntryFn fn;
  std::string what;
  GraphCache<CapturedCall> cache;
  /// Each warmed-up key's result, whose shape and type the graph's output
  /// buffer takes.
  std::map<std::string, Tensor> warmedUp;

  /// Captures fn(ctx, c.ids, c.mask) into c; the reason when it fails.
  std::string capture(Context &ctx, CapturedCall &c, bool keepsAll);
};

EntryGraphs::EntryGraphs(EntryFn fn, std::string what)
    : state_(std::make_unique<State>()) {
  state_->fn = fn;
  state_->what = std::move(what);
}
EntryGraphs::~EntryGraphs() = default;

size_t EntryGraphs::captured() const { return state_->cache.capturedCount(); }

std::string EntryGraphs::State::capture(Context &ctx, CapturedCall &c,
                                        bool keepsAll) {
  // The graph's own mask, which the context knows keeps every key when
  // the call's did.
  if (keepsAll)
    ctx.setKeyMaskKeepsAll(c.mask);
  std::string why;
  cudaGraph_t graph = nullptr;
  // Thread-local: another thread's CUDA calls (the collective watchdog's)
  // do not break this capture.
  cudaError_t begun =
      cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal);
  if (begun != cudaSuccess)
    return std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(begun);
  keptByCapture = &c.kept;
  try {
    ThrowingFatal scope;
    Tensor result = fn(ctx, c.ids, c.mask);
    if (result.bytes() != c.result.bytes())
      fatal("the captured call's result " + result.describe() +
            " differs from the first call's " + c.result.describe());
    check(cudaMemcpyAsync(c.result.raw(), result.raw(), result.bytes(),
                          cudaMemcpyDeviceToDevice, stream()),
          "cudaMemcpyAsync");
  } catch (const FatalError &e) {
    why = e.what();
  }
  keptByCapture = nullptr;
  cudaError_t ended = cudaStreamEndCapture(stream(), &graph);
  if (why.empty() && ended != cudaSuccess)
    why = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended);
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
    return why;
  }
  c.exec = std::shared_ptr<CUgraphExec_st>(
      exec, [](cudaGraphExec_t e) { cudaGraphExecDestroy(e); });
  c.held = heldMemory(ctx);
  trimPool();
  graphMemoryBegins();
  return "";
}

Tensor EntryGraphs::run(Context &ctx, const Tensor &ids, const Tensor &mask) {
  State &s = *state_;
  bool keepsAll = ctx.keyMaskKeepsAll(mask);
  std::string key = keyOf(ids, mask, keepsAll);
  GraphCache<CapturedCall> &cache = s.cache;
  switch (cache.next(key)) {
  case GraphCache<CapturedCall>::Action::Refuse:
    s.warmedUp.erase(key);
    noteOnRank0("cuda graphs: " + s.what + " on " + key +
                " runs eagerly: the graphs of " +
                std::to_string(cache.maxGraphs()) +
                " other input shapes are kept already");
    return s.fn(ctx, ids, mask);
  case GraphCache<CapturedCall>::Action::RunEagerly:
    return s.fn(ctx, ids, mask);
  case GraphCache<CapturedCall>::Action::WarmUp: {
    Tensor result = s.fn(ctx, ids, mask);
    s.warmedUp[key] =
        Tensor::uninitialized(result.dtype(), result.shape(), Device::CUDA);
    return result;
  }
  case GraphCache<CapturedCall>::Action::Capture: {
    CapturedCall c;
    c.ids = deviceCopy(ids);
    c.mask = deviceCopy(mask);
    c.result = s.warmedUp.at(key);
    s.warmedUp.erase(key);
    if (std::string why = s.capture(ctx, c, keepsAll); !why.empty()) {
      if (cache.failed(key, why))
        noteOnRank0("cuda graphs: " + s.what + " on " + key +
                    " is not captured (" + why + "); it runs eagerly");
      if (keepsAll)
        ctx.setKeyMaskKeepsAll(mask);
      return s.fn(ctx, ids, mask);
    }
    cache.captured(key, std::move(c));
    [[fallthrough]];
  }
  case GraphCache<CapturedCall>::Action::Replay: {
    CapturedCall &c = cache.replay(key);
    if (heldMemory(ctx) != c.held) {
      std::string why = "its parameters or gradient buffers moved";
      if (cache.failed(key, why))
        noteOnRank0("cuda graphs: the graph of " + s.what + " on " + key +
                    " is dropped (" + why + "); it runs eagerly");
      return s.fn(ctx, ids, mask);
    }
    copy(c.ids.raw(), Device::CUDA, ids.raw(), ids.device(), ids.bytes());
    if (mask.defined())
      copy(c.mask.raw(), Device::CUDA, mask.raw(), mask.device(), mask.bytes());
    check(cudaGraphLaunch(c.exec.get(), stream()), "cudaGraphLaunch");
    return c.result;
  }
  }
  return s.fn(ctx, ids, mask);
}

} // namespace cuda
} // namespace tprt
