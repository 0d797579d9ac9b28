//===- kernels.cpp - CPU kernels of the tp ops ----------------------------===//
//
// cpu::Name of the forward's calls (tprt/Calls.def), on host tensors; the
// dispatch layer (src/ops/) calls them on a context that runs on the CPU.
// f32 compute. Matrix products go to the GEMM library (Gemm.h); the rest are
// loops parallelized with OpenMP over independent rows, heads or elements.
//
//===----------------------------------------------------------------------===//

#include "Activation.h"
#include "Gemm.h"
#include "KernelUtils.h"
#include "Vector.h"
#include "WeightFormCache.h"
#include "common/Rotary.h"
#include "ops/Backends.h"
#include "tprt/tprt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <omp.h>
#include <optional>
#include <string>
#include <vector>

namespace tprt {

Tensor cpu::embedding(Context &ctx, const Tensor &ids, const Tensor &table,
                      int64_t slot) {
  if (ids.dtype() != DType::I64)
    fatal("embedding: ids must be int64, got " + ids.describe());
  if (table.rank() != 2 || table.dtype() == DType::I64 || table.onGpu())
    fatal("embedding: the table must be [vocab, hidden], got " +
          table.describe());
  int64_t vocab = table.dim(0), hidden = table.dim(1), n = ids.numel();
  std::vector<int64_t> shape = ids.shape();
  shape.push_back(hidden);
  // Rows are copied in the table's type (a bf16 program's embedding is bf16).
  Tensor out = ctx.placed(slot, table.dtype(), shape);
  const int64_t *id = ids.i64();
  for (int64_t i = 0; i < n; ++i)
    if (id[i] < 0 || id[i] >= vocab)
      fatal("embedding: token id " + std::to_string(id[i]) + " at position " +
            std::to_string(i) + " is outside the vocabulary [0, " +
            std::to_string(vocab) + ")");
  size_t row = hidden * dtypeSize(table.dtype());
  const auto *t = static_cast<const unsigned char *>(table.raw());
  auto *o = static_cast<unsigned char *>(out.raw());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(t + id[i] * row, row, o + i * row);
  return out;
}

Tensor cpu::embedding_vocab_parallel(Context &ctx, const Tensor &ids,
                                     const Tensor &table) {
  if (ids.dtype() != DType::I64 || table.rank() != 2 ||
      table.dtype() == DType::I64 || table.onGpu())
    fatal("embedding_vocab_parallel: ids must be int64 and the table a 2-D "
          "float tensor, got " +
          ids.describe() + " and " + table.describe());
  int64_t rows = table.dim(0), hidden = table.dim(1), n = ids.numel();
  int64_t ranks = ctx.tp().size(), start = ctx.tp().rank() * rows;
  std::vector<int64_t> shape = ids.shape();
  shape.push_back(hidden);
  Tensor out(table.dtype(), shape);
  const int64_t *id = ids.i64();
  for (int64_t i = 0; i < n; ++i)
    if (id[i] < 0 || id[i] >= rows * ranks)
      fatal("embedding: token id " + std::to_string(id[i]) + " at position " +
            std::to_string(i) + " is outside the vocabulary [0, " +
            std::to_string(rows * ranks) + ")");
  size_t row = hidden * dtypeSize(table.dtype());
  const auto *t = static_cast<const unsigned char *>(table.raw());
  auto *o = static_cast<unsigned char *>(out.raw());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    if (id[i] >= start && id[i] < start + rows)
      std::copy_n(t + (id[i] - start) * row, row, o + i * row);
  return out;
}

Tensor cpu::all_reduce_sum(Context &ctx, const Tensor &x) {
  TPRT_IN_F32(x, cpu::all_reduce_sum(ctx, widened(x)))
  requireF32(x, "all_reduce_sum", "the input");
  Tensor out = Tensor::uninitialized(DType::F32, x.shape());
  std::copy_n(x.f32(), x.numel(), out.f32());
  ctx.tp().allReduceSum(out.f32(), out.numel());
  return out;
}

Tensor cpu::all_reduce_sum_consuming(Context &ctx, Tensor &x) {
  Tensor taken = std::move(x);
  x = Tensor();
  if (taken.dtype() != DType::F32 || !taken.soleOwner())
    return cpu::all_reduce_sum(ctx, taken);
  ctx.tp().allReduceSum(taken.f32(), taken.numel());
  return taken;
}

Tensor cpu::all_reduce_sum_start(Context &ctx, const Tensor &x) {
  // Another type is summed whole, in an f32 copy narrowed after the sum.
  if (x.dtype() != DType::F32)
    return cpu::all_reduce_sum(ctx, x);
  Tensor out = Tensor::uninitialized(DType::F32, x.shape());
  std::copy_n(x.f32(), x.numel(), out.f32());
  ctx.tp().startAllReduceSum(out.f32(), out.numel());
  return out;
}

Tensor cpu::all_gather(Context &ctx, const Tensor &x, int64_t axis) {
  TPRT_IN_F32(x, cpu::all_gather(ctx, widened(x), axis))
  requireF32(x, "all_gather", "the input");
  AxisView v(x, axis, "all_gather");
  int64_t ranks = ctx.tp().size(), me = ctx.tp().rank();
  std::vector<int64_t> shape = x.shape();
  shape[axis] *= ranks;
  Tensor out = Tensor::uninitialized(DType::F32, shape);
  // Gathered on the outermost axis the blocks are the output's layout.
  if (v.outer == 1) {
    ctx.tp().allGather(x.f32(), out.f32(), x.numel());
    return out;
  }
  // Else the other ranks' blocks arrive side by side and every block is
  // interleaved into place; this rank's is read from `x` itself.
  Tensor blocks = Tensor::uninitialized(DType::F32, {ranks, x.numel()});
  ctx.tp().allGatherOthers(x.f32(), blocks.f32(), x.numel());
  float *o = out.f32();
  // Rank r's block is rows [r * n, (r + 1) * n) of `axis` in every outer row.
  int64_t chunk = v.n * v.inner;
  for (int64_t r = 0; r < ranks; ++r) {
    const float *b = r == me ? x.f32() : blocks.f32() + r * x.numel();
    for (int64_t i = 0; i < v.outer; ++i)
      std::copy_n(b + i * chunk, chunk, o + (i * ranks + r) * chunk);
  }
  return out;
}

Tensor cpu::reduce_scatter_sum(Context &ctx, const Tensor &x, int64_t axis) {
  TPRT_IN_F32(x, cpu::reduce_scatter_sum(ctx, widened(x), axis))
  requireF32(x, "reduce_scatter_sum", "the input");
  AxisView v(x, axis, "reduce_scatter_sum");
  int64_t ranks = ctx.tp().size();
  requireSplittable(x, v, axis, ranks, "reduce_scatter_sum", kSequenceHint);
  // Pack so that rank r's slice of every outer row is contiguous.
  int64_t chunk = v.n / ranks * v.inner;
  Tensor packed = Tensor::uninitialized(DType::F32, {ranks, v.outer * chunk});
  const float *in = x.f32();
  float *p = packed.f32();
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t i = 0; i < v.outer; ++i)
      std::copy_n(in + (i * ranks + r) * chunk, chunk,
                  p + (r * v.outer + i) * chunk);
  std::vector<int64_t> shape = x.shape();
  shape[axis] /= ranks;
  Tensor out = Tensor::uninitialized(DType::F32, shape);
  ctx.tp().reduceScatterSum(packed.f32(), out.f32(), out.numel());
  return out;
}

