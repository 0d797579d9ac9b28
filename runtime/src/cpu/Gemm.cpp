//===- Gemm.cpp - the CPU matrix products ---------------------------------===//
//
// With oneDNN: the linear forms and their backward are matmul primitives,
// made once per shape and kept (making one costs tens of microseconds, a
// small product a few); a packed weight is reordered once into the layout
// the primitive asks for and kept while the weight's allocation lives.
// Small products inside parallel regions (attention, one per head) are
// dnnl_sgemm, which runs on the calling thread there. Without oneDNN all of
// them are cblas_sgemm, and so are the f32 linear forms and backward
// products where oneDNN's matmul packs no weight (TPRT_GEMM below).
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "tprt/tprt.h"

#include <string>
#include <vector>

#ifdef TPRT_WITH_ONEDNN
#include "Dnnl.h"
#include "Mkl.h"
#include "WeightFormCache.h"

#ifdef TPRT_WITH_OPENBLAS_FALLBACK
#include <cblas.h>
#endif
#ifdef TPRT_WITH_XSMM
#include "Xsmm.h"
#endif

#include <cstdlib>

#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#else
#include <cblas.h>
#endif

namespace tprt::cpu {

void roundToBf16(const float *x, uint16_t *out, int64_t n) {
#pragma omp parallel for if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    out[i] = floatToBf16(x[i]);
}

namespace {
/// `x` as given, or its values rounded to bf16 (kept as f32: their
/// products are exact in f32, so an f32 product of them computes what a
/// bf16 product with f32 accumulation does: OpenBLAS, and autocast where
/// oneDNN has no bf16 matmul).
const float *rounded(const float *x, int64_t n, bool toBf16,
                     std::vector<float> &copy) {
  if (!toBf16)
    return x;
  copy.resize(n);
  for (int64_t i = 0; i < n; ++i)
    copy[i] = bf16ToFloat(floatToBf16(x[i]));
  return copy.data();
}
} // namespace

#ifdef TPRT_WITH_ONEDNN

namespace {
using dnnl::matmul;
using dnnl::memory;
using Dims = memory::dims;

memory::desc f32(const Dims &dims, const Dims &strides) {
  return memory::desc(dims, memory::data_type::f32, strides);
}

memory::desc f32Any(const Dims &dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}
memory::desc bf16(const Dims &dims, const Dims &strides) {
  return memory::desc(dims, memory::data_type::bf16, strides);
}
memory::desc bf16Any(const Dims &dims) {
  return memory::desc(dims, memory::data_type::bf16, memory::format_tag::any);
}
/// A matrix operand: f32 as given, or rounded to bf16 into `copy`.
memory operand(const memory::desc &f32Desc, const memory::desc &bf16Desc,
               const float *data, int64_t elements, bool toBf16,
               std::vector<uint16_t> &copy) {
  if (!toBf16)
    return memory(f32Desc, dnnlEngine(), const_cast<float *>(data));
  copy.resize(elements);
  roundToBf16(data, copy.data(), elements);
  return memory(bf16Desc, dnnlEngine(), copy.data());
}

matmul::primitive_desc
matmulDesc(const memory::desc &src, const memory::desc &weights,
           const memory::desc &dst,
           const dnnl::primitive_attr &attr = dnnl::primitive_attr()) {
#if DNNL_VERSION_MAJOR >= 3
  return matmul::primitive_desc(dnnlEngine(), src, weights, dst, attr);
#else
  return matmul::primitive_desc(matmul::desc(src, weights, dst), attr,
                                dnnlEngine());
#endif
}

[[noreturn]] void fail(const char *what, const dnnl::error &e) {
  fatal(std::string("oneDNN ") + what + " failed: " + e.what());
}

/// Primitives by (kind, batch, m, n, k): every call site has fixed strides
/// for a given shape, so the shape is the key.
struct Primitive {
  matmul::primitive_desc desc;
  matmul prim;
};
using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t>;
std::mutex cacheMutex;
std::map<Key, Primitive> primitives;

template <typename MakeDesc>
Primitive &primitiveFor(const Key &key, MakeDesc makeDesc) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto it = primitives.find(key);
  if (it != primitives.end())
    return it->second;
  try {
    matmul::primitive_desc desc = makeDesc();
    return primitives.emplace(key, Primitive{desc, matmul(desc)}).first->second;
  } catch (const dnnl::error &e) {
    fail("matmul creation", e);
  }
}

/// A weight in a primitive's preferred layout (WeightFormCache.h).
struct PackedWeight {
  memory::desc layout;
  memory packed;
};

const memory &packedWeight(const Tensor &w, const memory::desc &plainLayout,
                           const memory::desc &layout) {
  static WeightFormCache<PackedWeight> cache;
  return cache
      .get(
          w, [&](const PackedWeight &p) { return p.layout == layout; },
          [&] {
            try {
              memory plain(plainLayout, dnnlEngine(),
                           const_cast<void *>(w.raw()));
              memory packed(layout, dnnlEngine());
              dnnl::reorder(plain, packed).execute(dnnlStream(), plain, packed);
              dnnlStream().wait();
              return PackedWeight{layout, packed};
            } catch (const dnnl::error &e) {
              fail("weight reorder", e);
            }
          })
      .packed;
}

void run(Primitive &p, const memory &src, const memory &weights,
         const memory &dst, std::unordered_map<int, memory> args = {}) {
  args.insert(
      {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
  try {
    p.prim.execute(dnnlStream(), args);
    dnnlStream().wait();
  } catch (const dnnl::error &e) {
    fail("matmul", e);
  }
}

enum Kind {
  Linear,
  LinearPacked,
  GradInput,
  GradWeight,
  LinearBf16,
  LinearBf16Packed,
  GradInputBf16,
  GradWeightBf16
};

/// Keys whose primitive the library could not make, or only as its slow
/// reference code (cacheMutex).
std::set<Key> unavailable;

/// A primitive made on first use, as primitiveFor; null when this machine's
/// oneDNN has none (bf16 products below AVX-512), or with `rejectReference`
/// only its reference code (which takes any post-op, at a fraction of the
/// speed). The callers then compute another way.
template <typename MakeDesc>
Primitive *optionalPrimitive(const Key &key, MakeDesc makeDesc,
                             bool rejectReference = false) {
  std::lock_guard<std::mutex> lock(cacheMutex);
  if (unavailable.count(key))
    return nullptr;
  auto it = primitives.find(key);
  if (it == primitives.end()) {
    try {
      matmul::primitive_desc desc = makeDesc();
      if (rejectReference &&
          std::string(desc.impl_info_str()).rfind("ref", 0) == 0) {
        unavailable.insert(key);
        return nullptr;
      }
      it = primitives.emplace(key, Primitive{desc, matmul(desc)}).first;
    } catch (const dnnl::error &) {
      unavailable.insert(key);
      return nullptr;
    }
  }
  return &it->second;
}

/// A primitive of bf16 operands and result (null as above: the callers
/// then widen).
Primitive *bf16Primitive(const Key &key, const memory::desc &src,
                         const memory::desc &weights, const memory::desc &dst) {
  return optionalPrimitive(key, [&] { return matmulDesc(src, weights, dst); });
}
/// Added to the kind of a product whose operands are rounded to bf16.
constexpr int kBf16 = 8;
/// Times (1 + the epilogue), added to the kind of a linear with one.
constexpr int kEpilogue = 16;
/// Added to the kind of a backward product that adds into its result.
constexpr int kAccumulate = 64;

/// Where the f32 products go (TPRT_GEMM).
enum class F32Library { OneDnn, OpenBlas, Mkl, Xsmm };
F32Library f32Library();

/// The eltwise (for SiLU) and binary post-ops of an epilogue on a result of
/// `dst`'s layout; the binary one is the last.
dnnl::primitive_attr epilogueAttr(Epilogue epilogue, const memory::desc &dst) {
  dnnl::post_ops ops;
  if (epilogue == Epilogue::SiluMul) {
    // x sigmoid(alpha x) with alpha 1: the algorithm of the separate silu.
#if DNNL_VERSION_MAJOR >= 3
    ops.append_eltwise(dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
#else
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
#endif
  }
  ops.append_binary(epilogue == Epilogue::Add ? dnnl::algorithm::binary_add
                                              : dnnl::algorithm::binary_mul,
                    dst);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  return attr;
}
} // namespace

bool linearEpilogue(const Tensor &w, const void *x, const void *other,
                    void *out, int64_t batch, int64_t rows, bool packed,
                    bool bf16Data, Epilogue epilogue) {
  if (!bf16Data && f32Library() != F32Library::OneDnn)
    return false; // the separate ops after the other library's product
  int64_t outF = w.dim(0), in = w.dim(1);
  Dims src = {batch, rows, in}, wei = {1, in, outF}, dst = {batch, rows, outF};
  Dims srcStrides = {rows * in, in, 1}, dstStrides = {rows * outF, outF, 1};
  auto desc = [&](const Dims &dims, const Dims &strides) {
    return bf16Data ? bf16(dims, strides) : f32(dims, strides);
  };
  memory::desc srcDesc = desc(src, srcStrides), dstDesc = desc(dst, dstStrides),
               plainWeight = desc(wei, {in * outF, 1, in});
  int kind = (packed ? LinearPacked : Linear) + (bf16Data ? kBf16 : 0) +
             kEpilogue * (1 + static_cast<int>(epilogue));
  Primitive *p = optionalPrimitive(
      {kind, batch, rows, outF, in},
      [&] {
        return matmulDesc(srcDesc,
                          packed ? (bf16Data ? bf16Any(wei) : f32Any(wei))
                                 : plainWeight,
                          dstDesc, epilogueAttr(epilogue, dstDesc));
      },
      /*rejectReference=*/true); // the separate ops are faster than it
  if (!p)
    return false;
  int binaryIndex = epilogue == Epilogue::SiluMul ? 1 : 0;
  memory srcMem(srcDesc, dnnlEngine(), const_cast<void *>(x));
  memory dstMem(dstDesc, dnnlEngine(), out);
  memory otherMem(dstDesc, dnnlEngine(), const_cast<void *>(other));
  std::unordered_map<int, memory> args{
      {DNNL_ARG_ATTR_MULTIPLE_POST_OP(binaryIndex) | DNNL_ARG_SRC_1, otherMem}};
  if (packed)
    run(*p, srcMem, packedWeight(w, plainWeight, p->desc.weights_desc()),
        dstMem, args);
  else
    run(*p, srcMem,
        memory(plainWeight, dnnlEngine(), const_cast<void *>(w.raw())), dstMem,
        args);
  return true;
}

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc) {
  dnnl_status_t status = dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m,
                                    n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    fatal("dnnl_sgemm failed (status " + std::to_string(status) + ")");
}

namespace {
/// Whether this machine's oneDNN multiplies bf16 operands into an f32
/// result other than by its reference code (oneDNN 2.x does not below
/// AVX-512).
bool bf16ProductsAvailable() {
  static const bool available = [] {
    try {
      Dims dims = {1, 16, 16};
      matmul::primitive_desc pd =
          matmulDesc(bf16(dims, {256, 16, 1}), bf16(dims, {256, 16, 1}),
                     f32(dims, {256, 16, 1}));
      return std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
    } catch (const dnnl::error &) {
      return false;
    }
  }();
  return available;
}

#ifdef TPRT_WITH_OPENBLAS_FALLBACK
/// Whether oneDNN's f32 matmul on this machine is its brgemm kernel, which
/// packs weights (oneDNN 2.x has it from AVX-512 up; below, its matmul is
/// `gemm:jit`, which packs nothing).
bool brgemmMatmul() {
  try {
    memory::desc rows = f32({1, 128, 512}, {128 * 512, 512, 1});
    matmul::primitive_desc pd = matmulDesc(rows, f32Any({1, 512, 512}), rows);
    return std::string(pd.impl_info_str()).rfind("brg", 0) == 0;
  } catch (const dnnl::error &) {
    return false;
  }
}
#endif

/// MKL, which TPRT_GEMM=mkl requires.
const Mkl &requiredMkl() {
  std::string why;
  if (const Mkl *api = mkl(&why))
    return *api;
  fatal("TPRT_GEMM=mkl: cannot open Intel MKL (scripts/setup.sh installs it "
        "into .venv): " +
        why);
}

/// Where the f32 products go. TPRT_GEMM chooses: `onednn`, `openblas`,
/// `mkl`, `xsmm` (packed weights on libxsmm's kernels, the rest on
/// OpenBLAS), or `auto` (the default): MKL on Intel CPUs where it can be
/// opened, else libxsmm or OpenBLAS where oneDNN's matmul is not brgemm,
/// else oneDNN.
/// On an AVX2 machine OpenBLAS ran the forward at 0.88 to 0.93 of oneDNN
/// 2.6's gemm:jit time on one and two threads; on AVX-512 machines oneDNN's
/// packed brgemm ran the projections at 1.9x OpenBLAS's rate, and on a
/// Sapphire Rapids core MKL's packed sgemm at 1.2x oneDNN's; on an AMD
/// EPYC MKL was slower than OpenBLAS (docs/runtime.md).
F32Library f32Library() {
  static const F32Library library = [] {
    const char *env = std::getenv("TPRT_GEMM");
    std::string choice = env && *env ? env : "auto";
    if (choice == "auto") {
      __builtin_cpu_init();
      if (__builtin_cpu_is("intel") && mkl())
        return F32Library::Mkl;
#ifdef TPRT_WITH_OPENBLAS_FALLBACK
      if (!brgemmMatmul()) {
#ifdef TPRT_WITH_XSMM
        if (xsmmAvailable())
          return F32Library::Xsmm;
#endif
        return F32Library::OpenBlas;
      }
#endif
      return F32Library::OneDnn;
    }
    if (choice == "onednn")
      return F32Library::OneDnn;
    if (choice == "mkl") {
      requiredMkl();
      return F32Library::Mkl;
    }
#ifdef TPRT_WITH_OPENBLAS_FALLBACK
    if (choice == "openblas")
      return F32Library::OpenBlas;
#endif
#ifdef TPRT_WITH_XSMM
    if (choice == "xsmm") {
      if (!xsmmAvailable())
        fatal("TPRT_GEMM=xsmm: libxsmm generates no kernels on this CPU "
              "(it needs x86 with AVX2)");
      return F32Library::Xsmm;
    }
#endif
#ifdef TPRT_WITH_XSMM
    fatal("TPRT_GEMM=" + choice +
          ": expected auto, onednn, mkl, xsmm or openblas");
#else
    fatal("TPRT_GEMM=" + choice + ": expected auto, onednn, mkl or openblas");
#endif
  }();
  return library;
}

/// Whether cblas_sgemm runs the f32 products (with libxsmm, all but the
/// packed weights' linears).
bool f32OnOpenBlas() {
  return f32Library() == F32Library::OpenBlas ||
         f32Library() == F32Library::Xsmm;
}

/// A weight packed by MKL for products of `rows` rows (the packed form's
/// size and layout may depend on them); one per weight, replaced when the
/// row count changes.
struct MklPackedWeight {
  int64_t rows;
  std::unique_ptr<float, decltype(&std::free)> data{nullptr, &std::free};
};

const float *mklPackedWeight(const Mkl &api, const Tensor &w, int64_t rows) {
  static WeightFormCache<MklPackedWeight> cache;
  auto make = [&] {
    int64_t outF = w.dim(0), in = w.dim(1);
    size_t bytes = api.sgemmPackGetSize(kMklBMatrix, rows, outF, in);
    // 64-byte aligned, as MKL asks of a packed buffer.
    MklPackedWeight p{rows};
    p.data.reset(
        static_cast<float *>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
    if (!p.data)
      fatal("cannot allocate " + std::to_string(bytes) +
            " bytes for an MKL-packed weight");
    // B = W^T: the weight [out, in] row-major, transposed.
    api.sgemmPack(kMklRowMajor, kMklBMatrix, kMklTrans, rows, outF, in, 1.0f,
                  w.f32(), in, p.data.get());
    return p;
  };
  return cache
      .get(
          w, [&](const MklPackedWeight &p) { return p.rows == rows; }, make,
          /*onePerWeight=*/true)
      .data.get();
}

/// A [rows, cols] operand whose element (i, j) is at i * strides[0] +
/// j * strides[1], as the BLAS interfaces read it: row-major (strides
/// {ld, 1}) or transposed (strides {1, ld}), with a leading dimension they
/// accept (at least the row's length). A dimension of one has no stride
/// that matters: a [1, n] row read with strides {1, 1} (dy^T of a single
/// output feature) is row-major with ld n, not transposed with ld 1.
struct BlasOperand {
  bool transposed;
  int64_t ld;
};
BlasOperand blasOperand(const Dims &dims, const Dims &strides) {
  int64_t rows = dims[0], cols = dims[1];
  if ((strides[1] == 1 || cols == 1) && (rows == 1 || strides[0] >= cols))
    return {false, rows == 1 ? std::max<int64_t>(cols, 1) : strides[0]};
  return {true, cols == 1 ? std::max<int64_t>(rows, 1) : strides[1]};
}

#ifdef TPRT_WITH_OPENBLAS_FALLBACK
/// An operand of `product` as cblas reads it.
CBLAS_TRANSPOSE blasLayout(const Dims &dims, const Dims &strides, int64_t &ld) {
  BlasOperand operand = blasOperand(dims, strides);
  ld = operand.ld;
  return operand.transposed ? CblasTrans : CblasNoTrans;
}
#endif
} // namespace

namespace {
/// The f32 linear forms on MKL or OpenBLAS: out = x w^T + beta out. False
/// when the f32 products are oneDNN's.
bool linearOnBlas(const Tensor &w, const float *wData, const float *x,
                  float *out, int64_t batch, int64_t rows, bool packed,
                  float beta) {
  int64_t outF = w.dim(0), in = w.dim(1);
  // The bmm form's batch rows follow each other in x and out, and share the
  // weight: one product over all of them (the libraries that repack the
  // weight per call then do so once).
  rows *= batch;
#ifdef TPRT_WITH_XSMM
  if (f32Library() == F32Library::Xsmm && packed &&
      xsmmLinear(w, x, out, rows, beta))
    return true;
#endif
#ifdef TPRT_WITH_OPENBLAS_FALLBACK
  if (f32OnOpenBlas()) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, outF, in, 1.0f,
                x, in, wData, in, beta, out, outF);
    return true;
  }
#endif
  if (f32Library() != F32Library::Mkl)
    return false;
  const Mkl &api = requiredMkl();
  if (packed)
    api.sgemmCompute(kMklRowMajor, kMklNoTrans, kMklPacked, rows, outF, in, x,
                     in, mklPackedWeight(api, w, rows), outF, beta, out, outF);
  else
    api.sgemm(kMklRowMajor, kMklNoTrans, kMklTrans, rows, outF, in, 1.0f, x, in,
              wData, in, beta, out, outF);
  return true;
}
} // namespace

bool linearAccumulate(const Tensor &w, const float *x, float *out,
                      int64_t batch, int64_t rows, bool packed) {
  return linearOnBlas(w, w.f32(), x, out, batch, rows, packed, /*beta=*/1.0f);
}

void linear(const Tensor &w, const float *x, float *out, int64_t batch,
            int64_t rows, bool packed, bool bf16Operands) {
  int64_t outF = w.dim(0), in = w.dim(1);
  const float *wData = w.f32();
  std::vector<float> xRounded, wRounded;
  if (bf16Operands && !bf16ProductsAvailable()) {
    // Rounded copies, the weight's made per call and not packed: correct,
    // not fast, on machines without bf16 products.
    x = rounded(x, batch * rows * in, true, xRounded);
    wData = rounded(wData, outF * in, true, wRounded);
    packed = bf16Operands = false;
  }
  if (!bf16Operands && linearOnBlas(w, wData, x, out, batch, rows, packed,
                                    /*beta=*/0.0f))
    return;
  // The weight [out, in] row-major is the [in, out] matrix of strides
  // {1, in}; the bmm form shares it across the batch (batch dimension 1).
  Dims src = {batch, rows, in}, wei = {1, in, outF}, dst = {batch, rows, outF};
  Dims srcStrides = {rows * in, in, 1}, dstStrides = {rows * outF, outF, 1};
  Dims weiStrides = {in * outF, 1, in};
  memory::desc plainWeight = f32(wei, weiStrides);
  memory::desc srcDesc =
      bf16Operands ? bf16(src, srcStrides) : f32(src, srcStrides);
  memory::desc weightDesc =
      packed ? (bf16Operands ? bf16Any(wei) : f32Any(wei))
             : (bf16Operands ? bf16(wei, weiStrides) : plainWeight);
  int kind = (packed ? LinearPacked : Linear) + (bf16Operands ? kBf16 : 0);
  Primitive &p = primitiveFor({kind, batch, rows, outF, in}, [&] {
    return matmulDesc(srcDesc, weightDesc, f32(dst, dstStrides));
  });
  std::vector<uint16_t> xCopy, wCopy;
  memory srcMem = operand(f32(src, srcStrides), srcDesc, x, batch * rows * in,
                          bf16Operands, xCopy);
  memory dstMem(f32(dst, dstStrides), dnnlEngine(), out);
  if (packed) {
    // The reorder into the packed layout also rounds to bf16.
    run(p, srcMem, packedWeight(w, plainWeight, p.desc.weights_desc()), dstMem);
    return;
  }
  run(p, srcMem,
      operand(plainWeight, weightDesc, wData, in * outF, bf16Operands, wCopy),
      dstMem);
}

bool linearBf16(const Tensor &w, const uint16_t *x, uint16_t *out,
                int64_t batch, int64_t rows, bool packed) {
  int64_t outF = w.dim(0), in = w.dim(1);
  Dims src = {batch, rows, in}, wei = {1, in, outF}, dst = {batch, rows, outF};
  Dims srcStrides = {rows * in, in, 1}, dstStrides = {rows * outF, outF, 1};
  memory::desc plainWeight = bf16(wei, {in * outF, 1, in});
  Primitive *p = bf16Primitive(
      {packed ? LinearBf16Packed : LinearBf16, batch, rows, outF, in},
      bf16(src, srcStrides), packed ? bf16Any(wei) : plainWeight,
      bf16(dst, dstStrides));
  if (!p)
    return false;
  memory srcMem(bf16(src, srcStrides), dnnlEngine(), const_cast<uint16_t *>(x));
  memory dstMem(bf16(dst, dstStrides), dnnlEngine(), out);
  if (packed) {
    run(*p, srcMem, packedWeight(w, plainWeight, p->desc.weights_desc()),
        dstMem);
    return true;
  }
  run(*p, srcMem,
      memory(plainWeight, dnnlEngine(), const_cast<void *>(w.raw())), dstMem);
  return true;
}

namespace {
/// out[m, n] = A[m, k] B[k, n] with A and B read with the given strides
/// (their buffers hold m * k and k * n elements): the backward's products.
void product(int kind, int64_t m, int64_t n, int64_t k, const float *a,
             const Dims &aStrides, const float *b, const Dims &bStrides,
             float *out, bool bf16Operands, bool accumulate = false) {
  std::vector<float> aRounded, bRounded;
  if (bf16Operands && !bf16ProductsAvailable()) {
    a = rounded(a, m * k, true, aRounded);
    b = rounded(b, k * n, true, bRounded);
    bf16Operands = false;
  }
#ifdef TPRT_WITH_OPENBLAS_FALLBACK
  if (!bf16Operands && f32OnOpenBlas()) {
    int64_t lda = 0, ldb = 0;
    CBLAS_TRANSPOSE ta = blasLayout({m, k}, aStrides, lda),
                    tb = blasLayout({k, n}, bStrides, ldb);
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb,
                accumulate ? 1.0f : 0.0f, out, n);
    return;
  }
#endif
  if (!bf16Operands && f32Library() == F32Library::Mkl) {
    auto layout = [](const Dims &dims, const Dims &strides, int &ld) {
      BlasOperand operand = blasOperand(dims, strides);
      ld = static_cast<int>(operand.ld);
      return operand.transposed ? kMklTrans : kMklNoTrans;
    };
    int lda = 0, ldb = 0;
    int ta = layout({m, k}, aStrides, lda), tb = layout({k, n}, bStrides, ldb);
    requiredMkl().sgemm(kMklRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb,
                        accumulate ? 1.0f : 0.0f, out, n);
    return;
  }
  Dims aDims = {m, k}, bDims = {k, n};
  auto desc = [&](const Dims &d, const Dims &strides) {
    return bf16Operands ? bf16(d, strides) : f32(d, strides);
  };
  int key = kind + (bf16Operands ? kBf16 : 0) + (accumulate ? kAccumulate : 0);
  Primitive &p = primitiveFor({key, 1, m, n, k}, [&] {
    dnnl::primitive_attr attr;
    if (accumulate) { // out += the product
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    return matmulDesc(desc(aDims, aStrides), desc(bDims, bStrides),
                      f32({m, n}, {n, 1}), attr);
  });
  std::vector<uint16_t> aCopy, bCopy;
  run(p,
      operand(f32(aDims, aStrides), desc(aDims, aStrides), a, m * k,
              bf16Operands, aCopy),
      operand(f32(bDims, bStrides), desc(bDims, bStrides), b, k * n,
              bf16Operands, bCopy),
      memory(p.desc.dst_desc(), dnnlEngine(), out));
}
} // namespace

namespace {
/// out[m, n] = A[m, k] B[k, n] on bf16 operands into a bf16 result.
bool productBf16(int kind, int64_t m, int64_t n, int64_t k, const uint16_t *a,
                 const Dims &aStrides, const uint16_t *b, const Dims &bStrides,
                 uint16_t *out) {
  Dims aDims = {m, k}, bDims = {k, n};
  Primitive *p = bf16Primitive({kind, 1, m, n, k}, bf16(aDims, aStrides),
                               bf16(bDims, bStrides), bf16({m, n}, {n, 1}));
  if (!p)
    return false;
  run(*p,
      memory(bf16(aDims, aStrides), dnnlEngine(), const_cast<uint16_t *>(a)),
      memory(bf16(bDims, bStrides), dnnlEngine(), const_cast<uint16_t *>(b)),
      memory(p->desc.dst_desc(), dnnlEngine(), out));
  return true;
}
} // namespace

bool linearGradInputBf16(const uint16_t *dy, const uint16_t *w, uint16_t *dx,
                         int64_t rows, int64_t in, int64_t out) {
  return productBf16(GradInputBf16, rows, in, out, dy, {out, 1}, w, {in, 1},
                     dx);
}

bool linearGradWeightBf16(const uint16_t *dy, const uint16_t *x, uint16_t *dw,
                          int64_t rows, int64_t in, int64_t out) {
  return productBf16(GradWeightBf16, out, in, rows, dy, {1, out}, x, {in, 1},
                     dw);
}

void linearGradInput(const float *dy, const float *w, float *dx, int64_t rows,
                     int64_t in, int64_t out, bool bf16Operands) {
  product(GradInput, rows, in, out, dy, {out, 1}, w, {in, 1}, dx, bf16Operands);
}

void linearGradWeight(const float *dy, const float *x, float *dw, int64_t rows,
                      int64_t in, int64_t out, bool bf16Operands,
                      bool accumulate) {
  // dy^T is dy [rows, out] read with strides {1, out}.
  product(GradWeight, out, in, rows, dy, {1, out}, x, {in, 1}, dw, bf16Operands,
          accumulate);
}

void setThreads(int threads) {
#ifdef TPRT_WITH_OPENBLAS_FALLBACK
  openblas_set_num_threads(threads);
#endif
  if (f32Library() == F32Library::Mkl)
    requiredMkl().setNumThreads(threads);
}

bool f32EpiloguesFused() { return f32Library() == F32Library::OneDnn; }

const char *gemmLibrary() {
  static const std::string name = [] {
    const dnnl_version_t *v = dnnl_version();
    std::string dnnl = "oneDNN " + std::to_string(v->major) + "." +
                       std::to_string(v->minor) + "." +
                       std::to_string(v->patch);
    if (f32Library() == F32Library::Mkl) {
      // "Intel(R) oneAPI Math Kernel Library Version 2026.2-Product ...".
      const std::string &full = requiredMkl().version;
      size_t at = full.find("Version ");
      std::string version =
          at == std::string::npos
              ? full
              : full.substr(at + 8, full.find_first_of(" -", at + 8) - at - 8);
      return "MKL " + version + " (f32), " + dnnl;
    }
    if (f32Library() == F32Library::Xsmm)
      return "libxsmm " + std::string(xsmmVersion()) +
             " (f32, packed weights), OpenBLAS (f32), " + dnnl;
    return f32OnOpenBlas() ? "OpenBLAS (f32), " + dnnl : dnnl;
  }();
  return name.c_str();
}

#else // OpenBLAS

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}

