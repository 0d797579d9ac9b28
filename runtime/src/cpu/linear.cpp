//===- linear.cpp - CPU kernels of the linear family ----------------------===//
//
// cpu::Name of the linear family's calls (tprt/Calls.def): the products in
// both forms, with their epilogues (in the GEMM's post-ops where the
// library has them), sibling products over concatenated weights, the
// SwiGLU, and the backward's products. The GEMM libraries are behind
// Gemm.h.
//
//===----------------------------------------------------------------------===//

#include "Activation.h"
#include "Gemm.h"
#include "KernelUtils.h"
#include "Vector.h"
#include "WeightFormCache.h"
#include "ops/Backends.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace tprt {

/// A bf16 program's linear forms: bf16 x and w multiplied by the GEMM
/// library's bf16 product into a bf16 result of `shape`; undefined when the
/// operands are of other types or the library has no such product (the
/// caller then computes in f32).
static Tensor linearInBf16(Context &ctx, const Tensor &x, const Tensor &w,
                           const std::vector<int64_t> &shape, int64_t batch,
                           int64_t rows) {
  if (x.dtype() != DType::BF16 || w.dtype() != DType::BF16 || x.onGpu())
    return Tensor();
  Tensor out = Tensor::uninitialized(DType::BF16, shape);
  if (batch * rows > 0 && w.dim(0) > 0 &&
      !cpu::linearBf16(w, static_cast<const uint16_t *>(x.raw()),
                       static_cast<uint16_t *>(out.raw()), batch, rows,
                       ctx.constantWeights()))
    return Tensor();
  return out;
}

/// The flat form: x's leading dimensions are the product's rows.
static Tensor linearFlat(Context &ctx, const Tensor &x, const Tensor &w,
                         int64_t slot) {
  if (w.rank() != 2 || x.rank() < 1 || x.dim(-1) != w.dim(1))
    fatal("linear: input " + x.describe() + " does not match weight " +
          w.describe() + " ([out, in])");
  int64_t in = w.dim(1), outF = w.dim(0), rows = in ? x.numel() / in : 0;
  std::vector<int64_t> shape = x.shape();
  shape.back() = outF;
  if (Tensor out = linearInBf16(ctx, x, w, shape, 1, rows); out.defined())
    return out;
  TPRT_IN_F32(x, linearFlat(ctx, widened(x), widened(w), -1))
  requireF32(x, "linear", "the input");
  requireF32(w, "linear", "the weight");
  Tensor out = ctx.placed(slot, DType::F32, shape);
  if (rows > 0 && outF > 0)
    cpu::linear(w, x.f32(), out.f32(), 1, rows, ctx.constantWeights(),
                ctx.autocast() == DType::BF16);
  return out;
}

/// out[r, j] += bias[j] over the rows of `out`.
static void addBiasInPlace(Tensor &out, const Tensor &bias, const char *op) {
  requireF32(bias, op, "the bias");
  int64_t features = out.rank() ? out.dim(-1) : 0;
  if (bias.rank() != 1 || bias.dim(0) != features)
    fatal(std::string(op) + ": bias " + bias.describe() + " does not match " +
          out.describe());
  int64_t rows = features ? out.numel() / features : 0;
  float *o = out.f32();
  const float *b = bias.f32();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < features; ++j)
      o[r * features + j] += b[j];
}

Tensor cpu::bias_add(Context &ctx, const Tensor &x, const Tensor &bias,
                     int64_t slot) {
  // Reduced-precision operands widened, the sum rounded once.
  if (reducedType(x) != DType::F32 || reducedType(bias) != DType::F32)
    TPRT_IN_F32(x, cpu::bias_add(ctx, widened(x), widened(bias), -1))
  requireF32(x, "bias_add", "the input");
  Tensor out = ctx.placed(slot, DType::F32, x.shape());
  std::copy_n(x.f32(), x.numel(), out.f32());
  addBiasInPlace(out, bias, "bias_add");
  return out;
}