Tensor cpu::all_slice(Context &ctx, const Tensor &x, int64_t axis) {
  TPRT_IN_F32(x, cpu::all_slice(ctx, widened(x), axis))
  requireF32(x, "all_slice", "the input");
  AxisView v(x, axis, "all_slice");
  int64_t ranks = ctx.tp().size(), rank = ctx.tp().rank();
  requireSplittable(x, v, axis, ranks, "all_slice");
  std::vector<int64_t> shape = x.shape();
  shape[axis] /= ranks;
  Tensor out = Tensor::uninitialized(DType::F32, shape);
  int64_t chunk = v.n / ranks * v.inner;
  for (int64_t i = 0; i < v.outer; ++i)
    std::copy_n(x.f32() + (i * ranks + rank) * chunk, chunk,
                out.f32() + i * chunk);
  return out;
}

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
  TPRT_IN_F32(x, cpu::bias_add(ctx, widened(x), widened(bias)))
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
/// over the outputs). Elsewhere (training programs, the GPU, other types)
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
    return cpu::linear_epilogue(ctx, x, wg, cpu::linear(ctx, x, wu, form), form,
                                LinearEpilogue::SiluMul);
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
    return cpu::bias_add(ctx, out, other);
  addBiasInPlace(out, other, "linear");
  return out;
}

