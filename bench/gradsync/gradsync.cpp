//===- gradsync.cpp - replica-gradient buckets against one raw all-reduce -===//
//
// Run on two ranks (mpirun -np 2). For each gradient set it plans the
// buckets as tp-replica-grad-sync does (tprt::planBuckets), then times, in
// alternating rounds:
//   - the synchronization the generated optimizer step runs: one
//     tprt::grad_bucket_all_reduce per bucket (pack, the communicator's
//     all-reduce: through shared memory on one node unless
//     TPRT_ALLREDUCE=mpi, src/comm/SharedMemoryAllReduce.h; unpack);
//   - one raw MPI_Allreduce (ncclAllReduce on GPUs) of the same FP32
//     bytes in one buffer;
//   - packing alone (tprt::packBucket) against memcpy of the same bytes;
//   - the cast: bf16 gradients summed into their FP32 buffers
//     (tprt::accumulate_grad, the step's first micro-batch), FP32 bytes
//     written per second.
// --device cuda runs it on the GPUs (one per rank; NCCL, packing as one
// kernel, cudaMemcpy as the copy), bench/device-check.sh on one GPU.
// It prints one Markdown row per set: collectives issued and
// ceil(bytes / bucket), medians, algorithm and bus bandwidth (nccl-tests:
// busbw = algbw * 2 (n - 1) / n), and the ratios.
//
// Sets: the replicated gradients of a Llama-2-7B-shaped model at tp=2 (its
// 65 RMS-norm weights of 4096, many small tensors), and a synthetic worst
// case: the elements of 1 GiB of bf16 gradients (2^29) in 10 000 tensors
// of log-uniform sizes. tprt's gradient buffers are FP32 whatever the
// parameters' dtype, so the second set moves 2 GiB. --scale shrinks both
// (the smoke test runs 1e-3).
//
//===----------------------------------------------------------------------===//

#include "cuda/Cuda.h"
#include "tprt/Buckets.h"
#include "tprt/Train.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mpi.h>
#include <string>
#include <vector>

namespace {

struct GradSet {
  std::string name;
  std::vector<std::string> fqns;
  std::vector<int64_t> numel;
};

GradSet llama7b(double scale) {
  GradSet set{"Llama-2-7B replicated grads, tp=2", {}, {}};
  int64_t hidden = std::max<int64_t>(1, std::llround(4096 * scale));
  for (int layer = 0; layer < 32; ++layer)
    for (const char *norm : {"input_layernorm", "post_attention_layernorm"}) {
      set.fqns.push_back("model.layers." + std::to_string(layer) + "." + norm +
                         ".weight");
      set.numel.push_back(hidden);
    }
  set.fqns.push_back("model.norm.weight");
  set.numel.push_back(hidden);
  return set;
}

GradSet synthetic(double scale) {
  GradSet set{"1 GiB bf16 (FP32 buffers), 10000 tensors", {}, {}};
  const int tensors = 10000;
  const double total = std::ldexp(1.0, 29) * scale;
  // Log-uniform sizes over three decades, then scaled to the total.
  uint64_t state = 42;
  std::vector<double> raw(tensors);
  double sum = 0;
  for (double &r : raw) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    double u = static_cast<double>(state >> 11) / std::ldexp(1.0, 53);
    r = std::pow(1000.0, u);
    sum += r;
  }
  for (int i = 0; i < tensors; ++i) {
    char fqn[32];
    std::snprintf(fqn, sizeof(fqn), "synthetic.%05d.weight", i);
    set.fqns.push_back(fqn);
    set.numel.push_back(
        std::max<int64_t>(1, std::llround(raw[i] / sum * total)));
  }
  return set;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Waits for the GPU's queued work (a timer's end).
void finish(tprt::Device device) {
#ifdef TPRT_WITH_CUDA
  if (device == tprt::Device::CUDA)
    tprt::cuda::synchronize();
#endif
}