/// The bmm form: each [seq, in] slice of a 3-D x times w^T.
static Tensor linearBmm(Context &ctx, const Tensor &x, const Tensor &w,
                        int64_t slot) {
  if (w.rank() != 2 || x.rank() != 3 || x.dim(-1) != w.dim(1))
    fatal("linear (bmm): input " + x.describe() + " does not match weight " +
          w.describe() + " ([out, in], 3-D input)");
  int64_t batch = x.dim(0), seq = x.dim(1), outF = w.dim(0);
  if (Tensor out = linearInBf16(ctx, x, w, {batch, seq, outF}, batch, seq);
      out.defined())
    return out;
  TPRT_IN_F32(x, linearBmm(ctx, widened(x), widened(w), -1))
  requireF32(x, "linear (bmm)", "the input");
  requireF32(w, "linear (bmm)", "the weight");
  Tensor out = ctx.placed(slot, DType::F32, {batch, seq, outF});
  if (batch > 0 && seq > 0 && outF > 0)
    cpu::linear(w, x.f32(), out.f32(), batch, seq, ctx.constantWeights(),
                ctx.autocast() == DType::BF16);
  return out;
}

Tensor cpu::linear(Context &ctx, const Tensor &x, const Tensor &w,
                   LinearForm form, int64_t slot) {
  return form == LinearForm::Bmm ? linearBmm(ctx, x, w, slot)
                                 : linearFlat(ctx, x, w, slot);
}

namespace {
/// Sibling weights concatenated along `out`, kept while every weight's
/// allocation lives (a new tensor at the same address is another weight,
/// as for the GEMM libraries' packed weights). The concatenation's own
/// allocation is what those packed forms then key on.
struct ConcatenatedWeight {
  std::vector<const void *> data;
  std::vector<std::weak_ptr<const void>> owners;
  /// Each weight's shape (views of one allocation may share a first
  /// element and differ in shape).
  std::vector<std::vector<int64_t>> shapes;
  Tensor weight;
};
std::mutex concatenatedMutex;
std::vector<ConcatenatedWeight> concatenatedWeights;

bool holds(const ConcatenatedWeight &c,
           const std::vector<const Tensor *> &weights) {
  if (c.data.size() != weights.size())
    return false;
  for (size_t i = 0; i < weights.size(); ++i)
    if (c.data[i] != weights[i]->raw() || c.shapes[i] != weights[i]->shape() ||
        !cpu::sameAllocation(c.owners[i], weights[i]->allocation()))
      return false;
  return true;
}

/// f32 `weights` ([out_i, in] each) as one [sum out_i, in] tensor.
Tensor concatenatedWeight(const std::vector<const Tensor *> &weights) {
  std::lock_guard<std::mutex> lock(concatenatedMutex);
  for (const ConcatenatedWeight &c : concatenatedWeights)
    if (holds(c, weights))
      return c.weight;
  // Forget the concatenations of weights that no longer exist.
  concatenatedWeights.erase(std::remove_if(concatenatedWeights.begin(),
                                           concatenatedWeights.end(),
                                           [](const ConcatenatedWeight &c) {
                                             for (const auto &owner : c.owners)
                                               if (owner.expired())
                                                 return true;
                                             return false;
                                           }),
                            concatenatedWeights.end());
  int64_t in = weights.front()->dim(1), out = 0;
  for (const Tensor *w : weights)
    out += w->dim(0);
  ConcatenatedWeight c;
  c.weight = Tensor::uninitialized(DType::F32, {out, in});
  float *dst = c.weight.f32();
  for (const Tensor *w : weights) {
    dst = std::copy_n(w->f32(), w->numel(), dst);
    c.data.push_back(w->raw());
    c.owners.push_back(w->allocation());
    c.shapes.push_back(w->shape());
  }
  concatenatedWeights.push_back(c);
  return c.weight;
}
} // namespace

/// Whether `weights` can be multiplied as their concatenation: constant
/// (a forward-only program's parameters, which the concatenation may
/// outlive unchanged), f32 on the host like `x`, of the form's rank.
static bool concatenable(Context &ctx, const Tensor &x,
                         const std::vector<const Tensor *> &weights, bool bmm) {
  bool ok = !x.onGpu() && ctx.constantWeights() &&
            ctx.autocast() != DType::BF16 && x.dtype() == DType::F32 &&
            (bmm ? x.rank() == 3 : x.rank() >= 1);
  for (const Tensor *w : weights)
    ok = ok && !w->onGpu() && w->dtype() == DType::F32 && w->rank() == 2 &&
         w->dim(1) == x.dim(-1);
  return ok;
}

