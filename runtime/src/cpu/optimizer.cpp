//===- optimizer.cpp - AdamW and SGD element updates on the host ----------===//

#include "Optimizer.h"
#include "KernelUtils.h"
#include "Vector.h"

#include <algorithm>
#include <vector>

namespace tprt::cpu {
namespace {

/// Calls fn(values, begin, count) on blocks of `param`'s elements as f32,
/// over the threads. A bf16 parameter's block is widened into a scratch
/// buffer and rounded back once after fn, so no f32 copy of the whole
/// parameter is made.
template <typename Fn> void forEachBlockInF32(Tensor &param, Fn fn) {
  constexpr int64_t kBlock = 8192;
  int64_t n = param.numel();
  if (param.dtype() == DType::F32) {
    float *p = param.f32();
    cpu::parallelBlocks(n, kBlock, [&](int64_t begin, int64_t count) {
      fn(p + begin, begin, count);
    });
    return;
  }
  auto *p = static_cast<uint16_t *>(param.raw());
#pragma omp parallel
  {
    std::vector<float> work(kBlock);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; i += kBlock) {
      int64_t count = std::min(kBlock, n - i);
      cpu::widenBf16(p + i, work.data(), count);
      fn(work.data(), i, count);
      cpu::narrowToBf16(work.data(), p + i, count);
    }
  }
}

} // namespace

void sgdUpdate(Tensor &param, const float *g, float gradScale, float *m,
               float weightDecay, float momentum, float lr, bool first,
               bool withMomentum) {
  forEachBlockInF32(param, [&](float *p, int64_t begin, int64_t count) {
    for (int64_t j = 0; j < count; ++j) {
      int64_t i = begin + j;
      float d = g[i] * gradScale + weightDecay * p[j];
      m[i] = first ? d : momentum * m[i] + d;
      p[j] -= lr * (withMomentum ? m[i] : d);
    }
  });
}

void adamwUpdate(Tensor &param, const float *g, float gradScale, float *m,
                 float *v, float decay, float beta1, float beta2,
                 float stepSize, float root2, float eps) {
  forEachBlockInF32(param, [&](float *p, int64_t begin, int64_t count) {
    adamwStep(p, g + begin, gradScale, m + begin, v + begin, count, decay,
              beta1, beta2, stepSize, root2, eps);
  });
}

} // namespace tprt::cpu
