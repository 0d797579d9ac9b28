//===- CudaKernelsTest.cpp - the CUDA kernels against the CPU kernels -----===//
//
// Every kernel of the CUDA backend on random operands, with the shapes
// where tiling and masking have edges (head dims of 64, 128 and 256, GQA,
// causal and sliding windows, soft-capping, padding masks, fewer queries
// than keys, sequences across several key tiles), compared with the CPU
// kernel of the same op. Needs a GPU: without one it prints "skipped: no
// GPU" and exits 77 (ctest's skip code). bench/device-check.sh runs it,
// and runs it again with --stuck-collective (the collective timeout).
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"
#include "tprt/Rope.h"
#include "tprt/Train.h"
#include "tprt/tprt.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mpi.h>
#include <string>

#ifdef TPRT_WITH_CUDA
#include "cuda/CublasLt.h"
#include "cuda/Cudnn.h"
#include "cuda/Graphs.h"
#include "cuda/Runtime.h"

#include <chrono>
#include <thread>
#endif

using namespace tprt;
using tprt::test::randomTensor;

namespace {

int failures = 0, checks = 0;

/// max |gpu - cpu| / max(1, max |cpu|) within `tol`, printed per check.
void expectClose(const std::string &what, const Tensor &cpu, const Tensor &gpu,
                 double tol = 1e-5) {
  ++checks;
  Tensor got = gpu.to(Device::CPU);
  if (got.shape() != cpu.shape() || got.dtype() != cpu.dtype()) {
    std::printf("FAIL %s: %s vs %s\n", what.c_str(), got.describe().c_str(),
                cpu.describe().c_str());
    ++failures;
    return;
  }
  // A bf16 program's results compared as the f32 values they hold.
  got = got.to(DType::F32);
  Tensor expected = cpu.to(DType::F32);
  double diff = 0, scale = 1;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double a = expected.f32()[i], b = got.f32()[i];
    diff = std::isnan(b) != std::isnan(a) ? INFINITY
                                          : std::max(diff, std::fabs(a - b));
    scale = std::max(scale, std::fabs(a));
  }
  bool ok = diff / scale <= tol;
  failures += !ok;
  std::printf("%s %s: %.2e\n", ok ? "ok" : "FAIL", what.c_str(), diff / scale);
  // Each line out before the next check: one that stops the program
  // leaves the earlier ones reported.
  std::fflush(stdout);
}

Tensor gpu(const Tensor &t) { return t.to(Device::CUDA); }

/// `t` on the host with 0 where `where` (default: t itself) is not finite:
/// the log-sum-exp of rows that see no key, whose value is the backend's.
Tensor finiteOnly(const Tensor &t, const Tensor &where = Tensor()) {
  Tensor out = t.to(Device::CPU).to(DType::F32);
  Tensor w = where.defined() ? where.to(Device::CPU).to(DType::F32) : out;
  for (int64_t i = 0; i < out.numel(); ++i)
    if (!std::isfinite(w.f32()[i]))
      out.f32()[i] = 0.0f;
  return out;
}

Tensor randomIds(std::vector<int64_t> shape, int64_t vocab, unsigned seed) {
  Tensor t(DType::I64, std::move(shape));
  std::mt19937 gen(seed);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.i64()[i] = gen() % vocab;
  return t;
}

/// Left padding of `pad` positions in row 0 (a padded batch).
Tensor paddingMask(int64_t batch, int64_t seq, int64_t pad) {
  Tensor m(DType::I64, {batch, seq});
  for (int64_t i = 0; i < m.numel(); ++i)
    m.i64()[i] = !(i / seq == 0 && i % seq < pad);
  return m;
}

void testElementwise(Context &c, Context &g) {
  Tensor x = randomTensor({3, 7, 33}, 1, -4, 4),
         y = randomTensor({3, 7, 33}, 2);
  expectClose("silu", silu(c, x), silu(g, gpu(x)));
  expectClose("gelu", gelu(c, x, false), gelu(g, gpu(x), false));
  expectClose("gelu tanh", gelu(c, x, true), gelu(g, gpu(x), true));
  expectClose("relu_squared", relu_squared(c, x), relu_squared(g, gpu(x)));
  expectClose("scale", scale(c, x, 0.37), scale(g, gpu(x), 0.37));
  expectClose("softcap", softcap(c, x, 3.0), softcap(g, gpu(x), 3.0));
  expectClose("add", add(c, x, y), add(g, gpu(x), gpu(y)));
  expectClose("mul", mul(c, x, y), mul(g, gpu(x), gpu(y)));
  expectClose("silu_grad", silu_grad(c, x, y), silu_grad(g, gpu(x), gpu(y)));
  {
    Tensors sc = silu_mul_grad(c, x, y, x),
            sg = silu_mul_grad(g, gpu(x), gpu(y), gpu(x));
    expectClose("silu_mul_grad dgate", sc[0], sg[0]);
    expectClose("silu_mul_grad dup", sc[1], sg[1]);
  }
  expectClose("gelu_grad", gelu_grad(c, x, y, false),
              gelu_grad(g, gpu(x), gpu(y), false));
  expectClose("gelu_grad tanh", gelu_grad(c, x, y, true),
              gelu_grad(g, gpu(x), gpu(y), true));
  expectClose("relu_squared_grad", relu_squared_grad(c, x, y),
              relu_squared_grad(g, gpu(x), gpu(y)));
  expectClose("softcap_grad", softcap_grad(c, x, y, 3.0),
              softcap_grad(g, gpu(x), gpu(y), 3.0));
  // A fused projection's parts (exact copies), f32 and bf16.
  for (const Tensor &t : {x, x.to(DType::BF16)}) {
    std::string type = t.dtype() == DType::BF16 ? " bf16" : "";
    expectClose("feature_slice" + type, feature_slice(c, t, 5, 20),
                feature_slice(g, gpu(t), 5, 20), 0);
    Tensor part = feature_slice(c, t, 5, 20);
    expectClose("feature_slice_grad" + type, feature_slice_grad(c, part, 5, 33),
                feature_slice_grad(g, gpu(part), 5, 33), 0);
  }
}

void testLinear(Context &c, Context &g) {
  Tensor x = randomTensor({2, 9, 48}, 3), w = randomTensor({40, 48}, 4),
         b = randomTensor({40}, 5), dy = randomTensor({2, 9, 40}, 6);
  for (LinearForm form : {LinearForm::Flat, LinearForm::Bmm}) {
    bool bmm = form == LinearForm::Bmm;
    expectClose(bmm ? "linear_bmm" : "linear", linear(c, x, w, form),
                linear(g, gpu(x), gpu(w), form));
    expectClose(
        bmm ? "linear_bmm_bias" : "linear_bias",
        linear_epilogue(c, x, w, b, form, LinearEpilogue::Bias),
        linear_epilogue(g, gpu(x), gpu(w), gpu(b), form, LinearEpilogue::Bias));
  }
  expectClose("bias_add", bias_add(c, dy, b), bias_add(g, gpu(dy), gpu(b)));
  expectClose("linear_grad_input", linear_grad_input(c, dy, w),
              linear_grad_input(g, gpu(dy), gpu(w)));
  expectClose("linear_grad_weight", linear_grad_weight(c, dy, x),
              linear_grad_weight(g, gpu(dy), gpu(x)));
  expectClose("sum_leading", sum_leading(c, dy), sum_leading(g, gpu(dy)));
  // On a world of one rank: add_once adds, and the consuming all-reduce is
  // the identity that leaves the caller's tensor empty (testFusedCalls has
  // the other fused calls).
  expectClose("linear_add_once",
              linear_add(c, x, w, dy, LinearForm::Flat, true),
              linear_add(g, gpu(x), gpu(w), gpu(dy), LinearForm::Flat, true));
  Tensor taken = gpu(dy);
  expectClose("all_reduce_sum_consuming", dy,
              all_reduce_sum_consuming(g, taken));
  ++checks;
  if (taken.defined()) {
    std::printf("FAIL all_reduce_sum_consuming left its input defined\n");
    ++failures;
  }
}

