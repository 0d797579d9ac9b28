//===- boundary.cpp - the runtime calls of the optimizer step -------------===//
//
// tprt_model_optimizer_step calls these once per optimizer step, in the
// order the compiler wrote: boundary, replica-gradient buckets,
// normalization, norm, clipping, update. They share the training loop's
// TrainState through the context. The gradient buffers are where the
// kernels ran (host or GPU); the arithmetic on them goes where they are.
// The normalization's, the mean's and the clipping's factors are not
// passes over the buffers: each buffer's product of them stays pending
// (Context::GradBuffer::pendingScale), the norm scales its sums and the
// update its reads (on a step that is memory-bound, each pass over FP32
// gradients the size of the model costs what a GEMM does).
//
//===----------------------------------------------------------------------===//

#include "cpu/Vector.h"
#include "cuda/Cuda.h"
#include "tprt/Train.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace tprt {
namespace {

TrainState &trainState(Context &ctx, const char *what) {
  TrainState *state = ctx.trainState();
  if (!state)
    fatal(std::string(what) + ": the optimizer step runs only in training "
                              "(model --train)");
  return *state;
}

/// The larger of two magnitudes; NaN when either is (the norm of a
/// gradient holding a NaN is not finite).
double maxMagnitude(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b);
}

/// `n` floats from `src` to `dst`, both on `device`.
void copyFloats(float *dst, const float *src, int64_t n, Device device) {
#ifdef TPRT_WITH_CUDA
  if (device == Device::CUDA)
    return cuda::copy(dst, Device::CUDA, src, Device::CUDA, n * sizeof(float));
#endif
  std::copy_n(src, n, dst);
}

/// `bytes` from `src` to `dst`, both on `device`.
void copyBytes(void *dst, const void *src, int64_t bytes, Device device) {
#ifdef TPRT_WITH_CUDA
  if (device == Device::CUDA)
    return cuda::copy(dst, Device::CUDA, src, Device::CUDA, bytes);
#endif
  std::memcpy(dst, src, static_cast<size_t>(bytes));
}

/// dst[i] += src[i] for `n` floats, both on `device`.
void addFloats(float *dst, const float *src, int64_t n, Device device) {
#ifdef TPRT_WITH_CUDA
  if (device == Device::CUDA)
    return cuda::addInPlace(dst, src, n);
#endif
  cpu::parallelBlocks(n, 65536, [&](int64_t begin, int64_t count) {
    for (int64_t i = begin; i < begin + count; ++i)
      dst[i] += src[i];
  });
}

/// The sum of squares (`inf` false) or the largest magnitude of `n`
/// gradient elements at `g`, on the GPU when `onGpu`.
double normPart(const float *g, int64_t n, bool onGpu, bool inf) {
  (void)onGpu;
#ifdef TPRT_WITH_CUDA
  if (onGpu) {
    auto [squares, largest] = cuda::normParts(g, n);
    return inf ? largest : squares;
  }
#endif
  if (inf)
    return cpu::maxMagnitude(g, n);
  // Blocks of the vector loop (cpu/Vector.h) over the threads, summed in
  // block order: every rank gets the same bits for the same gradient,
  // whatever its thread count (replicas apply the same clipping).
  constexpr int64_t kBlock = 65536;
  std::vector<double> blocks((n + kBlock - 1) / kBlock);
  cpu::parallelBlocks(n, kBlock, [&](int64_t begin, int64_t count) {
    blocks[begin / kBlock] = cpu::sumOfSquares(g + begin, count);
  });
  double squares = 0;
  for (double block : blocks)
    squares += block;
  return squares;
}

/// Adds `n` elements at `g` of the gradient of `fqn` (held in `buffer`,
/// times its pending scale) into the norm's parts: [split (or each rank's
/// own), replicated], sums of squares or largest magnitudes (`inf`). A
/// block that several ranks hold (KV heads fewer than the ranks) has each
/// of its copies counted once.
void addNormPart(Context &ctx, const std::string &fqn,
                 const Context::GradBuffer &buffer, const float *g, int64_t n,
                 bool onGpu, bool inf, double parts[2]) {
  double scale = std::fabs(static_cast<double>(buffer.pendingScale));
  double part = normPart(g, n, onGpu, inf) * (inf ? scale : scale * scale);
  auto layout = ctx.paramLayouts().find(fqn);
  if (!inf && layout != ctx.paramLayouts().end())
    part /= static_cast<double>(
        paramBlockOf(fqn, layout->second, ctx.tp().rank()).holders);
  double &into = parts[buffer.splitDim >= 0 || buffer.owned ? 0 : 1];
  into = inf ? maxMagnitude(into, part) : into + part;
}

