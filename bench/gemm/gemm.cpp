//===- gemm.cpp - single-core sgemm: peak, and the forward's projections --===//
//
// On one thread (--threads to change it), in alternating rounds (medians),
// the runtime's products (tprt::cpu::linear: oneDNN's matmul, weights
// packed once, as a forward-only program runs them) against OpenBLAS's
// cblas_sgemm (what the runtime used before):
//   - large square products, and each projection shape of a decoder's
//     forward (q, k, o, gate, down, the LM head) alone, its weight warm in
//     cache: the best rate of either library on any of them is the
//     machine's measured single-core sgemm peak;
//   - the forward's projections as the forward runs them: every layer's
//     seven products, then the LM head, each with its own weight, so that
//     weights come from memory as they do in the program. Its rate over the
//     peak is the fraction docs/runtime.md reports. Then the same with the
//     sibling projections fused (q/k/v and gate/up as one product each).
// Defaults are the medium Llama of bench/forward (hidden 512, 4 layers, 8
// heads of 64, 4 KV heads, MLP 1408, vocab 4096) at 128 rows.
//
//===----------------------------------------------------------------------===//

#include "cpu/Gemm.h"
#include "tprt/tprt.h"

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <omp.h>
#include <string>
#include <vector>

namespace {

struct Options {
  int64_t hidden = 512, layers = 4, heads = 8, kvHeads = 4, headDim = 64,
          mlp = 1408, vocab = 4096, rows = 128, rounds = 15, threads = 1;
};

double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

tprt::Tensor filled(std::vector<int64_t> shape, float seed) {
  tprt::Tensor t = tprt::Tensor::uninitialized(tprt::DType::F32, shape);
  float *p = t.f32();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = 0.01f * static_cast<float>((i * 7919 + 13) % 201 - 100) + seed;
  return t;
}

/// Median seconds of `reps` calls of each function, the two interleaved
/// round by round so that drifts of the machine hit both alike.
std::pair<double, double> race(const std::function<void()> &a,
                               const std::function<void()> &b, int rounds,
                               int reps) {
  a();
  b();
  std::vector<double> ta, tb;
  for (int r = 0; r < rounds; ++r) {
    double start = seconds();
    for (int i = 0; i < reps; ++i)
      a();
    ta.push_back((seconds() - start) / reps);
    start = seconds();
    for (int i = 0; i < reps; ++i)
      b();
    tb.push_back((seconds() - start) / reps);
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return {ta[ta.size() / 2], tb[tb.size() / 2]};
}

struct Product {
  std::string name;
  int64_t out, in;
};

/// out[rows, w.out] = x[rows, w.in] w^T, by each library.
void ours(const tprt::Tensor &w, const tprt::Tensor &x, tprt::Tensor &out,
          int64_t rows) {
  tprt::cpu::linear(w, x.f32(), out.f32(), 1, rows, /*packed=*/true);
}
void openblas(const tprt::Tensor &w, const tprt::Tensor &x, tprt::Tensor &out,
              int64_t rows) {
  int64_t outF = w.dim(0), in = w.dim(1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, outF, in, 1.0f,
              x.f32(), in, w.f32(), in, 0.0f, out.f32(), outF);
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string arg = argv[i];
    int64_t v = std::atoll(argv[i + 1]);
    if (v <= 0) {
      std::fprintf(stderr, "gemm: %s needs a positive integer\n", arg.c_str());
      return 2;
    }
    const std::pair<const char *, int64_t *> options[] = {
        {"--hidden", &o.hidden},    {"--layers", &o.layers},
        {"--heads", &o.heads},      {"--kv-heads", &o.kvHeads},
        {"--head-dim", &o.headDim}, {"--mlp", &o.mlp},
        {"--vocab", &o.vocab},      {"--rows", &o.rows},
        {"--rounds", &o.rounds},    {"--threads", &o.threads}};
    int64_t *field = nullptr;
    for (auto [name, target] : options)
      if (arg == name)
        field = target;
    if (field)
      *field = v;
    else {
      std::fprintf(stderr,
                   "usage: gemm [--hidden H] [--layers L] [--heads N] "
                   "[--kv-heads K] [--head-dim D] [--mlp M] [--vocab V] "
                   "[--rows R] [--rounds N] [--threads T]\n");
      return 2;
    }
  }
  if ((argc - 1) % 2) {
    std::fprintf(stderr, "gemm: %s needs a value\n", argv[argc - 1]);
    return 2;
  }
  int threads = static_cast<int>(o.threads);
  omp_set_num_threads(threads);
  tprt::cpu::setThreads(threads);
  openblas_set_num_threads(threads);
  int rounds = static_cast<int>(o.rounds);
  auto gflops = [](double flop, double s) { return flop / s / 1e9; };

  std::printf("bench/gemm: %d thread(s), %s against %s, medians of %d "
              "alternating rounds\n\n",
              threads, tprt::cpu::gemmLibrary(), openblas_get_config(), rounds);
  std::printf("| product | m x k x n | tprt (GFLOPS) | OpenBLAS (GFLOPS) | "
              "speed-up of tprt |\n|---|---|---|---|---|\n");

  double peak = 0;
  for (int64_t n : {1024, 2048}) {
    tprt::Tensor w = filled({n, n}, 0.f), x = filled({n, n}, 1.f),
                 out = filled({n, n}, 0.f);
    auto [a, b] = race([&] { ours(w, x, out, n); },
                       [&] { openblas(w, x, out, n); }, rounds, 1);
    double flop = 2.0 * n * n * n;
    peak = std::max({peak, gflops(flop, a), gflops(flop, b)});
    std::printf("| square | %lld x %lld x %lld | %.1f | %.1f | %.2f |\n",
                (long long)n, (long long)n, (long long)n, gflops(flop, a),
                gflops(flop, b), b / a);
  }

  int64_t h = o.hidden, q = o.heads * o.headDim, kv = o.kvHeads * o.headDim;
  std::vector<Product> layer = {{"q_proj", q, h},        {"k_proj", kv, h},
                                {"v_proj", kv, h},       {"o_proj", h, q},
                                {"gate_proj", o.mlp, h}, {"up_proj", o.mlp, h},
                                {"down_proj", h, o.mlp}};
  Product head{"lm_head", o.vocab, h};
  std::vector<Product> shapes = {layer[0], layer[1], layer[3],
                                 layer[4], layer[6], head};
  for (const Product &p : shapes) {
    tprt::Tensor w = filled({p.out, p.in}, 0.f),
                 x = filled({o.rows, p.in}, 1.f),
                 out = filled({o.rows, p.out}, 0.f);
    auto [a, b] = race([&] { ours(w, x, out, o.rows); },
                       [&] { openblas(w, x, out, o.rows); }, rounds, 5);
    double flop = 2.0 * o.rows * p.in * p.out;
    peak = std::max({peak, gflops(flop, a), gflops(flop, b)});
    std::printf("| %s alone | %lld x %lld x %lld | %.1f | %.1f | %.2f |\n",
                p.name.c_str(), (long long)o.rows, (long long)p.in,
                (long long)p.out, gflops(flop, a), gflops(flop, b), b / a);
  }

  // The forward's sequence, each product with its own weight; and the same
  // with sibling projections fused (q/k/v, gate/up: one product over the
  // concatenated weights), what a fusion pass would give the library.
  auto sequenceOf = [&](const std::vector<Product> &perLayer) {
    std::vector<Product> sequence;
    for (int64_t l = 0; l < o.layers; ++l)
      sequence.insert(sequence.end(), perLayer.begin(), perLayer.end());
    sequence.push_back(head);
    return sequence;
  };
  std::vector<Product> fusedLayer = {{"qkv_proj", q + 2 * kv, h},
                                     {"o_proj", h, q},
                                     {"gate_up_proj", 2 * o.mlp, h},
                                     {"down_proj", h, o.mlp}};
  double forwardRate = 0, forwardMs = 0, forwardFlop = 0, openblasRate = 0,
         openblasMs = 0;
  for (bool fused : {false, true}) {
    std::vector<Product> sequence = sequenceOf(fused ? fusedLayer : layer);
    std::vector<tprt::Tensor> weights, inputs, outputs;
    double flop = 0;
    for (const Product &p : sequence) {
      weights.push_back(filled({p.out, p.in}, 0.f));
      inputs.push_back(filled({o.rows, p.in}, 1.f));
      outputs.push_back(filled({o.rows, p.out}, 0.f));
      flop += 2.0 * o.rows * p.in * p.out;
    }
    auto all = [&](auto product) {
      return [&, product] {
        for (size_t i = 0; i < sequence.size(); ++i)
          product(weights[i], inputs[i], outputs[i], o.rows);
      };
    };
    auto [a, b] = race(all(ours), all(openblas), rounds, 1);
    std::printf("| the forward's %zu projections in order%s | %lld rows | "
                "%.1f | %.1f | %.2f |\n",
                sequence.size(), fused ? ", siblings fused" : "",
                (long long)o.rows, gflops(flop, a), gflops(flop, b), b / a);
    if (!fused) {
      forwardRate = gflops(flop, a);
      forwardMs = 1e3 * a;
      forwardFlop = flop;
      openblasRate = gflops(flop, b);
      openblasMs = 1e3 * b;
    } else {
      std::printf("\nsingle-core sgemm peak (the best rate above): %.1f "
                  "GFLOPS\nthe forward's projections reach %.0f%% of it "
                  "with tprt (%.2f ms for %.2f GFLOP), %.0f%% with OpenBLAS "
                  "(%.2f ms); with siblings fused %.0f%% (%.2f ms)\n",
                  peak, 100 * forwardRate / peak, forwardMs, forwardFlop / 1e9,
                  100 * openblasRate / peak, openblasMs,
                  100 * gflops(flop, a) / peak, 1e3 * a);
    }
  }
  return 0;
}