/// `t` rounded to bf16 and back: what autocast multiplies.
Tensor roundBf16(const Tensor &t) { return t.to(DType::BF16).to(DType::F32); }

/// bf16 autocast's products equal the FP32 products of the operands rounded
/// to bf16 (FP32 accumulation on both sides).
void testAutocast(Context &c, Context &g16) {
  Tensor x = randomTensor({2, 9, 48}, 50), w = randomTensor({40, 48}, 51),
         dy = randomTensor({2, 9, 40}, 52);
  Tensor xr = roundBf16(x), wr = roundBf16(w), dyr = roundBf16(dy);
  expectClose("linear autocast bf16", linear(c, xr, wr, LinearForm::Flat),
              linear(g16, gpu(x), gpu(w), LinearForm::Flat));
  expectClose("linear_bmm autocast bf16", linear(c, xr, wr, LinearForm::Bmm),
              linear(g16, gpu(x), gpu(w), LinearForm::Bmm));
  expectClose("linear_grad_input autocast bf16", linear_grad_input(c, dyr, wr),
              linear_grad_input(g16, gpu(dy), gpu(w)));
  expectClose("linear_grad_weight autocast bf16",
              linear_grad_weight(c, dyr, xr),
              linear_grad_weight(g16, gpu(dy), gpu(x)));
}

/// A bf16 program's kernels (tpc --dtype bf16): bf16 operands on both
/// backends give results of the same types; the values differ only where
/// FP32 sums round to bf16 in another order (1e-2: a few bf16 ulps of the
/// largest value). Conversions are exact.
void testBf16Programs(Context &c, Context &g) {
  auto bf16 = [](const Tensor &t) { return t.to(DType::BF16); };
  Tensor f = randomTensor({1000}, 60, -100, 100);
  expectClose("f32 to bf16 on the GPU", f.to(DType::BF16),
              gpu(f).to(DType::BF16), 0);
  expectClose("f32 to f16 on the GPU", f.to(DType::F16), gpu(f).to(DType::F16),
              0);
  expectClose("bf16 to f32 on the GPU", bf16(f).to(DType::F32),
              gpu(bf16(f)).to(DType::F32), 0);
  constexpr double tol = 1e-2;
  Tensor x = bf16(randomTensor({2, 9, 48}, 61)),
         w = bf16(randomTensor({40, 48}, 62)), b = bf16(randomTensor({40}, 63)),
         dy = bf16(randomTensor({2, 9, 40}, 64)),
         y = bf16(randomTensor({2, 9, 48}, 65)),
         norm = bf16(randomTensor({48}, 66));
  expectClose("bf16 linear", linear(c, x, w, LinearForm::Flat),
              linear(g, gpu(x), gpu(w), LinearForm::Flat), tol);
#ifdef TPRT_WITH_CUDA
  int64_t ltRuns = cuda::cublasLtBiasRuns();
#endif
  expectClose(
      "bf16 linear_bias",
      linear_epilogue(c, x, w, b, LinearForm::Flat, LinearEpilogue::Bias),
      linear_epilogue(g, gpu(x), gpu(w), gpu(b), LinearForm::Flat,
                      LinearEpilogue::Bias),
      tol);
#ifdef TPRT_WITH_CUDA
  // The bias in cuBLASLt's epilogue (the library comes with cuBLAS).
  ++checks;
  if (cuda::cublasLtBiasRuns() != ltRuns + 1) {
    std::printf("FAIL bf16 linear_bias did not run cuBLASLt's bias epilogue "
                "(available: %d)\n",
                int(cuda::cublasLtAvailable()));
    ++failures;
  }
#endif
  expectClose("bf16 linear_bmm", linear(c, x, w, LinearForm::Bmm),
              linear(g, gpu(x), gpu(w), LinearForm::Bmm), tol);
  expectClose("bf16 linear_grad_input", linear_grad_input(c, dy, w),
              linear_grad_input(g, gpu(dy), gpu(w)), tol);
  expectClose("bf16 linear_grad_weight", linear_grad_weight(c, dy, x),
              linear_grad_weight(g, gpu(dy), gpu(x)), tol);
  expectClose("bf16 silu", silu(c, x), silu(g, gpu(x)), tol);
  expectClose("bf16 add", add(c, x, y), add(g, gpu(x), gpu(y)), tol);
  expectClose("bf16 silu_grad", silu_grad(c, x, y),
              silu_grad(g, gpu(x), gpu(y)), tol);
  Tensor up = bf16(randomTensor({2, 9, 40}, 74));
  expectClose(
      "bf16 linear_epilogue silu_mul",
      linear_epilogue(c, x, w, up, LinearForm::Flat, LinearEpilogue::SiluMul),
      linear_epilogue(g, gpu(x), gpu(w), gpu(up), LinearForm::Flat,
                      LinearEpilogue::SiluMul),
      tol);
  Tensor dz = bf16(randomTensor({2, 9, 48}, 75));
  Tensors sc = silu_mul_grad(c, x, y, dz),
          sg = silu_mul_grad(g, gpu(x), gpu(y), gpu(dz));
  expectClose("bf16 silu_mul_grad dgate", sc[0], sg[0], tol);
  expectClose("bf16 silu_mul_grad dup", sc[1], sg[1], tol);
  expectClose("bf16 rms_norm", rms_norm(c, x, norm, 1e-6, 0, 0),
              rms_norm(g, gpu(x), gpu(norm), 1e-6, 0, 0), tol);
  // The fused add and norm: the GPU's separate bf16 kernels bit for bit,
  // the CPU's within the bound.
  Tensors fused = add_rms_norm(g, gpu(x), gpu(y), gpu(norm), 1e-6, 1.0);
  Tensor added = add(g, gpu(x), gpu(y));
  expectClose("bf16 add_rms_norm sum as add", added.to(Device::CPU), fused[0],
              0);
  expectClose("bf16 add_rms_norm as add then rms_norm",
              rms_norm(g, added, gpu(norm), 1e-6, 1.0, 0).to(Device::CPU),
              fused[1], 0);
  Tensors fusedCpu = add_rms_norm(c, x, y, norm, 1e-6, 1.0);
  expectClose("bf16 add_rms_norm sum", fusedCpu[0], fused[0], tol);
  expectClose("bf16 add_rms_norm", fusedCpu[1], fused[1], tol);
  Tensors nc = rms_norm_grad(c, x, norm, y, 1e-6, 0, 0),
          ng = rms_norm_grad(g, gpu(x), gpu(norm), gpu(y), 1e-6, 0, 0);
  expectClose("bf16 rms_norm_grad dx", nc[0], ng[0], tol);
  expectClose("bf16 rms_norm_grad dw", nc[1], ng[1], tol);
  Tensor table = bf16(randomTensor({50, 24}, 67)),
         ids = randomIds({3, 11}, 50, 68);
  expectClose("bf16 embedding", embedding(c, ids, table),
              embedding(g, gpu(ids), gpu(table)), 0);
  Tensor q = bf16(randomTensor({2, 9, 4 * 64}, 69, -2, 2)),
         k = bf16(randomTensor({2, 9, 2 * 64}, 70, -2, 2)),
         v = bf16(randomTensor({2, 9, 2 * 64}, 71));
  Tensor mask = paddingMask(2, 9, 3);
  expectClose("bf16 attention",
              attention(c, q, k, v, mask, 4, 2, 64, 0.125, true, 0, 0),
              attention(g, gpu(q), gpu(k), gpu(v), gpu(mask), 4, 2, 64, 0.125,
                        true, 0, 0),
              tol);
  Tensor logits = bf16(randomTensor({2, 10, 300}, 72, -5, 5));
  Tensor labels = randomIds({2, 10}, 300, 73), keep = paddingMask(2, 10, 4);
  Tensors lc = cross_entropy(c, logits, labels, keep),
          lg = cross_entropy(g, gpu(logits), gpu(labels), gpu(keep));
  expectClose("bf16 cross_entropy loss", lc[0], lg[0]);
  expectClose("bf16 cross_entropy_grad",
              cross_entropy_grad(c, logits, labels, keep, lc[1], false, {}, {}),
              cross_entropy_grad(g, gpu(logits), gpu(labels), gpu(keep), lg[1],
                                 false, {}, {}),
              tol);
}