/// The norm's parts of this rank's runs of the sharded buckets: [split,
/// replicated] as grad_norm sorts them. Every gradient must be in one.
void shardedNormParts(Context &ctx, TrainState &state, bool inf,
                      double parts[2]) {
  size_t members = 0;
  for (auto &[number, bucket] : state.shardedBuckets) {
    if (!bucket.reduced)
      fatal("grad_norm: sharded bucket " + std::to_string(number) +
            " was not reduce-scattered in this step");
    for (const ShardedBucket::Member &m : bucket.members) {
      ++members;
      auto [lo, hi] = bucket.ownedRange(m);
      if (hi > lo)
        addNormPart(ctx, m.fqn, ctx.grads().at(m.fqn),
                    bucket.shard.f32() + (m.offset + lo - bucket.shardBegin),
                    hi - lo, bucket.shard.onGpu(), inf, parts);
    }
  }
  if (members != ctx.grads().size())
    fatal("grad_norm: " + std::to_string(ctx.grads().size() - members) +
          " gradients are in no sharded bucket (the program shards "
          "the optimizer state over data parallelism)");
  // Each data-parallel rank holds the sums of its runs only.
  if (inf) {
    float both[2];
    for (int i = 0; i < 2; ++i)
      both[i] = std::isnan(parts[i]) ? std::numeric_limits<float>::infinity()
                                     : static_cast<float>(parts[i]);
    ctx.dp().allReduceMax(both, 2);
    parts[0] = both[0];
    parts[1] = both[1];
  } else {
    ctx.dp().allReduceSumF64(parts, 2);
  }
}

/// The gradient buffers of a bucket's FQNs, in order; one missing is an
/// error prefixed with `what`.
std::vector<Context::GradBuffer *>
bucketGrads(Context &ctx, const std::vector<std::string> &fqns,
            const std::string &what) {
  std::vector<Context::GradBuffer *> grads;
  for (const std::string &fqn : fqns) {
    auto it = ctx.grads().find(fqn);
    if (it == ctx.grads().end())
      fatal(what + ": parameter '" + fqn + "' has no gradient");
    grads.push_back(&it->second);
  }
  return grads;
}

} // namespace

/// `bytes` zeros at `dst` on `device`.
static void zeroBytes(void *dst, size_t bytes, Device device) {
#ifdef TPRT_WITH_CUDA
  if (device == Device::CUDA)
    return cuda::memset(dst, 0, bytes);
#endif
  std::memset(dst, 0, bytes);
}

/// Zeros the padding of `block` (its rows [size, extent) of dimension
/// `dim`) in `grad`, this rank's f32 gradient of the block.
static void zeroPadding(Tensor &grad, const ParamBlock &block) {
  if (block.dim < 0 || block.size == block.extent)
    return;
  if (grad.rank() <= block.dim || grad.dim(block.dim) != block.extent)
    fatal("optimizer_boundary: a gradient of " + grad.describe() +
          " is not an uneven block of " + std::to_string(block.extent) +
          " rows of dimension " + std::to_string(block.dim));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < block.dim; ++d)
    outer *= grad.dim(d);
  for (int64_t d = block.dim + 1; d < grad.rank(); ++d)
    inner *= grad.dim(d);
  for (int64_t o = 0; o < outer; ++o)
    zeroBytes(grad.f32() + (o * block.extent + block.size) * inner,
              static_cast<size_t>((block.extent - block.size) * inner) *
                  sizeof(float),
              grad.device());
}

/// Zeros the padding of `grad`, the gradient of `fqn`, when that is split
/// unevenly (its padding is not part of the parameter).
static void zeroUnevenPadding(Context &ctx, const std::string &fqn,
                              Tensor &grad) {
  auto layout = ctx.paramLayouts().find(fqn);
  if (layout != ctx.paramLayouts().end() && !layout->second.sizes.empty() &&
      grad.defined())
    zeroPadding(grad, paramBlockOf(fqn, layout->second, ctx.tp().rank()));
}