void linear(const Tensor &w, const float *x, float *out, int64_t batch,
            int64_t rows, bool /*packed*/, bool bf16Operands) {
  int64_t outF = w.dim(0), in = w.dim(1);
  std::vector<float> xCopy, wCopy;
  x = rounded(x, batch * rows * in, bf16Operands, xCopy);
  const float *wData = rounded(w.f32(), outF * in, bf16Operands, wCopy);
  for (int64_t i = 0; i < batch; ++i)
    sgemm(false, true, rows, outF, in, 1.0f, x + i * rows * in, in, wData, in,
          0.0f, out + i * rows * outF, outF);
}

bool linearAccumulate(const Tensor &w, const float *x, float *out,
                      int64_t batch, int64_t rows, bool /*packed*/) {
  int64_t outF = w.dim(0), in = w.dim(1);
  for (int64_t i = 0; i < batch; ++i)
    sgemm(false, true, rows, outF, in, 1.0f, x + i * rows * in, in, w.f32(), in,
          1.0f, out + i * rows * outF, outF);
  return true;
}

bool linearBf16(const Tensor &, const uint16_t *, uint16_t *, int64_t, int64_t,
                bool) {
  return false;
}

bool linearEpilogue(const Tensor &, const void *, const void *, void *, int64_t,
                    int64_t, bool, bool, Epilogue) {
  return false;
}

