//===- cudnn.cpp - cuDNN's fused attention through its frontend ----------===//
//
// The forward and backward graphs of cuDNN's scaled-dot-product attention,
// built with the cuDNN frontend (its graph API; the library is opened with
// dlopen, NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING) once per shape and kept.
// The runtime's [batch, seq, heads * headDim] tensors are cuDNN's
// [batch, heads, seq, headDim] with strides, so nothing is transposed.
//
//===----------------------------------------------------------------------===//

#include "Cudnn.h"

#include "Runtime.h"

#include <atomic>
#include <sstream>

#ifdef TPRT_WITH_CUDNN
#include "OpenLibrary.h"

#include <cudnn_frontend.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

// The frontend's calls go through this handle (cudnn_frontend_shim.h).
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend
#endif

namespace tprt {
namespace cuda {

std::string FusedAttentionShape::key() const {
  std::ostringstream os;
  os << dtypeName(dtype) << " b" << batch << " sq" << sq << " skv" << skv
     << " h" << heads << "/" << kvHeads << " d" << headDim << " scale" << scale
     << (causal ? " causal" : "") << " window" << window
     << (bias ? " bias" : "");
  return os.str();
}

namespace {
std::atomic<int64_t> runs{0};
} // namespace

int64_t cudnnAttentionRuns() { return runs.load(); }

#ifndef TPRT_WITH_CUDNN

bool cudnnAvailable(std::string &why) {
  why = "this runtime was built without the cuDNN frontend's headers "
        "(scripts/setup.sh installs them into .venv)";
  return false;
}

bool cudnnAttentionForward(const FusedAttentionShape &, const void *,
                           const void *, const void *, const void *, void *,
                           float *, std::string &why) {
  return cudnnAvailable(why);
}

bool cudnnAttentionBackward(const FusedAttentionShape &, const void *,
                            const void *, const void *, const void *,
                            const void *, const void *, const float *, void *,
                            void *, void *, std::string &why) {
  return cudnnAvailable(why);
}

#else

namespace fe = cudnn_frontend;
using TensorAttributes = std::shared_ptr<fe::graph::Tensor_attributes>;

namespace {

#define TPRT_STRINGIFY_EXPANDED(x) TPRT_STRINGIFY(x)
#define TPRT_STRINGIFY(x) #x

constexpr const char *kLibrary =
    "libcudnn.so." TPRT_STRINGIFY_EXPANDED(CUDNN_MAJOR);

/// The uids of the graphs' tensors.
enum Uid : int64_t { Q = 1, K, V, O, Stats, Bias, DO, DQ, DK, DV };

/// cuDNN opened and a handle made, or why not.
struct Library {
  cudnnHandle_t handle = nullptr;
  std::string missing;
};

Library open() {
  Library lib;
  std::string tried;
  void *dl = nullptr;
  if (const char *path = std::getenv("TPRT_CUDNN_LIBRARY")) {
    dl = openLibrary(nullptr, path, tried);
  } else {
#ifdef TPRT_CUDNN_DIR
    dl = openLibrary(TPRT_CUDNN_DIR, kLibrary, tried);
#else
    dl = openLibrary(nullptr, kLibrary, tried);
#endif
  }
  if (!dl) {
    lib.missing = std::string("cannot open ") + kLibrary + ": " + tried;
    return lib;
  }
  fe::cudnn_dlhandle = dl;
  try {
    if (fe::detail::get_backend_version() / 10000 != CUDNN_MAJOR) {
      lib.missing = "the cuDNN opened is version " +
                    std::to_string(fe::detail::get_backend_version()) +
                    ", this runtime was built for " + kLibrary;
      return lib;
    }
    cudnnStatus_t status = fe::detail::create_handle(&lib.handle);
    if (status != CUDNN_STATUS_SUCCESS) {
      lib.handle = nullptr;
      lib.missing = std::string("cudnnCreate failed: ") +
                    fe::detail::get_error_string(status);
    }
  } catch (const std::exception &e) {
    lib.handle = nullptr;
    lib.missing = e.what();
  }
  return lib;
}

const Library &library() {
  static const Library lib = open();
  return lib;
}

fe::DataType_t cudnnType(DType dtype) {
  return dtype == DType::BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
}

/// A [batch, heads, seq, headDim] view of the runtime's [batch, seq,
/// heads * headDim].
TensorAttributes packedHeads(fe::graph::Graph &graph, const char *name,
                             int64_t uid, int64_t batch, int64_t heads,
                             int64_t seq, int64_t headDim) {
  return graph.tensor(
      fe::graph::Tensor_attributes()
          .set_name(name)
          .set_uid(uid)
          .set_dim({batch, heads, seq, headDim})
          .set_stride({seq * heads * headDim, headDim, heads * headDim, 1}));
}

void setPackedHeads(const TensorAttributes &t, int64_t uid, int64_t batch,
                    int64_t heads, int64_t seq, int64_t headDim) {
  t->set_output(true)
      .set_uid(uid)
      .set_dim({batch, heads, seq, headDim})
      .set_stride({seq * heads * headDim, headDim, heads * headDim, 1});
}

/// The masks every graph of `s` applies. With sq == skv top-left and
/// bottom-right alignment agree; cuDNN takes a bias only with top-left.
template <typename Attributes>
void setMasks(Attributes &attributes, const FusedAttentionShape &s) {
  attributes.set_attn_scale(static_cast<float>(s.scale));
  if (s.causal) {
    attributes.set_diagonal_alignment(
        s.sq == s.skv ? fe::DiagonalAlignment_t::TOP_LEFT
                      : fe::DiagonalAlignment_t::BOTTOM_RIGHT);
    attributes.set_diagonal_band_right_bound(0);
  }
  if (s.window > 0)
    attributes.set_diagonal_band_left_bound(static_cast<int>(s.window));
}

TensorAttributes biasTensor(fe::graph::Graph &graph,
                            const FusedAttentionShape &s) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name("key_mask_bias")
                          .set_uid(Bias)
                          .set_data_type(cudnnType(s.dtype))
                          .set_dim({s.batch, 1, 1, s.skv})
                          .set_stride({s.skv, s.skv, s.skv, 1}));
}

/// A built graph and its workspace, or why cuDNN refused it.
struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string refused;
};