/// A replica-gradient bucket's pack and unpack on the GPU (one kernel for
/// all the buffers, runs empty, of one element, and across its chunks)
/// against the CPU's copies; bf16 gradients summed into FP32 buffers as on
/// the CPU. All exact.
void testBuckets(Context &c, Context &g) {
  std::vector<int64_t> sizes = {5, 0, 1, 9000, 3, 16384, 0, 7};
  std::vector<Tensor> host, dev;
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    host.push_back(randomTensor({sizes[i]}, 80 + i));
    dev.push_back(gpu(host.back()));
    total += sizes[i];
  }
  std::vector<Tensor *> hostRuns, devRuns;
  for (size_t i = 0; i < sizes.size(); ++i) {
    hostRuns.push_back(&host[i]);
    devRuns.push_back(&dev[i]);
  }
  Tensor hostBucket(DType::F32, {total});
  Tensor devBucket = Tensor::uninitialized(DType::F32, {total}, Device::CUDA);
  packBucket(hostRuns, hostBucket.f32());
  packBucket(devRuns, devBucket.f32());
  expectClose("bucket pack", hostBucket, devBucket, 0);
  Tensor changed = randomTensor({total}, 99), devChanged = gpu(changed);
  unpackBucket(changed.f32(), hostRuns);
  unpackBucket(devChanged.f32(), devRuns);
  for (size_t i = 0; i < sizes.size(); ++i)
    expectClose("bucket unpack, buffer " + std::to_string(i), host[i], dev[i],
                0);

  auto bf16 = [](const Tensor &t) { return t.to(DType::BF16); };
  Tensor param = bf16(randomTensor({4, 6}, 90));
  Tensor first = bf16(randomTensor({4, 6}, 91)),
         second = bf16(randomTensor({4, 6}, 92));
  for (const Tensor &grad : {first, second}) {
    accumulate_grad(c, grad, param, "bf16.weight", -1, false);
    accumulate_grad(g, gpu(grad), gpu(param), "bf16.weight", -1, false);
  }
  expectClose("bf16 accumulate_grad into FP32", c.grads()["bf16.weight"].grad,
              g.grads()["bf16.weight"].grad, 0);
}

/// Two optimizer steps' bucket synchronization on a world of one (NCCL's
/// all-reduce is the identity there): the first packs the gradients into
/// the bucket, binds them to it and starts its all-reduce on the side
/// stream, the second reduces the bucket in place; normalize_grads waits
/// for it. The same values as the CPU's.
void testBucketSync() {
  Tensor a = randomTensor({300}, 110), b = randomTensor({7, 5}, 111);
  Context c(0, 1, "/nonexistent/model.onnx", "model.onnx");
  Context g(0, 1, "/nonexistent/model.onnx", "model.onnx");
  g.setDevice(Device::CUDA);
  for (Context *ctx : {&c, &g}) {
    auto here = [&](const Tensor &t) { return ctx == &g ? gpu(t) : t; };
    TrainOptions options;
    TrainState state(options);
    ctx->setTrainState(&state);
    for (int step = 0; step < 2; ++step) {
      for (auto &entry : ctx->grads())
        entry.second.fresh = true;
      accumulate_grad(*ctx, here(a), here(a), "sync.a", -1, false);
      accumulate_grad(*ctx, here(b), here(b), "sync.b", -1, false);
      optimizer_boundary(*ctx);
      grad_bucket_all_reduce(*ctx, 0, /*mean=*/true, DType::F32,
                             {"sync.a", "sync.b"}, (300 + 35) * 4, "tp");
      state.labelTokens = 4;
      normalize_grads(*ctx);
    }
    ctx->setTrainState(nullptr);
  }
  expectClose("bucket sync, first gradient", c.grads()["sync.a"].grad,
              g.grads()["sync.a"].grad, 0);
  expectClose("bucket sync, second gradient", c.grads()["sync.b"].grad,
              g.grads()["sync.b"].grad, 0);
}

/// Two AdamW and two SGD steps of an f32 and a bf16 parameter on both
/// backends (bf16: updated in f32 and rounded once per step, on the GPU in
/// the update kernel itself).
void testOptimizer() {
  for (const char *name : {"adamw", "sgd"})
    for (DType type : {DType::F32, DType::BF16}) {
      Context c(0, 1, "/nonexistent/model.onnx", "model.onnx");
      Context g(0, 1, "/nonexistent/model.onnx", "model.onnx");
      g.setDevice(Device::CUDA);
      TrainOptions options;
      options.momentum = 0.9;
      options.weightDecay = 0.1;
      Optimizer onCpu(options, name, /*masterWeights=*/false),
          onGpu(options, name, /*masterWeights=*/false);
      Tensor w = randomTensor({33, 65}, 120).to(type);
      c.cacheParam("opt.w", w);
      g.cacheParam("opt.w", gpu(w));
      for (int step = 0; step < 2; ++step) {
        Tensor grad = randomTensor({33, 65}, 121 + step);
        for (Context *ctx : {&c, &g}) {
          ctx->grads()["opt.w"].fresh = true;
          accumulate_grad(*ctx, ctx == &g ? gpu(grad) : grad,
                          *ctx->cachedParam("opt.w"), "opt.w", -1, false);
        }
        onCpu.step(c);
        onGpu.step(g);
      }
      expectClose(std::string(name) + " " + dtypeName(type) + " parameter",
                  *c.cachedParam("opt.w"), *g.cachedParam("opt.w"),
                  type == DType::F32 ? 1e-5 : 1e-2);
    }
}

/// Host-to-device copies: a large one goes through the two pinned buffers
/// in 32 MiB chunks (here three and a partial fourth, twice, so that each
/// buffer is reused), a small one directly; all arrive exact.
void testCopies() {
  for (int64_t n : {int64_t(3) * (8 << 20) + 5, int64_t(3) * (8 << 20) + 5,
                    int64_t(1 << 18) - 1}) {
    Tensor t = randomTensor({n}, 100 + n % 7);
    expectClose("host to GPU copy of " + std::to_string(n) + " floats", t,
                gpu(t), 0);
  }
}