bool linearGradInputBf16(const uint16_t *, const uint16_t *, uint16_t *,
                         int64_t, int64_t, int64_t) {
  return false;
}

bool linearGradWeightBf16(const uint16_t *, const uint16_t *, uint16_t *,
                          int64_t, int64_t, int64_t) {
  return false;
}

void linearGradInput(const float *dy, const float *w, float *dx, int64_t rows,
                     int64_t in, int64_t out, bool bf16Operands) {
  std::vector<float> dyCopy, wCopy;
  dy = rounded(dy, rows * out, bf16Operands, dyCopy);
  w = rounded(w, out * in, bf16Operands, wCopy);
  sgemm(false, false, rows, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

void linearGradWeight(const float *dy, const float *x, float *dw, int64_t rows,
                      int64_t in, int64_t out, bool bf16Operands,
                      bool accumulate) {
  std::vector<float> dyCopy, xCopy;
  dy = rounded(dy, rows * out, bf16Operands, dyCopy);
  x = rounded(x, rows * in, bf16Operands, xCopy);
  sgemm(true, false, out, in, rows, 1.0f, dy, out, x, in,
        accumulate ? 1.0f : 0.0f, dw, in);
}

void setThreads(int threads) { openblas_set_num_threads(threads); }

bool f32EpiloguesFused() { return false; }

const char *gemmLibrary() { return "OpenBLAS"; }

#endif

} // namespace tprt::cpu