/// linear_siblings and its bmm form: one product over the concatenated
/// weights, its output's column blocks copied into the results (a pass
/// over the outputs). Elsewhere (training programs, other types)
/// the separate products.
static Tensors siblingProducts(Context &ctx, const Tensor &x,
                               const std::vector<const Tensor *> &weights,
                               LinearForm form) {
  auto product = [&](const Tensor &w) { return cpu::linear(ctx, x, w, form); };
  Tensors results;
  if (!concatenable(ctx, x, weights, form == LinearForm::Bmm)) {
    for (const Tensor *w : weights)
      results.push_back(product(*w));
    return results;
  }
  Tensor all = product(concatenatedWeight(weights));
  int64_t total = all.dim(-1), rows = total ? all.numel() / total : 0;
  std::vector<float *> outs;
  for (const Tensor *w : weights) {
    std::vector<int64_t> shape = x.shape();
    shape.back() = w->dim(0);
    results.push_back(Tensor::uninitialized(DType::F32, shape));
    outs.push_back(results.back().f32());
  }
  const float *src = all.f32();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = src + r * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      int64_t width = weights[i]->dim(0);
      std::copy_n(row, width, outs[i] + r * width);
      row += width;
    }
  }
  return results;
}

/// linear_swiglu. Where the library fuses epilogues
/// (oneDNN), the gate's product applies the SiLU and the product with up
/// as post-ops; elsewhere one product over [wg; wu] and then, in blocks of
/// rows that stay in cache, the gate's columns copied out, their SiLU
/// (oneDNN's eltwise) and the product with up's columns: no pass over a
/// separate gate, SiLU or up tensor in memory.
Tensor cpu::linear_swiglu(Context &ctx, const Tensor &x, const Tensor &wg,
                          const Tensor &wu, LinearForm form) {
  if (!concatenable(ctx, x, {&wg, &wu}, form == LinearForm::Bmm) ||
      cpu::f32EpiloguesFused() || wg.dim(0) != wu.dim(0))
    return composed::linear_swiglu(ctx, x, wg, wu, form);
  Tensor both = cpu::linear(ctx, x, concatenatedWeight({&wg, &wu}), form);
  int64_t width = wg.dim(0), rows = width ? both.numel() / (2 * width) : 0;
  std::vector<int64_t> shape = x.shape();
  shape.back() = width;
  Tensor out = Tensor::uninitialized(DType::F32, shape);
  const float *src = both.f32();
  float *dst = out.f32();
  int64_t block = std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1));
  cpu::parallelBlocks(rows, block, [&](int64_t begin, int64_t count) {
    thread_local std::vector<float> gate;
    gate.resize(count * width);
    for (int64_t r = 0; r < count; ++r)
      std::copy_n(src + (begin + r) * 2 * width, width,
                  gate.data() + r * width);
    cpu::activation(cpu::Activation::Silu, gate.data(), gate.data(),
                    count * width);
    for (int64_t r = 0; r < count; ++r)
      cpu::mulTo(gate.data() + r * width, src + (begin + r) * 2 * width + width,
                 dst + (begin + r) * width, width);
  });
  return out;
}

Tensors cpu::linear_siblings(Context &ctx, const Tensor &x, const Tensor &w0,
                             const Tensor &w1, LinearForm form) {
  return siblingProducts(ctx, x, {&w0, &w1}, form);
}

Tensors cpu::linear_siblings(Context &ctx, const Tensor &x, const Tensor &w0,
                             const Tensor &w1, const Tensor &w2,
                             LinearForm form) {
  return siblingProducts(ctx, x, {&w0, &w1, &w2}, form);
}

/// The linear forms with an epilogue: one product whose post-ops apply it
/// where the GEMM library has them (f32, or a bf16 program's bf16 tensors,
/// without autocast), else the separate calls (another type or library).
/// The host product's batch and rows when `x` and `w` (the flat form, or
/// with `bmm` the bmm form) can go to the CPU's GEMM with an operand
/// `other` of the product's shape, all of `x`'s type (f32 or bf16), not
/// under autocast; none otherwise.
static std::optional<std::pair<int64_t, int64_t>>
hostEpilogueShape(Context &ctx, const Tensor &x, const Tensor &w,
                  const Tensor &other, bool bmm) {
  DType type = x.dtype();
  if (x.onGpu() || ctx.autocast() == DType::BF16 ||
      (type != DType::F32 && type != DType::BF16) || w.dtype() != type ||
      other.dtype() != type || w.rank() != 2 ||
      !(bmm ? x.rank() == 3 : x.rank() >= 1) || x.dim(-1) != w.dim(1) ||
      x.numel() == 0 || w.numel() == 0)
    return std::nullopt;
  std::vector<int64_t> shape = x.shape();
  shape.back() = w.dim(0);
  if (other.shape() != shape)
    return std::nullopt;
  return std::pair(bmm ? x.dim(0) : 1, bmm ? x.dim(1) : x.numel() / w.dim(1));
}