void testEmbeddingAndNorm(Context &c, Context &g) {
  Tensor table = randomTensor({50, 24}, 7), ids = randomIds({3, 11}, 50, 8);
  ids.i64()[3] = ids.i64()[4] = ids.i64()[5]; // a repeated token
  expectClose("embedding", embedding(c, ids, table),
              embedding(g, gpu(ids), gpu(table)));
  Tensor dy = randomTensor({3, 11, 24}, 9);
  expectClose(
      "embedding_grad", embedding_grad(c, ids, dy, table, false, -1, {}, {}),
      embedding_grad(g, gpu(ids), gpu(dy), gpu(table), false, -1, {}, {}));
  expectClose("embedding_grad padding",
              embedding_grad(c, ids, dy, table, false, ids.i64()[0], {}, {}),
              embedding_grad(g, gpu(ids), gpu(dy), gpu(table), false,
                             ids.i64()[0], {}, {}));
  // Rows [20, 60) of an uneven vocabulary held in a block of 50: the ids
  // outside them, and the 10 padding rows, get no gradient.
  Tensor wide = randomIds({3, 11}, 60, 14);
  expectClose(
      "embedding_grad uneven",
      embedding_grad(c, wide, dy, table, true, -1, {20}, {40}),
      embedding_grad(g, gpu(wide), gpu(dy), gpu(table), true, -1, {20}, {40}));
  // 150 rows: the weight's gradient sums them in three chunks of 64.
  Tensor x = randomTensor({3, 50, 64}, 10), w = randomTensor({64}, 11),
         wg = randomTensor({16}, 12), d = randomTensor({3, 50, 64}, 13);
  for (auto [weight, group, offset] : {std::tuple{&w, int64_t(0), 0.0},
                                       {&w, int64_t(0), 1.0},
                                       {&wg, int64_t(16), 0.0}}) {
    std::string name = "rms_norm group " + std::to_string(group) + " offset " +
                       std::to_string(int(offset));
    expectClose(name, rms_norm(c, x, *weight, 1e-6, offset, group),
                rms_norm(g, gpu(x), gpu(*weight), 1e-6, offset, group));
    Tensors cpu = rms_norm_grad(c, x, *weight, d, 1e-6, offset, group);
    Tensors dev =
        rms_norm_grad(g, gpu(x), gpu(*weight), gpu(d), 1e-6, offset, group);
    expectClose(name + " grad x", cpu[0], dev[0]);
    expectClose(name + " grad w", cpu[1], dev[1]);
  }
}

void testRotary(Context &c, Context &g) {
  Tensor x = randomTensor({2, 13, 4 * 32}, 14);
  for (auto [rotaryDim, interleaved, type] :
       {std::tuple{int64_t(32), false, RopeType::Default},
        {int64_t(16), false, RopeType::Llama3},
        {int64_t(32), true, RopeType::Yarn}}) {
    std::string name = "rotary dim " + std::to_string(rotaryDim) +
                       (interleaved ? " interleaved" : "") + " type " +
                       std::to_string(int64_t(type));
    for (bool transpose : {false, true})
      expectClose(
          name + (transpose ? " transpose" : ""),
          rotary(c, x, 32, rotaryDim, 10000.0, interleaved, int64_t(type), 8.0,
                 1.0, 4.0, 64, 32.0, 1.0, true, 1.1, transpose, {}, {}),
          rotary(g, gpu(x), 32, rotaryDim, 10000.0, interleaved, int64_t(type),
                 8.0, 1.0, 4.0, 64, 32.0, 1.0, true, 1.1, transpose, {}, {}));
  }
}

void testAttention(Context &c, Context &g) {
  struct Case {
    int64_t batch, sq, skv, heads, kvHeads, headDim;
    bool causal;
    int64_t window;
    double softcap;
    bool mask;
  };
  for (Case k : {Case{2, 9, 9, 4, 2, 64, true, 0, 0, true},
                 Case{1, 70, 70, 2, 1, 128, true, 0, 0, false},
                 Case{2, 45, 45, 2, 2, 256, true, 20, 50.0, true},
                 Case{1, 5, 40, 3, 1, 48, true, 0, 0, false},
                 Case{2, 33, 33, 2, 1, 32, false, 0, 0, true},
                 Case{1, 64, 64, 4, 4, 64, true, 33, 0, false}}) {
    std::string name =
        "attention b" + std::to_string(k.batch) + " sq" + std::to_string(k.sq) +
        " skv" + std::to_string(k.skv) + " h" + std::to_string(k.heads) + "/" +
        std::to_string(k.kvHeads) + " d" + std::to_string(k.headDim) +
        (k.causal ? " causal" : "") +
        (k.window ? " window " + std::to_string(k.window) : "") +
        (k.softcap > 0 ? " softcap" : "") + (k.mask ? " padded" : "");
    Tensor q = randomTensor({k.batch, k.sq, k.heads * k.headDim}, 20, -2, 2);
    Tensor kk =
        randomTensor({k.batch, k.skv, k.kvHeads * k.headDim}, 21, -2, 2);
    Tensor v = randomTensor({k.batch, k.skv, k.kvHeads * k.headDim}, 22);
    Tensor dout = randomTensor(q.shape(), 23);
    Tensor mask = k.mask ? paddingMask(k.batch, k.skv, 3) : Tensor();
    Tensor gmask = k.mask ? gpu(mask) : Tensor();
    double s = 1.0 / std::sqrt(double(k.headDim));
    expectClose(name,
                attention(c, q, kk, v, mask, k.heads, k.kvHeads, k.headDim, s,
                          k.causal, k.window, k.softcap),
                attention(g, gpu(q), gpu(kk), gpu(v), gmask, k.heads, k.kvHeads,
                          k.headDim, s, k.causal, k.window, k.softcap));
    Tensors cpu =
        attention_grad(c, q, kk, v, dout, mask, k.heads, k.kvHeads, k.headDim,
                       s, k.causal, k.window, k.softcap, {}, {});
    Tensors dev = attention_grad(g, gpu(q), gpu(kk), gpu(v), gpu(dout), gmask,
                                 k.heads, k.kvHeads, k.headDim, s, k.causal,
                                 k.window, k.softcap, {}, {});
    expectClose(name + " dq", cpu[0], dev[0], 2e-5);
    expectClose(name + " dk", cpu[1], dev[1], 2e-5);
    expectClose(name + " dv", cpu[2], dev[2], 2e-5);
    // The forward keeping its log-sum-exp, and the backward from it.
    Tensors cpuLse = attention_lse(c, q, kk, v, mask, k.heads, k.kvHeads,
                                   k.headDim, s, k.causal, k.window, k.softcap);
    Tensors devLse =
        attention_lse(g, gpu(q), gpu(kk), gpu(v), gmask, k.heads, k.kvHeads,
                      k.headDim, s, k.causal, k.window, k.softcap);
    expectClose(name + " with lse", cpuLse[0], devLse[0]);
    expectClose(name + " lse", finiteOnly(cpuLse[1]), finiteOnly(devLse[1]));
    Tensors saved = attention_grad(g, gpu(q), gpu(kk), gpu(v), gpu(dout), gmask,
                                   k.heads, k.kvHeads, k.headDim, s, k.causal,
                                   k.window, k.softcap, devLse[0], devLse[1]);
    expectClose(name + " dq from the saved lse", cpu[0], saved[0], 2e-5);
    expectClose(name + " dk from the saved lse", cpu[1], saved[1], 2e-5);
    expectClose(name + " dv from the saved lse", cpu[2], saved[2], 2e-5);
  }
}

