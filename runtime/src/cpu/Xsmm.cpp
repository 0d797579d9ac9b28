//===- Xsmm.cpp - f32 linears on weights packed once, libxsmm kernels -----===//
//
// The weight [outF, in] row-major is packed into panels of kPanel output
// features, each [in][kPanel]: the column-major kPanel x in matrix A of
// libxsmm's C = A B, whose B is x's block read in place (column-major
// in x rows, leading dimension in) and whose C is out's block (leading
// dimension outF). A panel's depth slice (kPanel x kDepth floats, 128 KiB)
// stays in L2 while the rows of x stream past it.
//
//===----------------------------------------------------------------------===//

#include "Xsmm.h"

#include "WeightFormCache.h"
#include "tprt/tprt.h"

#include <libxsmm.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace tprt::cpu {

namespace {

/// Output features per panel: four AVX2 vectors (on this project's AVX2
/// machine 32 ran the forward's shapes fastest of 16, 24, 32, 40, 48, 64
/// and 96 in a scratch benchmark).
constexpr int64_t kPanel = 32;
constexpr int64_t kRowBlock = 128;
constexpr int64_t kDepth = 1024;
/// Below this many multiply-adds a product runs on the calling thread
/// (waking the team costs more than it saves).
constexpr int64_t kParallelWork = 1 << 18;

struct Panels {
  std::unique_ptr<float, decltype(&std::free)> data{nullptr, &std::free};
};

const float *packedPanels(const Tensor &w) {
  static WeightFormCache<Panels> cache;
  return cache
      .get(
          w, [](const Panels &) { return true; },
          [&] {
            int64_t outF = w.dim(0), in = w.dim(1);
            int64_t panels = (outF + kPanel - 1) / kPanel;
            size_t bytes = panels * in * kPanel * sizeof(float);
            Panels p;
            p.data.reset(static_cast<float *>(
                std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
            if (!p.data)
              fatal("cannot allocate " + std::to_string(bytes) +
                    " bytes for a packed weight");
            float *dst = p.data.get();
            const float *src = w.f32();
            // The last panel's columns past outF are zeros.
            std::memset(dst, 0, bytes);
#pragma omp parallel for schedule(static) if (outF * in > kParallelWork)
            for (int64_t q = 0; q < panels; ++q)
              for (int64_t j = 0; j < std::min(kPanel, outF - q * kPanel); ++j)
                for (int64_t k = 0; k < in; ++k)
                  dst[(q * in + k) * kPanel + j] =
                      src[(q * kPanel + j) * in + k];
            return p;
          })
      .data.get();
}

libxsmm_smmfunction kernel(int64_t n, int64_t m, int64_t k, int64_t in,
                           int64_t outF, float beta) {
  libxsmm_blasint lda = kPanel, ldb = in, ldc = outF;
  float alpha = 1.0f;
  int flags = LIBXSMM_GEMM_FLAGS('N', 'N'), prefetch = LIBXSMM_PREFETCH_NONE;
  return libxsmm_smmdispatch(n, m, k, &lda, &ldb, &ldc, &alpha, &beta, &flags,
                             &prefetch);
}

void initialize() {
  static const bool done = [] {
    libxsmm_init();
    return true;
  }();
  (void)done;
}

} // namespace

bool xsmmAvailable() {
  initialize();
  return libxsmm_get_target_archid() >= LIBXSMM_X86_AVX2 &&
         kernel(kPanel, kRowBlock, 512, 512, 512, 0.0f) != nullptr;
}

const char *xsmmVersion() { return LIBXSMM_VERSION; }

bool xsmmLinear(const Tensor &w, const float *x, float *out, int64_t rows,
                float beta) {
  initialize();
  int64_t outF = w.dim(0), in = w.dim(1);
  if (rows == 0 || outF == 0)
    return true;
  // Every kernel the blocks take, [panel tail][row tail][depth tail][later
  // depth block], made before any is run.
  libxsmm_smmfunction kernels[2][2][2][2] = {};
  for (int nt = 0; nt < 2; ++nt)
    for (int mt = 0; mt < 2; ++mt)
      for (int kt = 0; kt < 2; ++kt)
        for (int later = 0; later < 2; ++later) {
          int64_t n = nt ? outF % kPanel : std::min(kPanel, outF);
          int64_t m = mt ? rows % kRowBlock : std::min(kRowBlock, rows);
          int64_t k = kt ? in % kDepth : std::min(kDepth, in);
          if (n == 0 || m == 0 || k == 0 || (later && in <= kDepth))
            continue;
          kernels[nt][mt][kt][later] =
              kernel(n, m, k, in, outF, later ? 1.0f : beta);
          if (!kernels[nt][mt][kt][later])
            return false;
        }
  const float *panels = packedPanels(w);
  int64_t panelCount = (outF + kPanel - 1) / kPanel;
  int64_t rowBlocks = (rows + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for collapse(2)                                           \
    schedule(static) if (rows * outF * in > kParallelWork)
  for (int64_t q = 0; q < panelCount; ++q)
    for (int64_t r = 0; r < rowBlocks; ++r) {
      int nt = (q + 1) * kPanel > outF && outF % kPanel;
      int mt = (r + 1) * kRowBlock > rows && rows % kRowBlock;
      for (int64_t k0 = 0; k0 < in; k0 += kDepth) {
        int kt = k0 + kDepth > in && in % kDepth;
        kernels[nt][mt][kt][k0 > 0](panels + (q * in + k0) * kPanel,
                                    x + r * kRowBlock * in + k0,
                                    out + r * kRowBlock * outF + q * kPanel);
      }
    }
  return true;
}

} // namespace tprt::cpu