void optimizer_boundary(Context &ctx) {
  TrainState &state = trainState(ctx, "optimizer_boundary");
  if (ctx.grads().empty())
    fatal("optimizer_boundary: no gradient was accumulated (the training "
          "step did not run)");
  for (const auto &[fqn, buffer] : ctx.grads()) {
    // A gradient reduced per micro-batch is in its bucket's run.
    auto in = state.microBatchBuckets.find(fqn);
    bool got = in == state.microBatchBuckets.end()
                   ? !buffer.fresh
                   : state.shardedBuckets.at(in->second).reduced &&
                         !buffer.grad.defined();
    if (!got)
      fatal("optimizer_boundary: parameter '" + fqn +
            "' got no gradient in this step" +
            (buffer.grad.defined() && in != state.microBatchBuckets.end()
                 ? " before its bucket's reduce-scatter"
                 : ""));
  }
  // An uneven block's padding is not part of the parameter: whatever
  // reached its gradient (the output projection's columns of padded query
  // heads read their attention's output) goes, before the norm and the
  // update read it, so the padding stays zero. (A gradient reduced per
  // micro-batch lost its padding before its reduce-scatter.)
  for (auto &[fqn, buffer] : ctx.grads())
    zeroUnevenPadding(ctx, fqn, buffer.grad);
  state.skipped = false;
  state.bucketCollectives = 0;
  state.bucketBytes = 0;
}

void beginTrainStep(Context &ctx, TrainState &state, bool zeroBuffers) {
  for (auto &[fqn, buffer] : ctx.grads()) {
    buffer.fresh = true;
    // What the step's first gradient would have set, but for the buffer's
    // elements: zeros, which every gradient then adds to.
    if (zeroBuffers && buffer.grad.defined()) {
      zeroBytes(buffer.grad.raw(), buffer.grad.bytes(), buffer.grad.device());
      buffer.fresh = false;
      buffer.pendingScale = 1.0f;
    }
  }
  state.shardedCollectives = 0;
  state.shardedBytes = 0;
  for (auto &entry : state.shardedBuckets)
    entry.second.reduced = false;
}

/// A sharded bucket's whole FP32 buffer, its padding zeroed: summed too,
/// but never read (the norm, the update and the all-gather take the
/// gradients' elements only), so that its sums are defined.
static void allocateBucketBuffer(ShardedBucket &b, Device device) {
  b.flat = Tensor::uninitialized(DType::F32, {b.padded}, device);
  int64_t used = b.members.back().offset + b.members.back().numel;
  zeroBytes(b.flat.f32() + used,
            static_cast<size_t>(b.padded - used) * sizeof(float), device);
}

/// Fixes a sharded bucket's layout: `fqns` of `shapes` one after the other,
/// `padded` elements in equal runs over `dp`, this rank's run. Returns the
/// elements the members use.
static int64_t layOutBucket(ShardedBucket &b,
                            const std::vector<std::string> &fqns,
                            const std::vector<std::vector<int64_t>> &shapes,
                            int64_t padded, Communicator &dp) {
  int64_t offset = 0;
  for (size_t i = 0; i < fqns.size(); ++i) {
    int64_t numel = 1;
    for (int64_t d : shapes[i])
      numel *= d;
    b.members.push_back({fqns[i], offset, numel, shapes[i]});
    offset += numel;
  }
  b.padded = padded;
  b.run = padded / dp.size();
  b.shardBegin = dp.rank() * b.run;
  return offset;
}

/// The whole buffer of a bucket reduced per micro-batch, counted.
static void holdMicroBatchBuffer(TrainState &state, ShardedBucket &b,
                                 Device device) {
  allocateBucketBuffer(b, device);
  state.microBatchHeld += b.padded * 4;
  state.microBatchPeak = std::max(state.microBatchPeak, state.microBatchHeld);
}

bool bindMicroBatchBucket(Context &ctx, TrainState &state,
                          const std::string &fqn, Device device) {
  auto in = state.microBatchBuckets.find(fqn);
  if (in == state.microBatchBuckets.end())
    return false;
  ShardedBucket &b = state.shardedBuckets.at(in->second);
  std::string what =
      "grad_bucket_reduce_scatter: bucket " + std::to_string(in->second);
  if (b.flat.defined())
    fatal(what + " is held, but parameter '" + fqn +
          "' has no gradient buffer");
  holdMicroBatchBuffer(state, b, device);
  for (const ShardedBucket::Member &m : b.members) {
    Context::GradBuffer &buffer = ctx.grads()[m.fqn];
    buffer.grad = Tensor::view(b.flat, m.offset, m.shape);
    buffer.inBucket = true;
  }
  return true;
}

Context::GradBuffer &Context::gradBuffer(const Tensor &param, const char *fqn) {
  GradBuffer &buffer = grads_[fqn];
  // A bucket reduced per micro-batch (--zero 2) makes its buffers views.
  if (!buffer.grad.defined() &&
      !(trainState_ &&
        bindMicroBatchBucket(*this, *trainState_, fqn, param.device())))
    buffer.grad =
        Tensor::uninitialized(DType::F32, param.shape(), param.device());
  if (buffer.grad.shape() != param.shape())
    fatal(std::string("the gradient buffer of '") + fqn + "' is " +
          buffer.grad.describe() + ", the parameter " + param.describe());
  return buffer;
}