Built build(std::shared_ptr<fe::graph::Graph> graph) {
  Built built;
  cudnnHandle_t handle = library().handle;
  auto failed = [&](const char *step, fe::error_t status) {
    if (status.is_good())
      return false;
    built.refused = std::string(step) + ": " + status.get_message();
    return true;
  };
  try {
    if (failed("validate", graph->validate()) ||
        failed("build_operation_graph", graph->build_operation_graph(handle)) ||
        failed("create_execution_plans",
               graph->create_execution_plans({fe::HeurMode_t::A})) ||
        failed("check_support", graph->check_support()) ||
        failed("build_plans", graph->build_plans()) ||
        failed("get_workspace_size",
               graph->get_workspace_size(built.workspace)))
      return built;
  } catch (const std::exception &e) {
    built.refused = e.what();
    return built;
  }
  built.graph = std::move(graph);
  return built;
}

std::shared_ptr<fe::graph::Graph> newGraph(const FusedAttentionShape &s) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(cudnnType(s.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

Built buildForward(const FusedAttentionShape &s, bool stats) {
  auto graph = newGraph(s);
  auto q = packedHeads(*graph, "q", Q, s.batch, s.heads, s.sq, s.headDim);
  auto k = packedHeads(*graph, "k", K, s.batch, s.kvHeads, s.skv, s.headDim);
  auto v = packedHeads(*graph, "v", V, s.batch, s.kvHeads, s.skv, s.headDim);
  auto attributes = fe::graph::SDPA_attributes()
                        .set_name("attention")
                        .set_generate_stats(stats);
  setMasks(attributes, s);
  if (s.bias)
    attributes.set_bias(biasTensor(*graph, s));
  auto [o, lse] = graph->sdpa(q, k, v, attributes);
  setPackedHeads(o, O, s.batch, s.heads, s.sq, s.headDim);
  if (stats)
    lse->set_output(true)
        .set_uid(Stats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({s.batch, s.heads, s.sq, 1})
        .set_stride({s.heads * s.sq, s.sq, 1, 1});
  return build(std::move(graph));
}

Built buildBackward(const FusedAttentionShape &s) {
  auto graph = newGraph(s);
  auto q = packedHeads(*graph, "q", Q, s.batch, s.heads, s.sq, s.headDim);
  auto k = packedHeads(*graph, "k", K, s.batch, s.kvHeads, s.skv, s.headDim);
  auto v = packedHeads(*graph, "v", V, s.batch, s.kvHeads, s.skv, s.headDim);
  auto o = packedHeads(*graph, "o", O, s.batch, s.heads, s.sq, s.headDim);
  auto dO = packedHeads(*graph, "dO", DO, s.batch, s.heads, s.sq, s.headDim);
  auto lse = graph->tensor(fe::graph::Tensor_attributes()
                               .set_name("stats")
                               .set_uid(Stats)
                               .set_data_type(fe::DataType_t::FLOAT)
                               .set_dim({s.batch, s.heads, s.sq, 1})
                               .set_stride({s.heads * s.sq, s.sq, 1, 1}));
  auto attributes =
      fe::graph::SDPA_backward_attributes().set_name("attention_grad");
  setMasks(attributes, s);
  if (s.bias)
    attributes.set_bias(biasTensor(*graph, s));
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, dO, lse, attributes);
  setPackedHeads(dq, DQ, s.batch, s.heads, s.sq, s.headDim);
  setPackedHeads(dk, DK, s.batch, s.kvHeads, s.skv, s.headDim);
  setPackedHeads(dv, DV, s.batch, s.kvHeads, s.skv, s.headDim);
  return build(std::move(graph));
}

/// The built graphs, by what they compute and the shape's key.
const Built &cached(const std::string &key,
                    const std::function<Built()> &make) {
  static std::mutex mutex;
  static std::unordered_map<std::string, Built> graphs;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = graphs.find(key);
  if (it == graphs.end())
    it = graphs.emplace(key, make()).first;
  return it->second;
}

bool execute(const Built &built, std::unordered_map<int64_t, void *> &pack,
             std::string &why) {
  if (!built.graph) {
    why = built.refused;
    return false;
  }
  cudnnHandle_t handle = library().handle;
  std::shared_ptr<unsigned char[]> workspace =
      allocate(static_cast<size_t>(built.workspace));
  try {
    cudnnStatus_t status = fe::detail::set_stream(handle, stream());
    if (status != CUDNN_STATUS_SUCCESS)
      fatal(std::string("attention: cudnnSetStream failed: ") +
            fe::detail::get_error_string(status));
    fe::error_t done = built.graph->execute(handle, pack, workspace.get());
    if (done.is_bad())
      fatal("attention: cuDNN's fused attention failed: " + done.get_message());
  } catch (const std::exception &e) {
    fatal(std::string("attention: cuDNN's fused attention failed: ") +
          e.what());
  }
  ++runs;
  return true;
}

} // namespace

bool cudnnAvailable(std::string &why) {
  const Library &lib = library();
  if (lib.handle)
    return true;
  why = lib.missing;
  return false;
}

bool cudnnAttentionForward(const FusedAttentionShape &s, const void *q,
                           const void *k, const void *v, const void *bias,
                           void *out, float *stats, std::string &why) {
  if (!cudnnAvailable(why))
    return false;
  bool withStats = stats != nullptr;
  const Built &built =
      cached((withStats ? "forward+stats " : "forward ") + s.key(),
             [&] { return buildForward(s, withStats); });
  std::unordered_map<int64_t, void *> pack{{Q, const_cast<void *>(q)},
                                           {K, const_cast<void *>(k)},
                                           {V, const_cast<void *>(v)},
                                           {O, out}};
  if (withStats)
    pack[Stats] = stats;
  if (s.bias)
    pack[Bias] = const_cast<void *>(bias);
  return execute(built, pack, why);
}

bool cudnnAttentionBackward(const FusedAttentionShape &s, const void *q,
                            const void *k, const void *v, const void *bias,
                            const void *out, const void *dout,
                            const float *stats, void *dq, void *dk, void *dv,
                            std::string &why) {
  if (!cudnnAvailable(why))
    return false;
  const Built &built =
      cached("backward " + s.key(), [&] { return buildBackward(s); });
  std::unordered_map<int64_t, void *> pack{{Q, const_cast<void *>(q)},
                                           {K, const_cast<void *>(k)},
                                           {V, const_cast<void *>(v)},
                                           {O, const_cast<void *>(out)},
                                           {DO, const_cast<void *>(dout)},
                                           {Stats, const_cast<float *>(stats)},
                                           {DQ, dq},
                                           {DK, dk},
                                           {DV, dv}};
  if (s.bias)
    pack[Bias] = const_cast<void *>(bias);
  return execute(built, pack, why);
}

#endif // TPRT_WITH_CUDNN

} // namespace cuda
} // namespace tprt
