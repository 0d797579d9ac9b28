//===- Dnnl.h - the oneDNN engine and streams of the kernels ----*- C++ -*-===//
//
// Only with TPRT_WITH_ONEDNN (Gemm.cpp, Activation.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_DNNL_H
#define TPRT_CPU_DNNL_H

#include <oneapi/dnnl/dnnl.hpp>

namespace tprt::cpu {

/// The process's CPU engine.
inline dnnl::engine &dnnlEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// A CPU stream executes on the calling thread: one per thread is safe
/// (primitives run inside OpenMP regions too).
inline dnnl::stream &dnnlStream() {
  thread_local dnnl::stream stream(dnnlEngine());
  return stream;
}

} // namespace tprt::cpu

#endif // TPRT_CPU_DNNL_H