/// `bytes` from `src` to `dst`, both on `device`: memcpy or cudaMemcpy.
void copyBytes(void *dst, const void *src, size_t bytes, tprt::Device device) {
#ifdef TPRT_WITH_CUDA
  if (device == tprt::Device::CUDA)
    return tprt::cuda::copy(dst, device, src, device, bytes);
#endif
  std::memcpy(dst, src, bytes);
}

/// Seconds of `f`, the slowest rank's.
template <typename F> double timed(tprt::Device device, F &&f) {
  finish(device);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  f();
  finish(device);
  double t = MPI_Wtime() - start;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

/// `n` elements of `value` in `dtype` on `device`.
tprt::Tensor filled(int64_t n, float value, tprt::DType dtype,
                    tprt::Device device) {
  tprt::Tensor t(tprt::DType::F32, {n});
  std::fill_n(t.f32(), n, value);
  return t.to(dtype).to(device);
}

void run(tprt::Context &ctx, const GradSet &set, double bucketMib, int rounds) {
  int ranks = ctx.tp().size();
  tprt::Device device = ctx.device();
  // The buffers, filled with something to add, and a bf16 gradient of each
  // (what a bf16 program's backward hands accumulate_grad).
  ctx.grads().clear();
  int64_t elements = 0;
  std::vector<int64_t> bytes;
  std::vector<tprt::Tensor> bf16Grads;
  for (size_t i = 0; i < set.fqns.size(); ++i) {
    ctx.grads()[set.fqns[i]].grad =
        filled(set.numel[i], 1.0f, tprt::DType::F32, device);
    bf16Grads.push_back(filled(set.numel[i], 0.5f, tprt::DType::BF16, device));
    elements += set.numel[i];
    bytes.push_back(set.numel[i] * 4);
  }
  // FQN order, as the compiler sorts them.
  std::vector<size_t> order(set.fqns.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return set.fqns[a] < set.fqns[b]; });
  std::vector<int64_t> sortedBytes;
  for (size_t i : order)
    sortedBytes.push_back(bytes[i]);
  auto limit = static_cast<int64_t>(bucketMib * 1024 * 1024);
  std::vector<std::vector<std::string>> buckets;
  std::vector<int64_t> bucketBytes;
  for (auto [begin, end] : tprt::planBuckets(sortedBytes, limit)) {
    std::vector<std::string> fqns;
    int64_t b = 0;
    for (size_t i = begin; i < end; ++i) {
      fqns.push_back(set.fqns[order[i]]);
      b += sortedBytes[i];
    }
    buckets.push_back(fqns);
    bucketBytes.push_back(b);
  }
  int64_t total = elements * 4;
  if (elements > INT_MAX)
    tprt::fatal("gradsync: the raw MPI_Allreduce takes at most 2^31 - 1 "
                "elements; use a smaller --scale");
  auto ceilBuckets = (total + limit - 1) / limit;

  tprt::TrainOptions options;
  tprt::TrainState state(options);
  ctx.setTrainState(&state);
  tprt::Tensor raw = filled(elements, 1.0f, tprt::DType::F32, device);
  tprt::Tensor packed =
      tprt::Tensor::uninitialized(tprt::DType::F32, {elements}, device);
  std::vector<tprt::Tensor *> all;
  for (size_t i : order)
    all.push_back(&ctx.grads()[set.fqns[i]].grad);
  std::vector<double> sync, allreduce, pack, copy, cast;
  for (int round = 0; round <= rounds; ++round) {
    state.bucketCollectives = 0;
    double s = timed(device, [&] {
      for (size_t b = 0; b < buckets.size(); ++b)
        tprt::grad_bucket_all_reduce(ctx, static_cast<int64_t>(b), true,
                                     tprt::DType::F32, buckets[b],
                                     bucketBytes[b], "tp");
      // The buckets' all-reduces run beside the stream on the GPU.
      ctx.waitForAsyncCollectives();
    });
    double a = timed(device, [&] {
      if (device == tprt::Device::CUDA)
        return ctx.tp().allReduceSum(raw.f32(), elements);
      MPI_Allreduce(MPI_IN_PLACE, raw.f32(), static_cast<int>(elements),
                    MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    double p = timed(device, [&] { tprt::packBucket(all, packed.f32()); });
    double c = timed(device, [&] {
      copyBytes(packed.raw(), raw.raw(), static_cast<size_t>(total), device);
    });
    for (auto &entry : ctx.grads())
      entry.second.fresh = true;
    double w = timed(device, [&] {
      for (size_t i = 0; i < set.fqns.size(); ++i)
        tprt::accumulate_grad(ctx, bf16Grads[i], bf16Grads[i],
                              set.fqns[i].c_str(), -1, false);
    });
    if (round == 0)
      continue; // warm-up: first touches, MPI's first large message
    sync.push_back(s);
    allreduce.push_back(a);
    pack.push_back(p);
    copy.push_back(c);
    cast.push_back(w);
  }
  ctx.setTrainState(nullptr);
  if (ctx.rank() != 0)
    return;
  double ts = median(sync), ta = median(allreduce), tp = median(pack),
         tc = median(copy), tw = median(cast);
  double bus = 2.0 * (ranks - 1) / ranks;
  auto gbs = [](double bytes, double t) { return bytes / t / 1e9; };
  std::printf("| %s | %zu | %.1f MiB | %lld | %lld | %.3f | %.2f | %.2f | "
              "%.3f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
              set.name.c_str(), set.fqns.size(), total / 1048576.0,
              static_cast<long long>(state.bucketCollectives),
              static_cast<long long>(ceilBuckets), ts * 1e3, gbs(total, ts),
              gbs(total, ts) * bus, ta * 1e3, gbs(total, ta),
              gbs(total, ta) * bus, ta / ts, gbs(total, tp), gbs(total, tc),
              tc / tp, gbs(total, tw));
  std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  double bucketMib = 256, scale = 1;
  int rounds = 5;
  tprt::Device device = tprt::Device::CPU;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string arg = argv[i];
    if (arg == "--bucket-mib")
      bucketMib = std::atof(argv[i + 1]);
    else if (arg == "--scale")
      scale = std::atof(argv[i + 1]);
    else if (arg == "--rounds")
      rounds = std::atoi(argv[i + 1]);
    else if (arg == "--device" && std::string(argv[i + 1]) == "cuda")
      device = tprt::Device::CUDA;
    else if (arg == "--device" && std::string(argv[i + 1]) == "cpu")
      device = tprt::Device::CPU;
    else
      tprt::fatal("usage: tprt-gradsync-bench [--bucket-mib M] [--scale S] "
                  "[--rounds R] [--device cpu|cuda]");
  }
  if (!(bucketMib > 0) || !(scale > 0) || rounds < 1)
    tprt::fatal("--bucket-mib and --scale must be positive, --rounds at "
                "least 1");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  {
    tprt::Context ctx(rank, size, "", "");
    ctx.setDevice(device);
    bool gpu = device == tprt::Device::CUDA;
    if (rank == 0)
      std::printf(
          "%d ranks (%s), buckets of %g MiB, median of %d rounds\n\n"
          "| gradient set | tensors | FP32 bytes | all-reduces issued | "
          "ceil(bytes / bucket) | sync ms | sync algbw GB/s | sync busbw "
          "GB/s | raw %s ms | raw algbw GB/s | raw busbw GB/s | "
          "sync speed / raw | pack GB/s | %s GB/s | pack speed / copy | "
          "bf16 cast into FP32 buffers GB/s |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
          "\n",
          size, gpu ? "GPUs, NCCL" : "CPU, MPI", bucketMib, rounds,
          gpu ? "ncclAllReduce" : "MPI_Allreduce",
          gpu ? "cudaMemcpy" : "memcpy");
    run(ctx, llama7b(scale), bucketMib, rounds);
    run(ctx, synthetic(scale), bucketMib, rounds);
  }
  MPI_Finalize();
  return 0;
}
