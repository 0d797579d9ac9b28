//===- Activation.cpp - vectorized activations ----------------------------===//

#include "Activation.h"
#include "tprt/tprt.h"

#include <cmath>
#include <string>

#ifdef TPRT_WITH_ONEDNN
#include "Dnnl.h"

#include <map>
#include <mutex>
#include <utility>
#endif

namespace tprt::cpu {

#ifdef TPRT_WITH_ONEDNN

namespace {
using dnnl::algorithm;
using dnnl::eltwise_forward;
using dnnl::memory;

algorithm algorithmOf(Activation f) {
  switch (f) {
  case Activation::Silu:
    return algorithm::eltwise_swish; // x sigmoid(alpha x), alpha 1
  case Activation::Gelu:
    return algorithm::eltwise_gelu_erf;
  case Activation::GeluTanh:
    return algorithm::eltwise_gelu_tanh;
  case Activation::Exp:
    return algorithm::eltwise_exp;
  case Activation::Sigmoid:
    return algorithm::eltwise_logistic;
  }
  fatal("unknown activation");
}

/// One primitive per (activation, element count), made on first use.
eltwise_forward &primitiveFor(Activation f, int64_t n) {
  static std::mutex mutex;
  static std::map<std::pair<Activation, int64_t>, eltwise_forward> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find({f, n});
  if (it != cache.end())
    return it->second;
  memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
#if DNNL_VERSION_MAJOR >= 3
  eltwise_forward::primitive_desc pd(dnnlEngine(),
                                     dnnl::prop_kind::forward_inference,
                                     algorithmOf(f), md, md, 1.0f, 0.0f);
#else
  eltwise_forward::primitive_desc pd(
      eltwise_forward::desc(dnnl::prop_kind::forward_inference, algorithmOf(f),
                            md, 1.0f, 0.0f),
      dnnlEngine());
#endif
  return cache.emplace(std::make_pair(f, n), eltwise_forward(pd)).first->second;
}
} // namespace

void activation(Activation f, const float *x, float *out, int64_t n) {
  if (n == 0)
    return;
  try {
    eltwise_forward &prim = primitiveFor(f, n);
    memory::desc md({n}, memory::data_type::f32, memory::format_tag::a);
    dnnl::stream &stream = dnnlStream();
    prim.execute(stream, {{DNNL_ARG_SRC,
                           memory(md, dnnlEngine(), const_cast<float *>(x))},
                          {DNNL_ARG_DST, memory(md, dnnlEngine(), out)}});
    stream.wait();
  } catch (const dnnl::error &e) {
    fatal(std::string("oneDNN eltwise failed: ") + e.what());
  }
}

#else // scalar loops

void activation(Activation f, const float *x, float *out, int64_t n) {
  switch (f) {
  case Activation::Silu:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      out[i] = x[i] / (1.0f + std::exp(-x[i]));
    return;
  case Activation::Gelu:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      out[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.7071067811865476f));
    return;
  case Activation::GeluTanh: {
    const float k = 0.7978845608028654f; // sqrt(2 / pi)
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float v = x[i];
      out[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
    }
    return;
  }
  case Activation::Exp:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      out[i] = std::exp(x[i]);
    return;
  case Activation::Sigmoid:
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      out[i] = 1.0f / (1.0f + std::exp(-x[i]));
    return;
  }
}

#endif

} // namespace tprt::cpu