#ifdef TPRT_WITH_CUDA
/// The buffers on the GPU: packed or unpacked by one kernel.
static bool packedOnGpu(const std::vector<Tensor *> &grads, float *bucket,
                        bool toBucket) {
  if (grads.empty() || !grads.front()->onGpu())
    return false;
  std::vector<float *> runs;
  std::vector<int64_t> counts;
  for (Tensor *g : grads) {
    runs.push_back(g->f32());
    counts.push_back(g->numel());
  }
  cuda::packRuns(runs, counts, bucket, toBucket);
  return true;
}
#endif

void packBucket(const std::vector<Tensor *> &grads, float *out) {
#ifdef TPRT_WITH_CUDA
  if (packedOnGpu(grads, out, /*toBucket=*/true))
    return;
#endif
  for (Tensor *g : grads) {
    copyFloats(out, g->f32(), g->numel(), g->device());
    out += g->numel();
  }
}

void unpackBucket(const float *in, const std::vector<Tensor *> &grads) {
#ifdef TPRT_WITH_CUDA
  if (packedOnGpu(grads, const_cast<float *>(in), /*toBucket=*/false))
    return;
#endif
  for (Tensor *g : grads) {
    copyFloats(g->f32(), in, g->numel(), g->device());
    in += g->numel();
  }
}

/// Makes each gradient buffer of a bucket a view of the bucket's FP32
/// buffer `flat` at its offset, or, for one that already is a view of
/// another bucket, copies it in. Returns whether every buffer is a view of
/// `flat` (nothing to copy back after a reduction).
static bool bindToBucket(Context &ctx, Tensor &flat,
                         const std::vector<Context::GradBuffer *> &buffers,
                         const std::vector<int64_t> &offsets) {
  bool allViews = true;
  for (size_t i = 0; i < buffers.size(); ++i) {
    float *slot = flat.f32() + offsets[i];
    Context::GradBuffer &buffer = *buffers[i];
    if (buffer.grad.f32() == slot)
      continue;
    // (It may be a view of a bucket still being reduced.)
    ctx.waitForAsyncCollectives();
    copyFloats(slot, buffer.grad.f32(), buffer.grad.numel(),
               buffer.grad.device());
    if (buffer.inBucket) {
      allViews = false;
      continue;
    }
    buffer.grad = Tensor::view(flat, offsets[i], buffer.grad.shape());
    buffer.inBucket = true;
  }
  return allViews;
}

/// A replica bucket whose gradients were reduce-scattered per micro-batch
/// (--zero 2): the parts of them in this rank's runs, packed, summed over
/// `comm` and put back. The tensor-parallel ranks of a group share their
/// data-parallel rank, hence their runs.
static void allReduceRuns(TrainState &state, Communicator &comm,
                          const std::vector<std::string> &fqns, int64_t bytes,
                          const std::string &what) {
  std::vector<float *> parts;
  std::vector<int64_t> counts;
  int64_t whole = 0, total = 0;
  Device device = Device::CPU;
  for (const std::string &fqn : fqns) {
    auto in = state.microBatchBuckets.find(fqn);
    if (in == state.microBatchBuckets.end())
      fatal(what + ": parameter '" + fqn +
            "' is not in a bucket reduced per micro-batch, the others are");
    ShardedBucket &b = state.shardedBuckets.at(in->second);
    const ShardedBucket::Member *m = b.member(fqn);
    auto [lo, hi] = b.ownedRange(*m);
    parts.push_back(b.shard.f32() + (m->offset + lo - b.shardBegin));
    counts.push_back(hi - lo);
    whole += m->numel;
    total += hi - lo;
    device = b.shard.device();
  }
  if (whole * 4 != bytes)
    fatal(what + " holds " + std::to_string(whole * 4) +
          " bytes of gradients; the program was compiled for " +
          std::to_string(bytes));
  if (total > 0) {
    Tensor packed = Tensor::uninitialized(DType::F32, {total}, device);
    float *at = packed.f32();
    for (size_t i = 0; i < parts.size(); at += counts[i++])
      copyFloats(at, parts[i], counts[i], device);
    comm.allReduceSum(packed.f32(), total);
    at = packed.f32();
    for (size_t i = 0; i < parts.size(); at += counts[i++])
      copyFloats(parts[i], at, counts[i], device);
  }
  ++state.bucketCollectives;
  state.bucketBytes += total * 4;
}