/// The elementwise, RMS norm (and its gradient) and RoPE kernels on bf16
/// and f16 tensors (Map.cuh: in f32, rounded once) against the f32 kernels
/// on the widened tensors, rounded: bit for bit, at a size with a tail
/// after the 16-byte packs.
void testNativeReduced(Context &g) {
  for (DType t : {DType::BF16, DType::F16}) {
    std::string type = dtypeName(t);
    auto low = [&](const Tensor &f) { return gpu(f).to(t); };
    // What the kernel on the widened tensor gives, rounded, on the host.
    auto rounded = [&](const Tensor &f32) { return f32.to(t).to(Device::CPU); };
    auto wide = [](const Tensor &x) { return x.to(DType::F32); };
    Tensor x = low(randomTensor({3, 7, 4 * 16 + 3}, 90, -4, 4)),
           y = low(randomTensor({3, 7, 4 * 16 + 3}, 91));
    expectClose(type + " silu native", rounded(silu(g, wide(x))), silu(g, x),
                0);
    expectClose(type + " gelu tanh native", rounded(gelu(g, wide(x), true)),
                gelu(g, x, true), 0);
    expectClose(type + " add native", rounded(add(g, wide(x), wide(y))),
                add(g, x, y), 0);
    expectClose(type + " mul native", rounded(mul(g, wide(x), wide(y))),
                mul(g, x, y), 0);
    expectClose(type + " silu_grad native",
                rounded(silu_grad(g, wide(x), wide(y))), silu_grad(g, x, y), 0);
    Tensors fusedGrads = silu_mul_grad(g, x, y, x),
            wideFusedGrads = silu_mul_grad(g, wide(x), wide(y), wide(x));
    expectClose(type + " silu_mul_grad dgate native",
                rounded(wideFusedGrads[0]), fusedGrads[0], 0);
    expectClose(type + " silu_mul_grad dup native", rounded(wideFusedGrads[1]),
                fusedGrads[1], 0);
    // The product rounded as linear rounds it, then silu(p) * other in f32
    // rounded once.
    Tensor in = low(randomTensor({3, 7, 24}, 94)),
           proj = low(randomTensor({4 * 16 + 3, 24}, 95));
    Tensor product = linear(g, in, proj, LinearForm::Flat);
    expectClose(type + " linear_epilogue silu_mul native",
                rounded(mul(g, silu(g, wide(product)), wide(y))),
                linear_epilogue(g, in, proj, y, LinearForm::Flat,
                                LinearEpilogue::SiluMul),
                0);
    Tensor bias = low(randomTensor({4 * 16 + 3}, 98));
    expectClose(type + " bias_add native",
                rounded(bias_add(g, wide(y), wide(bias))), bias_add(g, y, bias),
                0);
    // bf16: cuBLASLt adds the bias to the FP32 accumulator (one rounding:
    // the f32 product of the widened operands plus the bias, rounded, up
    // to the order of the sums); f16: the product rounded, then the bias.
    Tensor biased = linear_epilogue(g, in, proj, bias, LinearForm::Flat,
                                    LinearEpilogue::Bias);
    if (t == DType::BF16)
      expectClose(
          type + " linear_epilogue bias in cuBLASLt's epilogue",
          rounded(bias_add(g, linear(g, wide(in), wide(proj), LinearForm::Flat),
                           wide(bias))),
          biased, 1e-2);
    else
      expectClose(type + " linear_epilogue bias native",
                  rounded(bias_add(g, wide(product), wide(bias))), biased, 0);
    // dy widened as it is read, summed in f32 (atomics: the order of the
    // additions varies).
    Tensor ids = gpu(randomIds({3, 7}, 10, 96)),
           table = gpu(randomTensor({10, 67}, 97));
    expectClose(type + " embedding_grad native",
                embedding_grad(g, ids, wide(x), table, false, 3, {}, {})
                    .to(Device::CPU),
                embedding_grad(g, ids, x, table, false, 3, {}, {}), 1e-6);
    std::string fqn = "embed." + type + ".weight";
    accumulate_embedding_grad(g, ids, x, table, fqn.c_str(), -1, false, false,
                              -1, {}, {});
    expectClose(type + " accumulate_embedding_grad native",
                embedding_grad(g, ids, wide(x), table, false, -1, {}, {})
                    .to(Device::CPU),
                g.grads()[fqn].grad, 1e-6);
    Tensor w = gpu(randomTensor({4 * 16 + 3}, 92));
    expectClose(type + " rms_norm native",
                rounded(rms_norm(g, wide(x), w, 1e-6, 1.0, 0)),
                rms_norm(g, x, w, 1e-6, 1.0, 0), 0);
    Tensors grads = rms_norm_grad(g, x, w, y, 1e-6, 1.0, 0),
            wideGrads = rms_norm_grad(g, wide(x), w, wide(y), 1e-6, 1.0, 0);
    expectClose(type + " rms_norm_grad dx native", rounded(wideGrads[0]),
                grads[0], 0);
    expectClose(type + " rms_norm_grad dw native", wideGrads[1].to(Device::CPU),
                grads[1], 0);
    Tensor heads = low(randomTensor({2, 5, 4 * 32}, 93));
    expectClose(type + " rotary native",
                rounded(rotary(g, wide(heads), 32, 32, 10000.0, false,
                               int64_t(RopeType::Default), 1.0, 1.0, 4.0, 64,
                               32.0, 1.0, true, 1.0, false, {}, {})),
                rotary(g, heads, 32, 32, 10000.0, false,
                       int64_t(RopeType::Default), 1.0, 1.0, 4.0, 64, 32.0, 1.0,
                       true, 1.0, false, {}, {}),
                0);
  }
}