/// The product with an Add or SiluMul epilogue in the GEMM's post-ops
/// where hostEpilogueShape and the library allow; undefined otherwise.
static Tensor fusedEpilogue(Context &ctx, const Tensor &x, const Tensor &w,
                            const Tensor &other, cpu::Epilogue epilogue,
                            LinearForm form, int64_t slot) {
  auto batchRows = hostEpilogueShape(ctx, x, w, other, form == LinearForm::Bmm);
  if (!batchRows)
    return Tensor();
  auto [batch, rows] = *batchRows;
  Tensor out = ctx.placed(slot, x.dtype(), other.shape());
  if (!cpu::linearEpilogue(w, x.raw(), other.raw(), out.raw(), batch, rows,
                           ctx.constantWeights(), x.dtype() == DType::BF16,
                           epilogue))
    return Tensor();
  return out;
}

Tensor cpu::linear_epilogue(Context &ctx, const Tensor &x, const Tensor &w,
                            const Tensor &other, LinearForm form,
                            LinearEpilogue epilogue, int64_t slot) {
  if (epilogue == LinearEpilogue::SiluMul) {
    if (Tensor out =
            fusedEpilogue(ctx, x, w, other, cpu::Epilogue::SiluMul, form, slot);
        out.defined())
      return out;
    return cpu::mul(ctx, cpu::silu(ctx, cpu::linear(ctx, x, w, form)), other);
  }
  // The bias, added in place to the product (its type's rule for bf16).
  Tensor out = cpu::linear(ctx, x, w, form, slot);
  if (reducedType(out) != DType::F32)
    return tprt::bias_add(ctx, out, other);
  addBiasInPlace(out, other, "linear");
  return out;
}

Tensor cpu::linear_add(Context &ctx, const Tensor &x, const Tensor &w,
                       const Tensor &other, LinearForm form, bool once) {
  if (!once || ctx.tp().rank() == 0)
    if (Tensor out =
            fusedEpilogue(ctx, x, w, other, cpu::Epilogue::Add, form, -1);
        out.defined())
      return out;
  return composed::linear_add(ctx, x, w, other, form, once);
}

/// The product added into the residual's storage by a GEMM with beta 1
/// where the library has it for these operands, else linear_add.
Tensor cpu::linear_add_consuming(Context &ctx, const Tensor &x, const Tensor &w,
                                 Tensor &other, LinearForm form, bool once) {
  Tensor residual = std::exchange(other, Tensor());
  if (once && ctx.tp().rank() != 0)
    return cpu::linear(ctx, x, w, form);
  auto batchRows =
      hostEpilogueShape(ctx, x, w, residual, form == LinearForm::Bmm);
  if (batchRows && x.dtype() == DType::F32 && residual.soleOwner() &&
      cpu::linearAccumulate(w, x.f32(), residual.f32(), batchRows->first,
                            batchRows->second, ctx.constantWeights()))
    return residual;
  return cpu::linear_add(ctx, x, w, residual, form, /*once=*/false);
}

Tensor cpu::linear_grad_input(Context &ctx, const Tensor &dy, const Tensor &w) {
  // A bf16 program's products in bf16 (f32 accumulation).
  if (dy.dtype() == DType::BF16 && w.dtype() == DType::BF16 && w.rank() == 2 &&
      dy.rank() >= 1 && dy.dim(-1) == w.dim(0) && w.numel() > 0 &&
      dy.numel() > 0) {
    std::vector<int64_t> shape = dy.shape();
    shape.back() = w.dim(1);
    Tensor dx = Tensor::uninitialized(DType::BF16, shape);
    if (cpu::linearGradInputBf16(static_cast<const uint16_t *>(dy.raw()),
                                 static_cast<const uint16_t *>(w.raw()),
                                 static_cast<uint16_t *>(dx.raw()),
                                 dy.numel() / w.dim(0), w.dim(1), w.dim(0)))
      return dx;
  }
  TPRT_IN_F32(dy, cpu::linear_grad_input(ctx, widened(dy), widened(w)))
  requireF32(dy, "linear_grad_input", "dy");
  requireF32(w, "linear_grad_input", "the weight");
  if (w.rank() != 2 || dy.rank() < 1 || dy.dim(-1) != w.dim(0))
    fatal("linear_grad_input: dy " + dy.describe() + " does not match weight " +
          w.describe());
  int64_t outF = w.dim(0), in = w.dim(1),
          rows = dy.numel() / std::max<int64_t>(outF, 1);
  std::vector<int64_t> shape = dy.shape();
  shape.back() = in;
  // The product overwrites every element; only an empty sum is zeros.
  Tensor dx = rows > 0 && outF > 0 ? Tensor::uninitialized(DType::F32, shape)
                                   : Tensor(DType::F32, shape);
  if (rows > 0 && outF > 0)
    cpu::linearGradInput(dy.f32(), w.f32(), dx.f32(), rows, in, outF,
                         ctx.autocast() == DType::BF16);
  return dx;
}

