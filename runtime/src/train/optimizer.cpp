//===- optimizer.cpp - AdamW and SGD at the optimizer boundary ------------===//
//
// The update formulas of torch.optim.AdamW and torch.optim.SGD (the
// single-tensor implementations PyTorch runs on CPUs), in f32 with the
// scalar factors in double as Python computes them: the element updates
// of the CPU (src/cpu/optimizer.cpp) or the GPU (src/cuda/optimizer.cu).
//
//===----------------------------------------------------------------------===//

#include "cpu/Optimizer.h"
#include "cuda/Cuda.h"
#include "tprt/Train.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

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
    // The factors normalize_grads and clip_grads left pending are applied
    // as the update reads each element (one pass over the gradients fewer
    // for each); the buffer is overwritten by the next step.
    float scale = buffer.pendingScale;
    buffer.pendingScale = 1.0f;
    updateHeld(ctx, fqn, *param, buffer.grad, scale, std::nullopt);
  }
}

/// `from`'s values rounded into `to`'s storage, which every handle of the
/// parameter shares.
static void narrowInto(const Tensor &from, Tensor &to) {
  Tensor narrow = from.to(to.dtype());
#ifdef TPRT_WITH_CUDA
  if (to.onGpu())
    return cuda::copy(to.raw(), Device::CUDA, narrow.raw(), Device::CUDA,
                      narrow.bytes());
#endif
  std::memcpy(to.raw(), narrow.raw(), narrow.bytes());
}

void Optimizer::updateHeld(Context &ctx, const std::string &fqn, Tensor &param,
                           Tensor &grad, float gradScale,
                           std::optional<int64_t> begin) {
  if (hasMaster(param)) {
    // The update applies to the FP32 master; the parameter is its rounding.
    Tensor &master = master_[fqn];
    if (!master.defined())
      master = initialState(ctx, fqn, "master_weight", param, begin);
    update(ctx, fqn, master, grad, gradScale, begin);
    narrowInto(master, param);
    return;
  }
  if (param.dtype() == DType::F32 || param.dtype() == DType::BF16)
    return update(ctx, fqn, param, grad, gradScale, begin);
  // An f16 parameter (tpc --dtype f16) without masters is updated in an
  // f32 copy, with f32 moments, and rounded back once.
  Tensor work = param.to(DType::F32);
  update(ctx, fqn, work, grad, gradScale, begin);
  narrowInto(work, param);
}

void Optimizer::stepSharded(Context &ctx,
                            const std::map<int64_t, ShardedBucket> &buckets) {
  ++step_;
  sharded_ = true;
  for (const auto &entry : buckets) {
    const ShardedBucket &bucket = entry.second;
    for (const ShardedBucket::Member &m : bucket.members) {
      Context::GradBuffer &buffer = ctx.grads().at(m.fqn);
      float scale = buffer.pendingScale;
      buffer.pendingScale = 1.0f;
      auto [lo, hi] = bucket.ownedRange(m);
      if (hi == lo)
        continue;
      // This rank's run of the parameter (all it holds of it under --zero
      // 3) and of the reduced gradient.
      Tensor *param = ctx.cachedParam(m.fqn);
      bool runHeld = bucket.params.defined();
      if (!param || param->dtype() == DType::I64 ||
          param->numel() != (runHeld ? hi - lo : m.numel))
        fatal("optimizer: parameter '" + m.fqn +
              "' does not match its gradient");
      Tensor run = runHeld ? *param : Tensor::view(*param, lo, {hi - lo});
      Tensor grad = Tensor::view(bucket.shard,
                                 m.offset + lo - bucket.shardBegin, {hi - lo});
      begins_[m.fqn] = lo;
      updateHeld(ctx, m.fqn, run, grad, scale, lo);
    }
  }
}

std::pair<uint64_t, uint64_t> Optimizer::stateBytes() const {
  std::pair<uint64_t, uint64_t> bytes{0, 0};
  for (const auto &entry : master_)
    bytes.first += entry.second.bytes();
  for (const auto *map : {&first_, &second_})
    for (const auto &entry : *map)
      bytes.second += entry.second.bytes();
  return bytes;
}

std::optional<int64_t> Optimizer::stateBegin(const std::string &fqn) const {
  auto it = begins_.find(fqn);
  if (it == begins_.end())
    return std::nullopt;
  return it->second;
}

void Optimizer::resumeFrom(const ResumePoint *point) {
  resume_ = point;
  step_ = point->optimizerStep;
}

std::vector<std::string> Optimizer::stateNames(const Tensor &param) const {
  std::vector<std::string> names = {"momentum_buffer"};
  if (name_ != "sgd")
    names = {"exp_avg", "exp_avg_sq"};
  if (hasMaster(param))
    names.push_back("master_weight");
  return names;
}