Tensor cpu::linear_add(Context &ctx, const Tensor &x, const Tensor &w,
                       const Tensor &other, LinearForm form, bool once) {
  if (once && ctx.tp().rank() != 0)
    return cpu::linear(ctx, x, w, form);
  if (Tensor out =
          fusedEpilogue(ctx, x, w, other, cpu::Epilogue::Add, form, -1);
      out.defined())
    return out;
  return cpu::add(ctx, cpu::linear(ctx, x, w, form), other);
}

/// The product added into the residual's storage by a GEMM with beta 1
/// where the library has it for these operands, else linear_add.
Tensor cpu::linear_add_consuming(Context &ctx, const Tensor &x, const Tensor &w,
                                 Tensor &other, LinearForm form, bool once) {
  Tensor residual = std::move(other);
  other = Tensor();
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

Tensor cpu::rms_norm(Context &ctx, const Tensor &x, const Tensor &w, double eps,
                     double offset, int64_t group, int64_t slot) {
  bool bf16 = onHostAsBf16(x);
  if (!bf16)
    TPRT_IN_F32(x,
                cpu::rms_norm(ctx, widened(x), widened(w), eps, offset, group))
  Tensor wf = widened(w);
  requireF32(wf, "rms_norm", "the weight");
  int64_t features = x.dim(-1);
  if (group == 0)
    group = features;
  if (group <= 0 || features % group != 0 || w.numel() != group)
    fatal("rms_norm: input " + x.describe() + ", weight " + w.describe() +
          " and group " + std::to_string(group) + " do not match");
  const float *weight = wf.f32();
  float off = static_cast<float>(offset), epsilon = static_cast<float>(eps);
  auto normalize = [&](const float *in, float *o, int64_t groups) {
    for (int64_t g = 0; g < groups; ++g) {
      const float *row = in + g * group;
      double sum = cpu::sumOfSquares(row, group);
      float inv = 1.0f / std::sqrt(static_cast<float>(sum / group) + epsilon);
      cpu::scaleRow(row, inv, weight, off, o + g * group, group);
    }
  };
  if (bf16) {
    int64_t rows = std::max<int64_t>(1, kElementBlock / group);
    return mapBf16Blocks({&x}, rows * group,
                         [&](int64_t, int64_t count, const float *const *in,
                             float *o) { normalize(in[0], o, count / group); });
  }
  requireF32(x, "rms_norm", "the input");
  Tensor out = ctx.placed(slot, DType::F32, x.shape());
  int64_t groups = x.numel() / group;
  const float *in = x.f32();
  float *o = out.f32();
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g)
    normalize(in + g * group, o + g * group, 1);
  return out;
}

Tensor cpu::rotary(Context &ctx, const Tensor &x, int64_t headDim,
                   int64_t rotaryDim, double theta, bool interleaved,
                   int64_t ropeType, double factor, double lowFreqFactor,
                   double highFreqFactor, int64_t originalMaxPositions,
                   double betaFast, double betaSlow, bool truncate,
                   double attentionFactor, bool transpose,
                   std::vector<double> shortFactor,
                   std::vector<double> longFactor, int64_t slot) {
  if (!onHostAsBf16(x))
    TPRT_IN_F32(x, cpu::rotary(ctx, widened(x), headDim, rotaryDim, theta,
                               interleaved, ropeType, factor, lowFreqFactor,
                               highFreqFactor, originalMaxPositions, betaFast,
                               betaSlow, truncate, attentionFactor, transpose,
                               shortFactor, longFactor))
  if (!x.defined() || (x.dtype() != DType::F32 && !onHostAsBf16(x)))
    requireF32(x, "rotary", "the input");
  RotaryPlan plan = planRotary(
      ctx, x, headDim, rotaryDim, theta, ropeType, factor, lowFreqFactor,
      highFreqFactor, originalMaxPositions, betaFast, betaSlow, truncate,
      attentionFactor, transpose, shortFactor, longFactor);
  int64_t batch = x.dim(0), seq = x.dim(1), heads = x.dim(2) / headDim,
          half = plan.rotaryDim / 2;
  const std::vector<float> &cosT = plan.tables->cosT, &sinT = plan.tables->sinT;
  // Rows of [B * S, H * headDim] from `first` on, in to o.
  int64_t width = heads * headDim;
  auto rotate = [&](const float *in, float *o, int64_t first, int64_t rows) {
    std::copy_n(in, rows * width, o);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t p = (first + r) % seq;
      for (int64_t h = 0; h < heads; ++h) {
        int64_t base = r * width + h * headDim;
        for (int64_t i = 0; i < half; ++i) {
          int64_t i1 = interleaved ? 2 * i : i;
          int64_t i2 = interleaved ? 2 * i + 1 : i + half;
          float c = cosT[p * half + i], s = sinT[p * half + i];
          float x1 = in[base + i1], x2 = in[base + i2];
          o[base + i1] = x1 * c - x2 * s;
          o[base + i2] = x2 * c + x1 * s;
        }
      }
    }
  };
  if (onHostAsBf16(x)) {
    int64_t rows = std::max<int64_t>(1, kElementBlock / width);
    return mapBf16Blocks(
        {&x}, rows * width,
        [&](int64_t begin, int64_t count, const float *const *in, float *o) {
          rotate(in[0], o, begin / width, count / width);
        });
  }
  requireF32(x, "rotary", "the input");
  Tensor out = ctx.placed(slot, DType::F32, x.shape());
  const float *in = x.f32();
  float *o = out.f32();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < batch * seq; ++row)
    rotate(in + row * width, o + row * width, row, 1);
  return out;
}