/// bf16 and f16 attention where chooseAttentionKernel gives it to cuDNN,
/// forward and backward, against the CPU's f32 kernels on the same
/// (rounded) operands, and that cuDNN ran each call: GQA, head_dim 64 and
/// 128, a key mask (left padding: queries that see no key get zeros), a
/// sliding window with and without one, no causal mask, a query after
/// cached keys. Skipped, with the reason, where cuDNN is not found.
void testFusedAttention(Context &c, Context &g) {
#ifdef TPRT_WITH_CUDA
  std::string why;
  if (!cuda::cudnnAvailable(why)) {
    std::printf("skipped fused attention: %s\n", why.c_str());
    return;
  }
  struct Case {
    DType dtype;
    int64_t batch, sq, skv, heads, kvHeads, headDim;
    bool causal;
    int64_t window;
    bool mask;
  };
  for (Case k : {Case{DType::BF16, 2, 128, 128, 8, 2, 64, true, 0, false},
                 Case{DType::BF16, 2, 97, 97, 4, 4, 128, true, 0, true},
                 Case{DType::F16, 1, 64, 64, 4, 1, 64, true, 0, true},
                 Case{DType::BF16, 1, 200, 200, 4, 2, 64, true, 48, false},
                 Case{DType::BF16, 2, 100, 100, 4, 2, 64, true, 16, true},
                 Case{DType::BF16, 2, 33, 33, 2, 1, 64, false, 0, true},
                 Case{DType::BF16, 1, 1, 77, 4, 2, 64, true, 0, false}}) {
    std::string name = std::string("fused attention ") + dtypeName(k.dtype) +
                       " b" + std::to_string(k.batch) + " sq" +
                       std::to_string(k.sq) + " skv" + std::to_string(k.skv) +
                       " h" + std::to_string(k.heads) + "/" +
                       std::to_string(k.kvHeads) + " d" +
                       std::to_string(k.headDim) + (k.causal ? " causal" : "") +
                       (k.window ? " window " + std::to_string(k.window) : "") +
                       (k.mask ? " padded" : "");
    auto rounded = [&](Tensor t) { return t.to(k.dtype).to(DType::F32); };
    Tensor q =
        rounded(randomTensor({k.batch, k.sq, k.heads * k.headDim}, 80, -2, 2));
    Tensor kk = rounded(
        randomTensor({k.batch, k.skv, k.kvHeads * k.headDim}, 81, -2, 2));
    Tensor v = rounded(randomTensor(kk.shape(), 82));
    Tensor dout = rounded(randomTensor(q.shape(), 83));
    Tensor mask = k.mask ? paddingMask(k.batch, k.skv, 5) : Tensor();
    Tensor gmask = k.mask ? gpu(mask) : Tensor();
    auto dev = [&](const Tensor &t) { return gpu(t).to(k.dtype); };
    double s = 1.0 / std::sqrt(double(k.headDim));
    int64_t before = cuda::cudnnAttentionRuns();
    expectClose(name,
                attention(c, q, kk, v, mask, k.heads, k.kvHeads, k.headDim, s,
                          k.causal, k.window, 0),
                attention(g, dev(q), dev(kk), dev(v), gmask, k.heads, k.kvHeads,
                          k.headDim, s, k.causal, k.window, 0),
                2e-2);
    Tensors cpu = attention_grad(c, q, kk, v, dout, mask, k.heads, k.kvHeads,
                                 k.headDim, s, k.causal, k.window, 0, {}, {});
    Tensors fused =
        attention_grad(g, dev(q), dev(kk), dev(v), dev(dout), gmask, k.heads,
                       k.kvHeads, k.headDim, s, k.causal, k.window, 0, {}, {});
    expectClose(name + " dq", cpu[0], fused[0], 3e-2);
    expectClose(name + " dk", cpu[1], fused[1], 3e-2);
    expectClose(name + " dv", cpu[2], fused[2], 3e-2);
    // The forward, and the backward's forward and backward.
    ++checks;
    bool ran = cuda::cudnnAttentionRuns() - before == 3;
    failures += !ran;
    std::printf("%s %s ran on cuDNN: %lld calls\n", ran ? "ok" : "FAIL",
                name.c_str(),
                static_cast<long long>(cuda::cudnnAttentionRuns() - before));
    // The forward keeping cuDNN's statistics, and the backward from them:
    // two cuDNN calls, not three.
    before = cuda::cudnnAttentionRuns();
    Tensors cpuLse = attention_lse(c, q, kk, v, mask, k.heads, k.kvHeads,
                                   k.headDim, s, k.causal, k.window, 0);
    Tensors fusedLse =
        attention_lse(g, dev(q), dev(kk), dev(v), gmask, k.heads, k.kvHeads,
                      k.headDim, s, k.causal, k.window, 0);
    expectClose(name + " with lse", cpuLse[0], fusedLse[0], 2e-2);
    // Rows that see no key: +inf on the CPU, cuDNN's own value there.
    expectClose(name + " lse", finiteOnly(cpuLse[1]),
                finiteOnly(fusedLse[1], cpuLse[1]), 2e-2);
    Tensors saved = attention_grad(g, dev(q), dev(kk), dev(v), dev(dout), gmask,
                                   k.heads, k.kvHeads, k.headDim, s, k.causal,
                                   k.window, 0, fusedLse[0], fusedLse[1]);
    expectClose(name + " dq from the saved lse", cpu[0], saved[0], 3e-2);
    expectClose(name + " dk from the saved lse", cpu[1], saved[1], 3e-2);
    expectClose(name + " dv from the saved lse", cpu[2], saved[2], 3e-2);
    ++checks;
    ran = cuda::cudnnAttentionRuns() - before == 2;
    failures += !ran;
    std::printf("%s %s from the saved lse ran on cuDNN: %lld calls (want 2)\n",
                ran ? "ok" : "FAIL", name.c_str(),
                static_cast<long long>(cuda::cudnnAttentionRuns() - before));
  }
#endif
}

void testLoss(Context &c, Context &g) {
  Tensor logits = randomTensor({2, 10, 300}, 30, -5, 5);
  Tensor ids = randomIds({2, 10}, 300, 31), mask = paddingMask(2, 10, 4);
  Tensors cpu = cross_entropy(c, logits, ids, mask);
  Tensors dev = cross_entropy(g, gpu(logits), gpu(ids), gpu(mask));
  expectClose("cross_entropy loss", cpu[0], dev[0]);
  expectClose("cross_entropy lse", cpu[1], dev[1]);
  expectClose("cross_entropy_grad",
              cross_entropy_grad(c, logits, ids, mask, cpu[1], false, {}, {}),
              cross_entropy_grad(g, gpu(logits), gpu(ids), gpu(mask), dev[1],
                                 false, {}, {}));

  // One rank's block of an uneven vocabulary: 257 entries in a block of
  // 300, the padding large logits that would dominate if read; the host's
  // form is checked against whole logits by tprt-mpi-test.
  std::vector<int64_t> starts = {0}, sizes = {257};
  Tensor held = randomTensor({2, 10, 300}, 36, -5, 5);
  for (int64_t i = 0; i < 2 * 10; ++i)
    for (int64_t v = 257; v < 300; ++v)
      held.f32()[i * 300 + v] = 50.f;
  Tensor labels = randomIds({2, 10}, 257, 37);
  Tensors cpuHeld =
      cross_entropy_vocab_parallel(c, held, labels, mask, starts, sizes);
  Tensors devHeld = cross_entropy_vocab_parallel(g, gpu(held), gpu(labels),
                                                 gpu(mask), starts, sizes);
  expectClose("cross_entropy_vocab_parallel uneven loss", cpuHeld[0],
              devHeld[0]);
  expectClose("cross_entropy_vocab_parallel uneven lse", cpuHeld[1],
              devHeld[1]);
  expectClose("cross_entropy_grad uneven (zero padding)",
              cross_entropy_grad(c, held, labels, mask, cpuHeld[1], true,
                                 starts, sizes),
              cross_entropy_grad(g, gpu(held), gpu(labels), gpu(mask),
                                 devHeld[1], true, starts, sizes));

  // The accumulating forms (tp-fuse-grad-accumulation), into the FP32
  // buffer over two micro-batches.
  Tensor x = randomTensor({2, 10, 16}, 32), w = randomTensor({300, 16}, 33);
  Tensor dy = randomTensor({2, 10, 16}, 34);
  for (int micro = 0; micro < 2; ++micro) {
    Tensors lossCpu = accumulate_linear_cross_entropy(
        c, x, w, ids, mask, "loss.weight", -1, false, false, {}, {});
    Tensors lossDev = accumulate_linear_cross_entropy(
        g, gpu(x), gpu(w), gpu(ids), gpu(mask), "loss.weight", -1, false, false,
        {}, {});
    expectClose("accumulate_linear_cross_entropy loss", lossCpu[0], lossDev[0]);
    expectClose("accumulate_linear_cross_entropy dx", lossCpu[1], lossDev[1]);
    accumulate_embedding_grad(c, ids, dy, w, "embed.weight", -1, false, false,
                              0, {}, {});
    accumulate_embedding_grad(g, gpu(ids), gpu(dy), gpu(w), "embed.weight", -1,
                              false, false, 0, {}, {});
  }
  expectClose("accumulate_linear_cross_entropy dweight in FP32",
              c.grads()["loss.weight"].grad, g.grads()["loss.weight"].grad);
  expectClose("accumulate_embedding_grad in FP32",
              c.grads()["embed.weight"].grad, g.grads()["embed.weight"].grad);
}