std::vector<std::pair<std::string, const Tensor *>>
Optimizer::stateOf(const std::string &fqn) const {
  std::vector<std::pair<std::string, const Tensor *>> out;
  std::pair<const char *, const std::map<std::string, Tensor> *> maps[] = {
      {name_ == "sgd" ? "momentum_buffer" : "exp_avg", &first_},
      {"exp_avg_sq", &second_},
      {"master_weight", &master_}};
  for (auto [name, map] : maps) {
    auto it = map->find(fqn);
    if (it != map->end() && it->second.defined())
      out.emplace_back(name, &it->second);
  }
  return out;
}

/// --zero: the run of `block` (a parameter's block, f32) from `begin` with
/// `param`'s elements, a tensor of its own on the host.
static Tensor runOf(const Tensor &block, int64_t begin, const Tensor &param) {
  if (begin + param.numel() > block.numel())
    fatal("--resume: optimizer state does not fit the block of its "
          "parameter on this rank");
  Tensor host = block.to(Device::CPU),
         run = Tensor::uninitialized(DType::F32, param.shape());
  std::memcpy(run.raw(), host.f32() + begin, run.bytes());
  return run;
}

Tensor Optimizer::initialState(Context &ctx, const std::string &fqn,
                               const std::string &name, const Tensor &param,
                               std::optional<int64_t> begin) {
  std::string key = fqn + "." + name;
  auto entry = resume_
                   ? resume_->state.find(key)
                   : std::map<std::string, SafetensorsEntry>::const_iterator();
  bool saved = resume_ && entry != resume_->state.end();
  if (name == "master_weight" && !saved) {
    // The stored values in f32 (a checkpoint saved without masters: its
    // weights, which --resume read).
    Tensor block = readParamF32(ctx, fqn);
    if (!begin)
      return block.to(param.device());
    return runOf(block, *begin, param).to(param.device());
  }
  if (!resume_)
    return zeros(param.shape(), param.device());
  if (!saved)
    fatal("--resume '" + resume_->dir +
          "': the optimizer state has no tensor '" + key + "'");
  auto layout = ctx.paramLayouts().find(fqn);
  if (layout == ctx.paramLayouts().end())
    fatal("--resume: parameter '" + fqn + "' was not read");
  const Context::ParamLayout &l = layout->second;
  if (entry->second.shape != l.shape)
    fatal("--resume '" + resume_->dir + "': optimizer state '" + key +
          "' in '" + entry->second.file +
          "' does not have the parameter's "
          "shape");
  // This rank's block, as its parameter's: the state follows the
  // parameter's placement in this program, whatever grid saved it.
  Tensor block = readParamBlock(
      ctx, key.c_str(), key.c_str(), entry->second.file.c_str(),
      entry->second.offset, entry->second.end - entry->second.begin,
      entry->second.dtype, l.shape, /*transposed=*/false,
      paramBlockOf(fqn, l, ctx.tp().rank()));
  if (begin)
    return runOf(block, *begin, param).to(param.device());
  if (block.shape() != param.shape())
    fatal("--resume: optimizer state '" + key +
          "' does not fit the block of "
          "its parameter on this rank");
  return block.to(param.device());
}

void Optimizer::update(Context &ctx, const std::string &fqn, Tensor &param,
                       Tensor &grad, float gradScale,
                       std::optional<int64_t> begin) {
  const TrainOptions &o = options_;
#ifdef TPRT_WITH_CUDA
  // The GPU's update kernels read a scaled gradient: the scale is applied
  // to the buffer first.
  if (param.onGpu() && gradScale != 1.0f) {
    cuda::scaleInPlace(grad.f32(), grad.numel(), gradScale);
    gradScale = 1.0f;
  }
#endif
  const float *g = grad.f32();
  Tensor &m = first_[fqn];
  if (!m.defined())
    m = initialState(ctx, fqn, name_ == "sgd" ? "momentum_buffer" : "exp_avg",
                     param, begin);
  float *mp = m.f32();
  if (name_ == "sgd") {
    // torch.optim.SGD: weight decay into the gradient, the momentum
    // buffer starts as the first gradient (dampening 0).
    float wd = static_cast<float>(o.weightDecay),
          mom = static_cast<float>(o.momentum), lr = static_cast<float>(o.lr);
    bool first = step_ == 1, momentum = o.momentum != 0;
#ifdef TPRT_WITH_CUDA
    if (param.onGpu()) {
      cuda::sgdUpdate(param, g, mp, wd, mom, lr, first);
      return;
    }
#endif
    cpu::sgdUpdate(param, g, gradScale, mp, wd, mom, lr, first, momentum);
    return;
  }
  Tensor &v = second_[fqn];
  if (!v.defined())
    v = initialState(ctx, fqn, "exp_avg_sq", param, begin);
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
    cuda::adamwUpdate(param, g, mp, vp, decay, b1, b2, stepSize, root2, eps);
    return;
  }
#endif
  cpu::adamwUpdate(param, g, gradScale, mp, vp, decay, b1, b2, stepSize, root2,
                   eps);
}

} // namespace tprt
