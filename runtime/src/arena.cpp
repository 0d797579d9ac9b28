//===- arena.cpp - the activation arena of an entry function --------------===//
//
// The compiler lays out a function's activations in one buffer by their
// lifetimes (tp-plan-activations); here a call gets that buffer, sized for
// its input, and each planned kernel result becomes a tensor in it.
//
//===----------------------------------------------------------------------===//

#include "tprt/tprt.h"

#include <algorithm>
#include <new>

namespace tprt {

namespace {

/// A host buffer of `bytes` aligned to a cache line (vector loads of any
/// width, and no two buffers' results sharing a line).
std::shared_ptr<unsigned char[]> allocateArena(uint64_t bytes) {
  constexpr std::align_val_t kAlign{64};
  void *data =
      ::operator new[](std::max<uint64_t>(bytes, 1), kAlign, std::nothrow);
  if (!data)
    fatal("cannot allocate the activation arena of " + std::to_string(bytes) +
          " bytes");
  return std::shared_ptr<unsigned char[]>(
      static_cast<unsigned char *>(data),
      [kAlign](unsigned char *p) { ::operator delete[](p, kAlign); });
}

} // namespace

ActivationArena::ActivationArena(Context &ctx, const PlannedBuffer *plan,
                                 int64_t slots, int64_t bytesPerToken,
                                 const Tensor &ids)
    : ctx_(ctx), outer_(std::move(ctx.plan_)) {
  ctx.plan_ = Context::ActivePlan();
  // The GPU's kernels allocate on the device; no host arena for them.
  if (ctx.device() != Device::CPU || !plan || slots <= 0 || bytesPerToken <= 0)
    return;
  for (int64_t k = 0; k < slots; ++k)
    if (plan[k].offset < 0 || plan[k].bytes < 0 ||
        plan[k].offset > bytesPerToken - plan[k].bytes)
      fatal("activation slot " + std::to_string(k) + " (" +
            std::to_string(plan[k].offset) + " + " +
            std::to_string(plan[k].bytes) + " bytes per token) lies outside " +
            "its arena of " + std::to_string(bytesPerToken));
  int64_t tokens = ids.numel();
  uint64_t bytes = 0;
  if (tokens < 0 ||
      __builtin_mul_overflow(static_cast<uint64_t>(bytesPerToken),
                             static_cast<uint64_t>(tokens), &bytes) ||
      bytes > physicalMemoryBytes())
    fatal("the activation arena of " + std::to_string(bytesPerToken) +
          " bytes per token for " + std::to_string(tokens) +
          " tokens does not fit in this machine's memory");
  std::shared_ptr<unsigned char[]> &arena = ctx.arenas_[plan];
  uint64_t &capacity = ctx.arenaBytes_[plan];
  // Reused when nothing of the last call holds it and it is large enough.
  if (!arena || arena.use_count() > 1 || capacity < bytes) {
    arena.reset();
    arena = allocateArena(bytes);
    capacity = bytes;
  }
  ctx.plan_ = Context::ActivePlan{plan, slots, tokens, arena};
}

ActivationArena::~ActivationArena() { ctx_.plan_ = std::move(outer_); }

uint64_t Context::activationArenaBytes() const {
  uint64_t bytes = 0;
  for (const auto &entry : arenaBytes_)
    bytes += entry.second;
  return bytes;
}

Tensor Context::placed(int64_t slot, DType dtype, std::vector<int64_t> shape) {
  if (slot < 0 || !plan_.arena)
    return Tensor::uninitialized(dtype, std::move(shape));
  if (slot >= plan_.slots)
    fatal("activation slot " + std::to_string(slot) + " outside the plan's " +
          std::to_string(plan_.slots));
  const PlannedBuffer &buffer = plan_.buffers[slot];
  uint64_t bytes = dtypeSize(dtype);
  for (int64_t d : shape)
    if (d < 0 ||
        __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
      return Tensor::uninitialized(dtype, std::move(shape));
  // The plan sized each buffer for results proportional to the tokens; a
  // larger one (a shape the plan did not foresee) goes elsewhere.
  uint64_t room = static_cast<uint64_t>(buffer.bytes) * plan_.tokens;
  if (bytes > room)
    return Tensor::uninitialized(dtype, std::move(shape));
  return Tensor::placedIn(plan_.arena,
                          static_cast<uint64_t>(buffer.offset) * plan_.tokens,
                          dtype, std::move(shape));
}

} // namespace tprt