void grad_bucket_all_reduce(Context &ctx, int64_t bucket, bool mean,
                            DType dtype, std::vector<std::string> fqns,
                            int64_t bytes, const char *group) {
  TrainState &state = trainState(ctx, "grad_bucket_all_reduce");
  std::string what = "grad_bucket_all_reduce: bucket " + std::to_string(bucket);
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16)
    fatal(what + ": gradients of a float type only");
  // The buffers in bucket order, checked against the compiled size.
  std::vector<Context::GradBuffer *> buffers = bucketGrads(ctx, fqns, what);
  Communicator &comm = std::string(group) == "dp" ? ctx.dp() : ctx.tp();
  // The mean's division is left pending (applied by the update).
  if (mean)
    for (Context::GradBuffer *b : buffers)
      b->pendingScale /= static_cast<float>(comm.size());
  if (state.microBatchBuckets.count(fqns.front()))
    return allReduceRuns(state, comm, fqns, bytes, what);
  std::vector<Tensor *> grads;
  int64_t total = 0;
  for (Context::GradBuffer *b : buffers) {
    grads.push_back(&b->grad);
    total += b->grad.numel();
  }
  if (total * 4 != bytes)
    fatal(what + " holds " + std::to_string(total * 4) +
          " bytes of gradients; the program was compiled for " +
          std::to_string(bytes));
  // The buffers are FP32 whatever the parameters' dtype (a bf16 reduction
  // would round every partial sum). The bucket has its own FP32 buffer,
  // which the gradients become views of (PyTorch DDP's
  // gradient_as_bucket_view): later steps accumulate into the bucket and
  // reduce it in place, with no copy. A gradient already a view of another
  // bucket (a replicated one's data-parallel sum) is copied in and back.
  // The reduction of a bucket whose gradients are all its views is
  // started, not waited for (Communicator::allReduceSumAsync: on the GPU
  // it runs beside the optimizer step's work on the gradients outside
  // buckets); the step's later calls wait before they touch a bucket.
  Tensor &flat = state.buckets[std::string(group) + std::to_string(bucket)];
  if (!flat.defined())
    flat = Tensor::uninitialized(DType::F32, {total}, grads.front()->device());
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (Tensor *g : grads) {
    offsets.push_back(offset);
    offset += g->numel();
  }
  if (bindToBucket(ctx, flat, buffers, offsets)) {
    comm.allReduceSumAsync(flat.f32(), total);
  } else {
    comm.allReduceSum(flat.f32(), total);
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i]->grad.f32() != flat.f32() + offsets[i])
        copyFloats(buffers[i]->grad.f32(), flat.f32() + offsets[i],
                   buffers[i]->grad.numel(), flat.device());
  }
  ++state.bucketCollectives;
  state.bucketBytes += bytes;
}

void normalize_grads(Context &ctx) {
  TrainState &state = trainState(ctx, "normalize_grads");
  if (state.labelTokens <= 0)
    fatal("normalize_grads: the step has no label tokens");
  double perToken = 1.0 / static_cast<double>(state.labelTokens);
  // (The buckets' reductions finish here, as the step's order says.)
  ctx.waitForAsyncCollectives();
  // The factor the buffer held after normalization before: its gradients
  // as the update reads them are the same bits.
  for (auto &entry : ctx.grads())
    entry.second.pendingScale =
        static_cast<float>(perToken * entry.second.pendingScale);
}

Tensor grad_norm(Context &ctx, bool dpSharded) {
  TrainState &state = trainState(ctx, "grad_norm");
  ctx.waitForAsyncCollectives();
  bool inf = std::isinf(state.options.normType);
  // [split, replicated]: a split gradient's part is summed (or maxed) over
  // the ranks, a replicated one (equal on all after synchronization) is
  // counted once.
  double parts[2] = {0, 0};
  if (dpSharded)
    shardedNormParts(ctx, state, inf, parts);
  else if (!state.shardedBuckets.empty())
    fatal("grad_norm: the gradients were reduce-scattered over data "
          "parallelism, but the norm reads whole buffers");
  if (!dpSharded)
    for (auto &[fqn, buffer] : ctx.grads())
      addNormPart(ctx, fqn, buffer, buffer.grad.f32(), buffer.grad.numel(),
                  buffer.grad.onGpu(), inf, parts);
  double norm;
  if (inf) {
    // (MPI's maximum of a NaN is unspecified: it travels as infinity.)
    float split = std::isnan(parts[0]) ? std::numeric_limits<float>::infinity()
                                       : static_cast<float>(parts[0]);
    ctx.tp().allReduceMax(&split, 1);
    norm = maxMagnitude(static_cast<double>(split), parts[1]);
  } else {
    ctx.tp().allReduceSumF64(&parts[0], 1);
    norm = std::sqrt(parts[0] + parts[1]);
  }
  state.gradNorm = norm;
  Tensor out(DType::F32, {});
  *out.f32() = static_cast<float>(norm);
  return out;
}

