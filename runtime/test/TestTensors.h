//===- TestTensors.h - what the runtime's unit tests share ------*- C++ -*-===//

#ifndef TPRT_TEST_TESTTENSORS_H
#define TPRT_TEST_TESTTENSORS_H

#include "tprt/tprt.h"

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tprt::test {

/// A one-rank context without weights (kernels that communicate need MPI).
inline Context &ctx() {
  static Context context(0, 1, "/nonexistent/model.onnx", "model.onnx");
  return context;
}

inline Tensor randomTensor(std::vector<int64_t> shape, unsigned seed,
                           float lo = -1.0f, float hi = 1.0f) {
  Tensor t(DType::F32, std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.f32()[i] = dist(gen);
  return t;
}

/// Whether this process has mapped a library whose name contains `name`
/// (/proc/self/maps): the libraries opened only when needed.
inline bool mapsLibrary(const char *name) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(name) != std::string::npos;
}

} // namespace tprt::test

#endif // TPRT_TEST_TESTTENSORS_H