Tensor cpu::attention(Context &ctx, const Tensor &q, const Tensor &k,
                      const Tensor &v, const Tensor &keyMask, int64_t heads,
                      int64_t kvHeads, int64_t headDim, double scale,
                      bool causal, int64_t window, double softcap,
                      int64_t slot) {
  TPRT_IN_F32(q, cpu::attention(ctx, widened(q), widened(k), widened(v),
                                keyMask, heads, kvHeads, headDim, scale, causal,
                                window, softcap))
  AttentionShape shape(q, k, v, keyMask, heads, kvHeads, headDim, "attention");
  int64_t batch = shape.batch, sq = shape.sq, skv = shape.skv,
          group = shape.group, queryOffset = shape.queryOffset;
  const int64_t *mask = shape.mask;
  Tensor out = ctx.placed(slot, DType::F32, q.shape());
  const float *qd = q.f32(), *kd = k.f32(), *vd = v.f32();
  float *o = out.f32();
  float fscale = static_cast<float>(scale), cap = static_cast<float>(softcap);
  int64_t qStride = heads * headDim, kvStride = kvHeads * headDim;
  AttentionMasking masking{causal, window, cap, mask, skv};
  // Per (batch, head, block of queries), tiled over keys: a thread holds
  // one tile of scores, never a [sq, skv] matrix.
  int64_t queryBlocks = (sq + kAttentionQueryBlock - 1) / kAttentionQueryBlock;
#pragma omp parallel
  {
    std::vector<float> tile(kAttentionQueryBlock * kAttentionKeyBlock),
        acc(kAttentionQueryBlock * headDim), rowMax(kAttentionQueryBlock),
        rowSum(kAttentionQueryBlock);
#pragma omp for collapse(3) schedule(static)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t qb = 0; qb < queryBlocks; ++qb) {
          int64_t kvh = h / group, i0 = qb * kAttentionQueryBlock,
                  rows = std::min(kAttentionQueryBlock, sq - i0);
          masking.attendQueryBlock(
              qd + (b * sq + i0) * qStride + h * headDim, qStride,
              kd + b * skv * kvStride + kvh * headDim,
              vd + b * skv * kvStride + kvh * headDim, kvStride, rows, headDim,
              fscale, b, i0 + queryOffset, tile.data(), acc.data(),
              rowMax.data(), rowSum.data());
          // A query that sees no key gets zeros.
          for (int64_t i = 0; i < rows; ++i) {
            float inv = rowSum[i] > 0 ? 1.0f / rowSum[i] : 0.0f;
            cpu::scaleTo(acc.data() + i * headDim, inv,
                         o + (b * sq + i0 + i) * qStride + h * headDim,
                         headDim);
          }
        }
  }
  return out;
}