namespace {
/// The rows a weight gradient sums over: dy [..., out] and x [..., in] with
/// the same leading dimensions, else an error of `op`.
int64_t weightGradRows(const Tensor &dy, const Tensor &x, const char *op) {
  if (dy.rank() < 1 || x.rank() != dy.rank() ||
      dy.numel() / std::max<int64_t>(dy.dim(-1), 1) !=
          x.numel() / std::max<int64_t>(x.dim(-1), 1))
    fatal(std::string(op) + ": dy " + dy.describe() + " and x " + x.describe() +
          " have different rows");
  return dy.numel() / std::max<int64_t>(dy.dim(-1), 1);
}
} // namespace

Tensor cpu::linear_grad_weight(Context &ctx, const Tensor &dy,
                               const Tensor &x) {
  if (dy.dtype() == DType::BF16 && x.dtype() == DType::BF16 && dy.rank() >= 1 &&
      x.rank() == dy.rank() && dy.numel() > 0 && x.numel() > 0 &&
      dy.numel() / dy.dim(-1) == x.numel() / x.dim(-1)) {
    int64_t outF = dy.dim(-1), in = x.dim(-1);
    Tensor dw = Tensor::uninitialized(DType::BF16, {outF, in});
    if (cpu::linearGradWeightBf16(static_cast<const uint16_t *>(dy.raw()),
                                  static_cast<const uint16_t *>(x.raw()),
                                  static_cast<uint16_t *>(dw.raw()),
                                  dy.numel() / outF, in, outF))
      return dw;
  }
  TPRT_IN_F32(reducedType(dy, x),
              cpu::linear_grad_weight(ctx, widened(dy), widened(x)))
  requireF32(dy, "linear_grad_weight", "dy");
  requireF32(x, "linear_grad_weight", "x");
  int64_t rows = weightGradRows(dy, x, "linear_grad_weight");
  int64_t outF = dy.dim(-1), in = x.dim(-1);
  Tensor dw = rows > 0 ? Tensor::uninitialized(DType::F32, {outF, in})
                       : Tensor(DType::F32, {outF, in});
  if (rows > 0)
    cpu::linearGradWeight(dy.f32(), x.f32(), dw.f32(), rows, in, outF,
                          ctx.autocast() == DType::BF16);
  return dw;
}

void cpu::accumulate_linear_grad_weight(Context &ctx, const Tensor &dy,
                                        const Tensor &x, const Tensor &param,
                                        const char *fqn, int64_t splitDim,
                                        bool owned) {
  // Only f32 on the host adds in the product. A bf16 product into the f32
  // buffer writes twice the bytes of its bf16 result and is slower than
  // that result widened and added.
  if (dy.dtype() != DType::F32 || x.dtype() != DType::F32)
    return composed::accumulate_linear_grad_weight(ctx, dy, x, param, fqn,
                                                   splitDim, owned);
  int64_t rows = weightGradRows(dy, x, "accumulate_linear_grad_weight");
  int64_t outF = dy.dim(-1), in = x.dim(-1);
  if (param.rank() != 2 || outF != param.dim(0) || in != param.dim(1))
    fatal(std::string("accumulate_linear_grad_weight: dy ") + dy.describe() +
          " and x " + x.describe() + " do not give the gradient of '" + fqn +
          "', " + param.describe());
  Context::GradBuffer &buffer = ctx.gradBuffer(param, fqn);
  float *acc = buffer.grad.f32();
  bool first = buffer.takeFirst(splitDim, owned);
  if (rows > 0)
    cpu::linearGradWeight(dy.f32(), x.f32(), acc, rows, in, outF,
                          ctx.autocast() == DType::BF16,
                          /*accumulate=*/!first);
  else if (first)
    std::fill_n(acc, buffer.grad.numel(), 0.0f);
}

} // namespace tprt