void clip_grads(Context &ctx, const Tensor &) {
  TrainState &state = trainState(ctx, "clip_grads");
  ctx.waitForAsyncCollectives();
  double norm = state.gradNorm, max = state.options.maxGradNorm;
  if (!std::isfinite(norm)) {
    state.skipped = true;
    return;
  }
  if (max > 0 && max / (norm + 1e-6) < 1.0) {
    double clip = max / (norm + 1e-6);
    for (auto &entry : ctx.grads())
      entry.second.pendingScale =
          static_cast<float>(clip * entry.second.pendingScale);
  }
}

void optimizer_update(Context &ctx, const char *optimizer, bool dpSharded,
                      bool masterWeights) {
  TrainState &state = trainState(ctx, "optimizer_update");
  ctx.waitForAsyncCollectives();
  if (state.skipped)
    return;
  if (!state.optimizer) {
    state.optimizer =
        std::make_unique<Optimizer>(state.options, optimizer, masterWeights);
    if (state.resume)
      state.optimizer->resumeFrom(state.resume);
  } else if (state.optimizer->name() != optimizer ||
             state.optimizer->masterWeights() != masterWeights) {
    fatal(std::string("optimizer_update: the optimizer changed from ") +
          state.optimizer->name() + " to " + optimizer +
          " or its master weights changed");
  }
  if (dpSharded != !state.shardedBuckets.empty())
    fatal(dpSharded ? "optimizer_update: no bucket was reduce-scattered"
                    : "optimizer_update: the gradients were reduce-scattered "
                      "over data parallelism, but the update reads whole "
                      "buffers");
  if (dpSharded)
    state.optimizer->stepSharded(ctx, state.shardedBuckets);
  else
    state.optimizer->step(ctx);
}

void grad_bucket_reduce_scatter(Context &ctx, int64_t bucket, DType dtype,
                                std::vector<std::string> fqns, int64_t bytes,
                                int64_t paddedBytes, bool microBatch,
                                bool streamed) {
  TrainState &state = trainState(ctx, "grad_bucket_reduce_scatter");
  std::string what =
      "grad_bucket_reduce_scatter: bucket " + std::to_string(bucket);
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F16)
    fatal(what + ": gradients of a float type only");
  Communicator &dp = ctx.dp();
  int64_t ranks = dp.size(), padded = paddedBytes / 4;
  if (paddedBytes % 4 || padded % ranks || paddedBytes < bytes)
    fatal(what + ": " + std::to_string(paddedBytes) +
          " padded bytes do not split into " + std::to_string(ranks) +
          " equal runs of FP32 elements");
  std::vector<Context::GradBuffer *> buffers = bucketGrads(ctx, fqns, what);
  // Streamed (runtime/src/train/runs.cpp): the gradient is in the run
  // already, unless the table was gathered whole (then as below).
  if (streamed && (!microBatch || fqns.size() != 1))
    fatal(what + ": only a per-micro-batch bucket of one parameter streams");
  if (streamed && !buffers.front()->grad.defined()) {
    auto run = state.shardedBuckets.find(bucket);
    if (buffers.front()->fresh || run == state.shardedBuckets.end() ||
        !run->second.reduced)
      fatal(what + ": parameter '" + fqns.front() +
            "' got no gradient in this micro-batch before the "
            "reduce-scatter");
    buffers.front()->fresh = true;
    return;
  }
  ShardedBucket &b = state.shardedBuckets[bucket];
  Device device = buffers.front()->grad.device();
  // The layout, fixed by the first step (or, with the parameters held as
  // runs, by the init's param_bucket_shard).
  if (b.members.empty()) {
    std::vector<std::vector<int64_t>> shapes;
    for (Context::GradBuffer *buffer : buffers)
      shapes.push_back(buffer->grad.shape());
    layOutBucket(b, fqns, shapes, padded, dp);
    b.dtype = dtype;
  }
  bool first = !b.shard.defined();
  if (!b.holds(fqns) || b.padded != padded || b.dtype != dtype ||
      (!first && b.microBatch != microBatch))
    fatal(what + " was reduced with other gradients or at another point");
  if (first) {
    int64_t used = b.members.back().offset + b.members.back().numel;
    if (used * 4 != bytes)
      fatal(what + " holds " + std::to_string(used * 4) +
            " bytes of gradients; the program was compiled for " +
            std::to_string(bytes));
    b.microBatch = microBatch;
    if (microBatch) {
      b.shard = Tensor::uninitialized(DType::F32, {padded / ranks}, device);
      for (const std::string &fqn : fqns)
        state.microBatchBuckets[fqn] = bucket;
    } else {
      // This rank's run of the bucket itself: the reduce-scatter sums in
      // place (the bucket's other runs hold no gradient after it, and the
      // next step's first gradients overwrite them).
      allocateBucketBuffer(b, device);
      b.shard = Tensor::view(b.flat, b.shardBegin, {padded / ranks});
    }
  }
  if (microBatch) {
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i]->fresh)
        fatal(what + ": parameter '" + fqns[i] +
              "' got no gradient in this micro-batch before the "
              "reduce-scatter");
    // The first step's gradients were not views: copied in.
    if (!b.flat.defined())
      holdMicroBatchBuffer(state, b, device);
  }
  std::vector<int64_t> offsets;
  for (const ShardedBucket::Member &m : b.members)
    offsets.push_back(m.offset);
  bindToBucket(ctx, b.flat, buffers, offsets);
  // An uneven block's padding stays out of the runs, whose norm and update
  // read every element of a member. (A bucket reduced once per step comes
  // after the optimizer boundary, which zeroed it.)
  if (microBatch)
    for (size_t i = 0; i < buffers.size(); ++i)
      zeroUnevenPadding(ctx, fqns[i], buffers[i]->grad);
  int64_t run = padded / ranks;
  float *mine = b.flat.f32() + b.shardBegin;
  dp.reduceScatterSum(b.flat.f32(), mine, run);
  if (microBatch) {
    // The step's first reduce-scatter of the bucket overwrites the run.
    if (!b.reduced)
      copyFloats(b.shard.f32(), mine, run, device);
    else
      addFloats(b.shard.f32(), mine, run, device);
    // The whole buffer goes; the next micro-batch's first gradient of the
    // bucket takes it again (bindMicroBatchBucket).
    for (Context::GradBuffer *buffer : buffers) {
      buffer->grad = Tensor();
      buffer->inBucket = false;
      buffer->fresh = true;
    }
    b.flat = Tensor();
    state.microBatchHeld -= padded * 4;
  }
  b.reduced = true;
  ++state.shardedCollectives;
  state.shardedBytes += paddedBytes;
}