/// An activation over all of `x`, vectorized (Activation.h); bf16 in
/// blocks.
static Tensor activationOf(Context &ctx, const Tensor &x, cpu::Activation f,
                           const char *op, int64_t slot = -1) {
  if (onHostAsBf16(x))
    return mapBf16Blocks(
        {&x}, kElementBlock,
        [f](int64_t, int64_t count, const float *const *in, float *out) {
          cpu::activation(f, in[0], out, count);
        });
  requireF32(x, op, "the input");
  Tensor out = ctx.placed(slot, DType::F32, x.shape());
  cpu::activation(f, x.f32(), out.f32(), x.numel());
  return out;
}

Tensor cpu::silu(Context &ctx, const Tensor &x, int64_t slot) {
  if (!onHostAsBf16(x))
    TPRT_IN_F32(x, cpu::silu(ctx, widened(x)))
  return activationOf(ctx, x, cpu::Activation::Silu, "silu", slot);
}

Tensor cpu::gelu(Context &ctx, const Tensor &x, bool tanhApproximation,
                 int64_t slot) {
  if (!onHostAsBf16(x))
    TPRT_IN_F32(x, cpu::gelu(ctx, widened(x), tanhApproximation))
  return activationOf(ctx, x,
                      tanhApproximation ? cpu::Activation::GeluTanh
                                        : cpu::Activation::Gelu,
                      "gelu", slot);
}

Tensor cpu::relu_squared(Context &ctx, const Tensor &x, int64_t slot) {
  return unaryMap(
      x, "relu_squared", [](float v) { return v > 0 ? v * v : 0.0f; }, &ctx,
      slot);
}

/// A vectorized loop (Vector.h, built per ISA) over two host tensors of one
/// shape whose elements are T (uint16_t: bf16, float: f32).
template <typename T>
static Tensor
sameShapeElementwise(Context &ctx, const Tensor &a, const Tensor &b,
                     void (*loop)(const T *, const T *, T *, int64_t),
                     int64_t slot) {
  Tensor out = ctx.placed(slot, a.dtype(), a.shape());
  const auto *x = static_cast<const T *>(a.raw()),
             *y = static_cast<const T *>(b.raw());
  auto *o = static_cast<T *>(out.raw());
  cpu::parallelBlocks(a.numel(), kElementBlock,
                      [&](int64_t begin, int64_t count) {
                        loop(x + begin, y + begin, o + begin, count);
                      });
  return out;
}

Tensor cpu::add(Context &ctx, const Tensor &a, const Tensor &b, int64_t slot) {
  if (onHostAsBf16(a) && onHostAsBf16(b) && a.shape() == b.shape())
    return sameShapeElementwise(ctx, a, b, cpu::addBf16, slot);
  return binaryMap(
      a, b, "add", [](float x, float y) { return x + y; }, &ctx, slot);
}

Tensor cpu::mul(Context &ctx, const Tensor &a, const Tensor &b, int64_t slot) {
  if (onHostAsBf16(a) && onHostAsBf16(b) && a.shape() == b.shape())
    return sameShapeElementwise(ctx, a, b, cpu::mulBf16, slot);
  if (a.dtype() == DType::F32 && b.dtype() == DType::F32 &&
      a.shape() == b.shape()) // binaryMap's loop is SSE2's
    return sameShapeElementwise(ctx, a, b, cpu::mulTo, slot);
  return binaryMap(
      a, b, "mul", [](float x, float y) { return x * y; }, &ctx, slot);
}

Tensor cpu::scale(Context &ctx, const Tensor &x, double factor, int64_t slot) {
  float f = static_cast<float>(factor);
  return unaryMap(
      x, "scale", [f](float v) { return v * f; }, &ctx, slot);
}

Tensor cpu::softcap(Context &ctx, const Tensor &x, double cap, int64_t slot) {
  float c = static_cast<float>(cap);
  return unaryMap(
      x, "softcap", [c](float v) { return c * std::tanh(v / c); }, &ctx, slot);
}

Tensor cpu::feature_slice(Context &ctx, const Tensor &x, int64_t offset,
                          int64_t size, int64_t slot) {
  int64_t width = x.rank() ? x.dim(-1) : 0;
  int64_t rows = requireFeatureRange(x, offset, size, width, "feature_slice");
  std::vector<int64_t> shape = x.shape();
  shape.back() = size;
  Tensor out = resultTensor(&ctx, slot, x.dtype(), shape);
  size_t element = dtypeSize(x.dtype());
  copyByteRuns(out.raw(), size * element,
               static_cast<const unsigned char *>(x.raw()) + offset * element,
               width * element, size * element, rows);
  return out;
}

} // namespace tprt
