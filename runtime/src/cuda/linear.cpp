//===- linear.cpp - the linear family on cuBLAS ---------------------------===//
//
// Row-major x [rows, in] times w [out, in]^T is, read column-major, the
// product w^T(op T) x(op N) into out [out, rows]: one GEMM for the linear
// form, one strided-batched GEMM (the weight's stride 0) for the bmm form,
// as TPLinear dispatches them on the CPU; the backward's two products
// likewise. FP32 by default (no TF32); with bf16 autocast (`model
// --autocast bf16`, PyTorch autocast's rule for linears) both operands are
// rounded to bf16 and multiplied on the tensor cores with FP32
// accumulation into an FP32 result. A bf16 program's (tpc --dtype bf16)
// products take its bf16 operands as they are and round each FP32-
// accumulated result once to bf16, as the CPU's oneDNN bf16 products do;
// other mixes of types go through f32 (the CPU kernels' rule).
//
//===----------------------------------------------------------------------===//

#include "Cublas.h"
#include "Runtime.h"
#include "common/Checks.h"

namespace tprt {
namespace cuda {
namespace {

/// BF16 when both operands are bf16 (the product runs in bf16), else F32.
DType productType(const Tensor &a, const Tensor &b) {
  return a.defined() && b.defined() && a.dtype() == DType::BF16 &&
                 b.dtype() == DType::BF16
             ? DType::BF16
             : DType::F32;
}

void checkLinear(const Tensor &x, const Tensor &w, DType type, const char *op) {
  requireGpu(x, type, op, "the input");
  requireGpu(w, type, op, "the weight");
  if (w.rank() != 2 || x.rank() < 1 || x.dim(-1) != w.dim(1))
    fatal(std::string(op) + ": input " + x.describe() +
          " does not match weight " + w.describe() + " ([out, in])");
}

/// One column-major GEMM operand: `elements` values (of the product's
/// type) read as op(matrix) with leading dimension `ld`, `stride` apart
/// between batch entries.
struct Operand {
  const void *data;
  int64_t elements;
  cublasOperation_t op;
  int64_t ld, stride;
};

/// C [m, n] (column-major, ldc m, `strideC` apart) = op(A) op(B) for each
/// of `batch` entries, A, B and C of `type` (F32 or BF16).
void gemm(Context &ctx, const char *what, DType type, int64_t m, int64_t n,
          int64_t k, const Operand &a, const Operand &b, void *c,
          int64_t strideC, int64_t batch) {
  const float one = 1.0f, zero = 0.0f;
  if (type == DType::BF16) {
    check(cublas().gemmStridedBatchedEx(
              blas(), a.op, b.op, m, n, k, &one, a.data, CUDA_R_16BF, a.ld,
              a.stride, b.data, CUDA_R_16BF, b.ld, b.stride, &zero, c,
              CUDA_R_16BF, m, strideC, batch, CUBLAS_COMPUTE_32F,
              CUBLAS_GEMM_DEFAULT),
          what);
    return;
  }
  const auto *af = static_cast<const float *>(a.data);
  const auto *bf = static_cast<const float *>(b.data);
  if (ctx.autocast() == DType::BF16) {
    std::shared_ptr<unsigned char[]> a16 = toBf16(af, a.elements);
    std::shared_ptr<unsigned char[]> b16 = toBf16(bf, b.elements);
    check(cublas().gemmStridedBatchedEx(
              blas(), a.op, b.op, m, n, k, &one, a16.get(), CUDA_R_16BF, a.ld,
              a.stride, b16.get(), CUDA_R_16BF, b.ld, b.stride, &zero, c,
              CUDA_R_32F, m, strideC, batch, CUBLAS_COMPUTE_32F,
              CUBLAS_GEMM_DEFAULT),
          what);
    return;
  }
  check(cublas().sgemmStridedBatched(
            blas(), a.op, b.op, m, n, k, &one, af, a.ld, a.stride, bf, b.ld,
            b.stride, &zero, static_cast<float *>(c), m, strideC, batch),
        what);
}

/// The flat form: x's leading dimensions are the product's rows.
Tensor linearFlat(Context &ctx, const Tensor &x, const Tensor &w) {
  DType type = productType(x, w);
  if (type == DType::F32)
    TPRT_IN_F32(x, linearFlat(ctx, widened(x), widened(w)))
  checkLinear(x, w, type, "linear");
  int64_t in = w.dim(1), outF = w.dim(0), rows = x.numel() / in;
  std::vector<int64_t> shape = x.shape();
  shape.back() = outF;
  Tensor out = Tensor::uninitialized(type, shape, Device::CUDA);
  if (rows == 0 || outF == 0)
    return out;
  gemm(ctx, "linear: cuBLAS GEMM", type, outF, rows, in,
       {w.raw(), w.numel(), CUBLAS_OP_T, in, 0},
       {x.raw(), x.numel(), CUBLAS_OP_N, in, 0}, out.raw(), 0, 1);
  return out;
}

/// The bmm form: each [seq, in] slice of a 3-D x times w^T.
Tensor linearBmm(Context &ctx, const Tensor &x, const Tensor &w) {
  DType type = productType(x, w);
  if (type == DType::F32)
    TPRT_IN_F32(x, linearBmm(ctx, widened(x), widened(w)))
  checkLinear(x, w, type, "linear (bmm)");
  if (x.rank() != 3)
    fatal("linear (bmm): the input must be 3-D, got " + x.describe());
  int64_t batch = x.dim(0), seq = x.dim(1), in = w.dim(1), outF = w.dim(0);
  Tensor out = Tensor::uninitialized(type, {batch, seq, outF}, Device::CUDA);
  if (batch == 0 || seq == 0 || outF == 0)
    return out;
  gemm(ctx, "linear (bmm): cuBLAS strided-batched GEMM", type, outF, seq, in,
       {w.raw(), w.numel(), CUBLAS_OP_T, in, 0},
       {x.raw(), x.numel(), CUBLAS_OP_N, in, seq * in}, out.raw(), seq * outF,
       batch);
  return out;
}
} // namespace

Tensor linear(Context &ctx, const Tensor &x, const Tensor &w, LinearForm form,
              int64_t) {
  return form == LinearForm::Bmm ? linearBmm(ctx, x, w) : linearFlat(ctx, x, w);
}

Tensor linear_grad_input(Context &ctx, const Tensor &dy, const Tensor &w) {
  DType type = productType(dy, w);
  if (type == DType::F32)
    TPRT_IN_F32(dy, cuda::linear_grad_input(ctx, widened(dy), widened(w)))
  requireGpu(dy, type, "linear_grad_input", "dy");
  requireGpu(w, type, "linear_grad_input", "the weight");
  if (w.rank() != 2 || dy.rank() < 1 || dy.dim(-1) != w.dim(0))
    fatal("linear_grad_input: dy " + dy.describe() + " does not match weight " +
          w.describe());
  int64_t outF = w.dim(0), in = w.dim(1), rows = outF ? dy.numel() / outF : 0;
  std::vector<int64_t> shape = dy.shape();
  shape.back() = in;
  // dx [rows, in] = dy [rows, out] w [out, in]: column-major, w(N) dy(N).
  // The GEMM writes every element (beta 0); an empty product is zeros.
  if (rows == 0 || outF == 0 || in == 0)
    return zeros(shape, type);
  Tensor dx = Tensor::uninitialized(type, shape, Device::CUDA);
  gemm(ctx, "linear_grad_input: cuBLAS GEMM", type, in, rows, outF,
       {w.raw(), w.numel(), CUBLAS_OP_N, in, 0},
       {dy.raw(), dy.numel(), CUBLAS_OP_N, outF, 0}, dx.raw(), 0, 1);
  return dx;
}

Tensor linear_grad_weight(Context &ctx, const Tensor &dy, const Tensor &x) {
  DType type = productType(dy, x);
  if (type == DType::F32)
    TPRT_IN_F32(reducedType(dy, x),
                cuda::linear_grad_weight(ctx, widened(dy), widened(x)))
  requireGpu(dy, type, "linear_grad_weight", "dy");
  requireGpu(x, type, "linear_grad_weight", "x");
  int64_t outF = dy.rank() ? dy.dim(-1) : 0, in = x.rank() ? x.dim(-1) : 0;
  int64_t rows = outF ? dy.numel() / outF : 0;
  if (dy.rank() < 1 || x.rank() != dy.rank() ||
      rows != (in ? x.numel() / in : 0))
    fatal("linear_grad_weight: dy " + dy.describe() + " and x " + x.describe() +
          " have different rows");
  // dw [out, in] = dy^T x: column-major, x(N) dy(T).
  if (rows == 0 || outF == 0 || in == 0)
    return zeros({outF, in}, type);
  Tensor dw = Tensor::uninitialized(type, {outF, in}, Device::CUDA);
  gemm(ctx, "linear_grad_weight: cuBLAS GEMM", type, in, outF, rows,
       {x.raw(), x.numel(), CUBLAS_OP_N, in, 0},
       {dy.raw(), dy.numel(), CUBLAS_OP_T, outF, 0}, dw.raw(), 0, 1);
  return dw;
}

/// The bias in place on the product (f32) or by bias_add; SiluMul is
/// composed (the SiLU, then the product with `other`).
Tensor linear_epilogue(Context &ctx, const Tensor &x, const Tensor &w,
                       const Tensor &other, LinearForm form,
                       LinearEpilogue epilogue, int64_t) {
  Tensor out = cuda::linear(ctx, x, w, form);
  if (epilogue == LinearEpilogue::SiluMul)
    return cuda::mul(ctx, cuda::silu(ctx, out), other);
  if (out.dtype() != DType::F32)
    return tprt::bias_add(ctx, out, other);
  addBias(out, other, "linear");
  return out;
}

} // namespace cuda
} // namespace tprt