void param_bucket_all_gather(Context &ctx, int64_t bucket, DType dtype,
                             std::vector<std::string> fqns, int64_t bytes) {
  TrainState &state = trainState(ctx, "param_bucket_all_gather");
  std::string what =
      "param_bucket_all_gather: bucket " + std::to_string(bucket);
  auto found = state.shardedBuckets.find(bucket);
  if (found == state.shardedBuckets.end() || !found->second.holds(fqns))
    fatal(what + ": no reduce-scattered bucket of these parameters");
  ShardedBucket &b = found->second;
  int64_t element = static_cast<int64_t>(dtypeSize(dtype)), padded = b.padded,
          ranks = ctx.dp().size();
  if (dtype != b.dtype || bytes != padded * element)
    fatal(what + ": " + std::to_string(bytes) + " bytes of " +
          dtypeName(dtype) + " do not hold the bucket's " +
          std::to_string(padded) + " elements");
  // A skipped update changed nothing anywhere (every rank has the norm).
  if (state.skipped)
    return;
  Device device = b.shard.device();
  Tensor gathered = Tensor::uninitialized(dtype, {padded}, device);
  state.largestGather = std::max(state.largestGather, bytes);
  auto *out = static_cast<char *>(gathered.raw());
  for (const ShardedBucket::Member &m : b.members) {
    auto [lo, hi] = b.ownedRange(m);
    Tensor *param = ctx.cachedParam(m.fqn);
    if (!param || param->dtype() != dtype || param->numel() != m.numel)
      fatal(what + ": parameter '" + m.fqn + "' does not match its gradient");
    if (hi > lo)
      copyBytes(out + (m.offset + lo) * element,
                static_cast<const char *>(param->raw()) + lo * element,
                (hi - lo) * element, device);
  }
  // Runs of 128 elements: whole floats in any parameter type.
  int64_t run = padded / ranks * element / 4;
  ctx.dp().allGatherOthers(
      reinterpret_cast<const float *>(out + b.shardBegin * element),
      reinterpret_cast<float *>(out), run);
  for (const ShardedBucket::Member &m : b.members)
    copyBytes(ctx.cachedParam(m.fqn)->raw(), out + m.offset * element,
              m.numel * element, device);
  ++state.shardedCollectives;
  state.shardedBytes += bytes;
}

