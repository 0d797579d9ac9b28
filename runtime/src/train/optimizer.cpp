//===- optimizer.cpp - AdamW and SGD at the optimizer boundary ------------===//
//
// The update formulas of torch.optim.AdamW and torch.optim.SGD (the
// single-tensor implementations PyTorch runs on CPUs), in f32 with the
// scalar factors in double as Python computes them; on the GPU the same
// element updates as kernels (src/cuda/optimizer.cu).
//
//===----------------------------------------------------------------------===//

#include "cuda/Cuda.h"
#include "tprt/Train.h"

#include <cmath>
#include <cstring>

namespace tprt {
namespace {

/// f32 zeros of `shape` on `device`.
Tensor zeros(const std::vector<int64_t> &shape, Device device) {
#ifdef TPRT_WITH_CUDA
  if (device == Device::CUDA)
    return cuda::zeros(shape);
#endif
  return Tensor(DType::F32, shape);
}

} // namespace

void Optimizer::step(Context &ctx) {
  ++step_;
  for (auto &[fqn, buffer] : ctx.grads()) {
    Tensor *param = ctx.cachedParam(fqn);
    if (!param || param->dtype() == DType::I64 ||
        param->shape() != buffer.grad.shape())
      fatal("optimizer: parameter '" + fqn + "' does not match its gradient");
    if (param->dtype() == DType::F32) {
      update(fqn, *param, buffer.grad);
      continue;
    }
    // A bf16 / f16 parameter (tpc --dtype) is updated in f32, with f32
    // moments, and rounded back once, into the storage every handle shares.
    Tensor work = param->to(DType::F32);
    update(fqn, work, buffer.grad);
    Tensor narrow = work.to(param->dtype());
    std::memcpy(param->raw(), narrow.raw(), narrow.bytes());
  }
}

void Optimizer::update(const std::string &fqn, Tensor &param,
                       const Tensor &grad) {
  const TrainOptions &o = options_;
  float *p = param.f32();
  const float *g = grad.f32();
  int64_t n = param.numel();
  Tensor &m = first_[fqn];
  if (!m.defined())
    m = zeros(param.shape(), param.device());
  float *mp = m.f32();
  if (name_ == "sgd") {
    // torch.optim.SGD: weight decay into the gradient, the momentum
    // buffer starts as the first gradient (dampening 0).
    float wd = static_cast<float>(o.weightDecay),
          mom = static_cast<float>(o.momentum), lr = static_cast<float>(o.lr);
    bool first = step_ == 1;
#ifdef TPRT_WITH_CUDA
    if (param.onGpu()) {
      cuda::sgdUpdate(p, g, mp, n, wd, mom, lr, first);
      return;
    }
#endif
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float d = g[i] + wd * p[i];
      mp[i] = first ? d : mom * mp[i] + d;
      p[i] -= lr * (o.momentum != 0 ? mp[i] : d);
    }
    return;
  }
  Tensor &v = second_[fqn];
  if (!v.defined())
    v = zeros(param.shape(), param.device());
  float *vp = v.f32();
  float decay = static_cast<float>(1.0 - o.lr * o.weightDecay);
  float b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2);
  double correction1 = 1.0 - std::pow(o.beta1, static_cast<double>(step_));
  double correction2 = 1.0 - std::pow(o.beta2, static_cast<double>(step_));
  float stepSize = static_cast<float>(o.lr / correction1);
  float root2 = static_cast<float>(std::sqrt(correction2));
  float eps = static_cast<float>(o.eps);
#ifdef TPRT_WITH_CUDA
  if (param.onGpu()) {
    cuda::adamwUpdate(p, g, mp, vp, n, decay, b1, b2, stepSize, root2, eps);
    return;
  }
#endif
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= decay;
    mp[i] += (1.0f - b1) * (g[i] - mp[i]); // lerp
    vp[i] = vp[i] * b2 + (1.0f - b2) * g[i] * g[i];
    float denom = std::sqrt(vp[i]) / root2 + eps;
    p[i] -= stepSize * (mp[i] / denom);
  }
}

} // namespace tprt