void testMamba2(Context &c, Context &g) {
  int64_t heads = 4, headDim = 8, groups = 2, state = 16, kernel = 4,
          hidden = 24, inner = heads * headDim,
          conv = inner + 2 * groups * state, proj = inner + conv + heads;
  Tensor x = randomTensor({2, 11, hidden}, 40);
  Tensor inProj = randomTensor({proj, hidden}, 41, -0.3f, 0.3f);
  Tensor convW = randomTensor({conv, 1, kernel}, 42),
         convB = randomTensor({conv}, 43), dtBias = randomTensor({heads}, 44),
         aLog = randomTensor({heads}, 45), d = randomTensor({heads}, 46),
         normW = randomTensor({inner}, 47),
         outProj = randomTensor({hidden, inner}, 48, -0.3f, 0.3f);
  Tensor mask = paddingMask(2, 11, 2);
  Tensor dout = randomTensor({2, 11, hidden}, 49);
  for (bool foldedA : {false, true}) {
    Tensors cpu = mamba2_mixer_grad(c, x, inProj, convW, convB, dtBias, aLog, d,
                                    normW, outProj, mask, dout, heads, headDim,
                                    groups, state, kernel, 1e-5, 0.05, foldedA);
    Tensors dev = mamba2_mixer_grad(
        g, gpu(x), gpu(inProj), gpu(convW), gpu(convB), gpu(dtBias), gpu(aLog),
        gpu(d), gpu(normW), gpu(outProj), gpu(mask), gpu(dout), heads, headDim,
        groups, state, kernel, 1e-5, 0.05, foldedA);
    const char *names[] = {"x",         "in_proj",     "conv weight",
                           "conv bias", "dt_bias",     "A_log",
                           "D",         "norm weight", "out_proj"};
    for (int i = 0; i < 9; ++i)
      expectClose(std::string("mamba2_mixer_grad ") + names[i] +
                      (foldedA ? " (folded A)" : ""),
                  cpu[i], dev[i], 2e-5);
  }
  expectClose("mamba2_mixer",
              mamba2_mixer(c, x, inProj, convW, convB, dtBias, aLog, d, normW,
                           outProj, mask, heads, headDim, groups, state, kernel,
                           1e-5, 0.0, false),
              mamba2_mixer(g, gpu(x), gpu(inProj), gpu(convW), gpu(convB),
                           gpu(dtBias), gpu(aLog), gpu(d), gpu(normW),
                           gpu(outProj), gpu(mask), heads, headDim, groups,
                           state, kernel, 1e-5, 0.0, false));
}

/// The fused calls' CUDA kernels (`Fused` in tprt/Calls.def) against the
/// CPU's: the SiLU epilogue in place, the residual added by the GEMM (into
/// a residual the call takes, and into a copy of a shared one, which must
/// keep its values), the weight gradient added by the GEMM into the FP32
/// buffer, and the loss over several blocks of positions (a vocabulary of
/// 65,543: 511 positions a block), vocabulary-parallel over an uneven
/// block, and under bf16 autocast.
void testFusedCalls(Context &c, Context &g, Context &c16, Context &g16) {
  Tensor x = randomTensor({2, 9, 48}, 80), w = randomTensor({40, 48}, 81),
         wu = randomTensor({40, 48}, 82), other = randomTensor({2, 9, 40}, 83);
  for (LinearForm form : {LinearForm::Flat, LinearForm::Bmm}) {
    std::string name = form == LinearForm::Bmm ? " (bmm)" : "";
    expectClose("linear_epilogue silu_mul" + name,
                linear_epilogue(c, x, w, other, form, LinearEpilogue::SiluMul),
                linear_epilogue(g, gpu(x), gpu(w), gpu(other), form,
                                LinearEpilogue::SiluMul));
    expectClose("linear_add" + name, linear_add(c, x, w, other, form, false),
                linear_add(g, gpu(x), gpu(w), gpu(other), form, false));
    Tensor taken = gpu(other);
    expectClose("linear_add_consuming" + name,
                linear_add(c, x, w, other, form, false),
                linear_add_consuming(g, gpu(x), gpu(w), taken, form, false));
    ++checks;
    if (taken.defined()) {
      std::printf("FAIL linear_add_consuming left its residual defined\n");
      ++failures;
    }
    Tensor shared = gpu(other), alias = shared;
    expectClose("linear_add_consuming of a shared residual" + name,
                linear_add(c, x, w, other, form, false),
                linear_add_consuming(g, gpu(x), gpu(w), shared, form, false));
    expectClose("the shared residual keeps its values" + name, other, alias, 0);
  }
  Tensor residual = randomTensor({2, 9, 48}, 87), norm = randomTensor({48}, 88);
  Tensors sumNorm = add_rms_norm(c, x, residual, norm, 1e-6, 0.0),
          sumNormGpu =
              add_rms_norm(g, gpu(x), gpu(residual), gpu(norm), 1e-6, 0.0);
  expectClose("add_rms_norm sum", sumNorm[0], sumNormGpu[0]);
  expectClose("add_rms_norm", sumNorm[1], sumNormGpu[1]);
  expectClose("linear_swiglu", linear_swiglu(c, x, w, wu, LinearForm::Flat),
              linear_swiglu(g, gpu(x), gpu(w), gpu(wu), LinearForm::Flat));
  Tensor dy = randomTensor({2, 9, 40}, 84);
  for (int micro = 0; micro < 2; ++micro) {
    accumulate_linear_grad_weight(c, dy, x, w, "proj.weight", -1, false);
    accumulate_linear_grad_weight(g, gpu(dy), gpu(x), gpu(w), "proj.weight", -1,
                                  false);
  }
  expectClose("accumulate_linear_grad_weight in FP32",
              c.grads()["proj.weight"].grad, g.grads()["proj.weight"].grad);

  // The loss over three blocks of positions.
  int64_t vocab = 65543;
  Tensor hidden = randomTensor({2, 600, 16}, 85),
         head = randomTensor({vocab, 16}, 86, -0.5f, 0.5f);
  Tensor ids = randomIds({2, 600}, vocab, 87), mask = paddingMask(2, 600, 37);
  Tensors lc = linear_cross_entropy(c, hidden, head, ids, mask);
  Tensors lg =
      linear_cross_entropy(g, gpu(hidden), gpu(head), gpu(ids), gpu(mask));
  const char *parts[] = {"loss", "dx", "dw"};
  for (int i = 0; i < 3; ++i)
    expectClose(std::string("linear_cross_entropy in blocks ") + parts[i],
                lc[i], lg[i]);

  // One rank's uneven block: 257 of 300 rows, the padding rows zeros.
  std::vector<int64_t> starts = {0}, sizes = {257};
  Tensor x2 = randomTensor({2, 10, 16}, 88), held = randomTensor({300, 16}, 89);
  for (int64_t i = 257 * 16; i < held.numel(); ++i)
    held.f32()[i] = 0.0f;
  Tensor labels = randomIds({2, 10}, 257, 90), keep = paddingMask(2, 10, 4);
  lc = linear_cross_entropy_vocab_parallel(c, x2, held, labels, keep, starts,
                                           sizes);
  lg = linear_cross_entropy_vocab_parallel(g, gpu(x2), gpu(held), gpu(labels),
                                           gpu(keep), starts, sizes);
  for (int i = 0; i < 3; ++i)
    expectClose(std::string("linear_cross_entropy_vocab_parallel uneven ") +
                    parts[i],
                lc[i], lg[i]);

  // Autocast: both sides round x, w and the logits' gradient to bf16.
  Tensor x3 = randomTensor({2, 10, 16}, 91), w3 = randomTensor({300, 16}, 92);
  Tensor ids3 = randomIds({2, 10}, 300, 93);
  lc = linear_cross_entropy(c16, x3, w3, ids3, keep);
  lg = linear_cross_entropy(g16, gpu(x3), gpu(w3), gpu(ids3), gpu(keep));
  for (int i = 0; i < 3; ++i)
    expectClose(std::string("linear_cross_entropy autocast bf16 ") + parts[i],
                lc[i], lg[i], 1e-2);

  // A bf16 program's loss, fused in blocks on the GPU, against the CPU's
  // separate bf16 calls (the logits and their gradient rounded to bf16 on
  // both sides; dw summed in f32 here, rounded once): and in the
  // accumulating form, into the FP32 buffer.
  Tensor x4 = randomTensor({2, 600, 16}, 94).to(DType::BF16),
         w4 = randomTensor({vocab, 16}, 95, -0.5f, 0.5f).to(DType::BF16);
  lc = linear_cross_entropy(c, x4, w4, ids, mask);
  lg = linear_cross_entropy(g, gpu(x4), gpu(w4), gpu(ids), gpu(mask));
  for (int i = 0; i < 3; ++i)
    expectClose(std::string("linear_cross_entropy bf16 program ") + parts[i],
                lc[i], lg[i], i == 0 ? 1e-4 : 1e-2);
  Tensor gw4 = gpu(w4);
  accumulate_linear_cross_entropy(g, gpu(x4), gw4, gpu(ids), gpu(mask),
                                  "head16.weight", -1, false, false, {}, {});
  expectClose("accumulate_linear_cross_entropy bf16 program dw in FP32",
              lc[2].to(DType::F32), g.grads()["head16.weight"].grad, 1e-2);
}

} // namespace