void param_bucket_shard(Context &ctx, int64_t bucket, DType dtype,
                        std::vector<std::string> fqns, int64_t bytes) {
  // A forward run of a training program reads the parameters whole.
  TrainState *state = ctx.trainState();
  if (!state)
    return;
  std::string what = "param_bucket_shard: bucket " + std::to_string(bucket);
  int64_t element = static_cast<int64_t>(dtypeSize(dtype)),
          ranks = ctx.dp().size();
  if (fqns.empty() || bytes <= 0 || bytes % (element * ranks))
    fatal(what + ": " + std::to_string(bytes) + " bytes of " +
          dtypeName(dtype) + " do not split into " + std::to_string(ranks) +
          " equal runs");
  ShardedBucket &b = state->shardedBuckets[bucket];
  if (!b.members.empty())
    fatal(what + " is sharded twice");
  std::vector<Tensor> whole;
  std::vector<std::vector<int64_t>> shapes;
  for (const std::string &fqn : fqns) {
    const Tensor *param = ctx.cachedParam(fqn);
    if (!param || !param->defined() || param->dtype() != dtype)
      fatal(what + ": parameter '" + fqn + "' was not read in " +
            dtypeName(dtype));
    whole.push_back(*param);
    shapes.push_back(param->shape());
  }
  int64_t used = layOutBucket(b, fqns, shapes, bytes / element, ctx.dp());
  if (used > b.padded)
    fatal(what + ": its parameters hold " + std::to_string(used * element) +
          " bytes; the program was compiled for " + std::to_string(bytes));
  b.dtype = dtype;
  Device device = whole.front().device();
  // The run's padding is zeroed: gathered, but never read.
  b.params = Tensor::uninitialized(dtype, {b.run}, device);
  zeroBytes(b.params.raw(), static_cast<size_t>(b.run * element), device);
  auto *runs = static_cast<char *>(b.params.raw());
  for (size_t i = 0; i < b.members.size(); ++i) {
    const ShardedBucket::Member &m = b.members[i];
    auto [lo, hi] = b.ownedRange(m);
    int64_t at = hi > lo ? m.offset + lo - b.shardBegin : 0;
    copyBytes(runs + at * element,
              static_cast<const char *>(whole[i].raw()) + lo * element,
              (hi - lo) * element, device);
    ctx.holdParamRun(m.fqn, Tensor::view(b.params, at, {hi - lo}), lo);
  }
}

Tensors param_bucket_gather(Context &ctx, int64_t bucket, DType dtype,
                            std::vector<std::string> fqns, int64_t bytes) {
  TrainState &state = trainState(ctx, "param_bucket_gather");
  std::string what = "param_bucket_gather: bucket " + std::to_string(bucket);
  auto found = state.shardedBuckets.find(bucket);
  if (found == state.shardedBuckets.end() || !found->second.params.defined() ||
      !found->second.holds(fqns))
    fatal(what + ": these parameters are not held as runs of one bucket "
                 "(param_bucket_shard)");
  ShardedBucket &b = found->second;
  int64_t element = static_cast<int64_t>(dtypeSize(dtype));
  if (dtype != b.dtype || bytes != b.padded * element)
    fatal(what + ": " + std::to_string(bytes) + " bytes of " +
          dtypeName(dtype) + " do not hold the bucket's " +
          std::to_string(b.padded) + " elements");
  Device device = b.params.device();
  Tensor gathered = Tensor::uninitialized(dtype, {b.padded}, device);
  auto *out = static_cast<char *>(gathered.raw());
  copyBytes(out + b.shardBegin * element, b.params.raw(), b.run * element,
            device);
  // Runs of 128 elements: whole floats in any parameter type.
  ctx.dp().allGatherOthers(
      reinterpret_cast<const float *>(out + b.shardBegin * element),
      reinterpret_cast<float *>(out), b.run * element / 4);
  // Counted while any view of it lives (the memory plan's peak).
  state.gatheredHeld += bytes;
  state.largestGather = std::max(state.largestGather, state.gatheredHeld);
  TrainState *held = &state;
  Tensor counted = Tensor::withRelease(
      gathered, [held, bytes] { held->gatheredHeld -= bytes; });
  Tensors params;
  for (const ShardedBucket::Member &m : b.members)
    params.push_back(Tensor::view(counted, m.offset, m.shape));
  ++state.shardedCollectives;
  state.shardedBytes += bytes;
  return params;
}

} // namespace tprt