/// An all-reduce that the stream reaches only after a host function has
/// slept 8 s, with a timeout of 1 s: the watchdog must stop the program
/// naming it, with a non-zero exit, long before the sleep ends
/// (bench/device_check.py checks the message).
int stuckCollective() {
#ifdef TPRT_WITH_CUDA
  Context dev(0, 1, "/nonexistent/model.onnx", "model.onnx");
  dev.setDevice(Device::CUDA);
  dev.setCollectiveTimeout(1);
  Tensor x = gpu(randomTensor({1024}, 3));
  cuda::check(
      cudaLaunchHostFunc(
          cuda::stream(),
          [](void *) { std::this_thread::sleep_for(std::chrono::seconds(8)); },
          nullptr),
      "cudaLaunchHostFunc");
  dev.tp().allReduceSum(x.f32(), x.numel());
  cuda::synchronize();
#endif
  std::printf("FAIL: the stuck all-reduce ended without the watchdog\n");
  return 1;
}

#ifdef TPRT_WITH_CUDA
/// An entry point of the (ids, mask) form whose rotary tables depend on the
/// ids' length: the embedding of the ids, rotated.
Tensor graphTable;
Tensor embedAndRotate(Context &ctx, Tensor ids, Tensor) {
  return rotary(ctx, embedding(ctx, ids, graphTable), 32, 32, 10000.0, false,
                int64_t(RopeType::Default), 8.0, 1.0, 4.0, 64, 32.0, 1.0, true,
                1.1, false, {}, {});
}
#endif

/// Calls of nine lengths through cuda::EntryGraphs, each result against the
/// same call made eagerly: eight keys replay their own graphs side by side,
/// a graph still reads its RoPE tables after the GPU's cache of tables (four
/// pairs) dropped them, and the ninth key runs eagerly.
void testEntryGraphs(Context &g) {
#ifdef TPRT_WITH_CUDA
  graphTable = gpu(randomTensor({50, 4 * 32}, 41));
  cuda::EntryGraphs graphs(embedAndRotate, "the test's entry point");
  std::vector<int64_t> lengths = {3, 5, 7, 9, 11, 13, 15, 17, 19};
  unsigned seed = 100;
  double worst = 0;
  bool shapesAgree = true;
  auto call = [&](int64_t length) {
    Tensor ids = randomIds({1, length}, 50, ++seed);
    Tensor got = graphs.run(g, gpu(ids), {}).to(Device::CPU);
    Tensor expected = embedAndRotate(g, gpu(ids), {}).to(Device::CPU);
    if (got.shape() != expected.shape()) {
      shapesAgree = false;
      return;
    }
    for (int64_t i = 0; i < got.numel(); ++i)
      worst =
          std::max(worst, double(std::fabs(got.f32()[i] - expected.f32()[i])));
  };
  // The first length captured, then every other one warmed up and
  // captured (their tables push the first's out of the cache).
  call(lengths[0]);
  call(lengths[0]);
  for (size_t i = 1; i < lengths.size(); ++i) {
    call(lengths[i]);
    call(lengths[i]);
  }
  for (int round = 0; round < 3; ++round)
    for (int64_t length : lengths)
      call(length);
  ++checks;
  bool ok = shapesAgree && worst == 0 && graphs.captured() == 8;
  failures += !ok;
  std::printf("%s cuda graphs of nine lengths: %zu captured (want 8), "
              "largest difference from the eager calls %.2e%s\n",
              ok ? "ok" : "FAIL", graphs.captured(), worst,
              shapesAgree ? "" : ", shapes differ");
  std::fflush(stdout);
  graphTable = Tensor();
#else
  (void)g;
#endif
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  if (!cudaBackendBuilt() || std::system("nvidia-smi -L >/dev/null 2>&1")) {
    std::printf("skipped: no GPU (%s)\n", cudaBackendBuilt()
                                              ? "nvidia-smi finds none"
                                              : "built without CUDA");
    MPI_Finalize();
    return 77;
  }
  if (argc > 1 && std::string(argv[1]) == "--stuck-collective")
    return stuckCollective();
  Context cpu(0, 1, "/nonexistent/model.onnx", "model.onnx");
  Context dev(0, 1, "/nonexistent/model.onnx", "model.onnx");
  dev.setDevice(Device::CUDA);
  Context bf16(0, 1, "/nonexistent/model.onnx", "model.onnx");
  bf16.setDevice(Device::CUDA);
  bf16.setAutocast(DType::BF16);
  Context cpuBf16(0, 1, "/nonexistent/model.onnx", "model.onnx");
  cpuBf16.setAutocast(DType::BF16);
  testElementwise(cpu, dev);
  testLinear(cpu, dev);
  testAutocast(cpu, bf16);
  testEmbeddingAndNorm(cpu, dev);
  testRotary(cpu, dev);
  testAttention(cpu, dev);
  testLoss(cpu, dev);
  testMamba2(cpu, dev);
  // Not yet run on a GPU when written (docs/gpu.md): last, so that an
  // error stopping the program leaves the checks above reported.
  testBf16Programs(cpu, dev);
  testFusedCalls(cpu, dev, cpuBf16, bf16);
  testNativeReduced(dev);
  testFusedAttention(cpu, dev);
  testBuckets(cpu, dev);
  testCopies();
  testBucketSync();
  testOptimizer();
  testEntryGraphs(dev);
  std::printf("%s: %d of %d checks failed\n", failures ? "FAIL" : "ok",
              failures, checks);
  MPI_Finalize();
  return failures ? 1 : 0;
}
