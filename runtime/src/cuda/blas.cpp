//===- blas.cpp - the linear forms on cuBLAS ------------------------------===//
//
// Row-major x [rows, in] times w [out, in]^T is, read column-major, the
// product w^T(op T) x(op N) into out [out, rows]: one GEMM for the linear
// form, one strided-batched GEMM (the weight's stride 0) for the bmm form,
// as TPLinear dispatches them on the CPU; the backward's two products
// likewise. FP32 by default (no TF32); with bf16 autocast (`model
// --autocast bf16`, PyTorch autocast's rule for linears) both operands are
// rounded to bf16 and multiplied on the tensor cores with FP32
// accumulation into an FP32 result.
//
//===----------------------------------------------------------------------===//

#include "Cublas.h"
#include "Runtime.h"

namespace tprt {
namespace cuda {
namespace {

void checkLinear(const Tensor &x, const Tensor &w, const char *op) {
  requireGpu(x, DType::F32, op, "the input");
  requireGpu(w, DType::F32, op, "the weight");
  if (w.rank() != 2 || x.rank() < 1 || x.dim(-1) != w.dim(1))
    fatal(std::string(op) + ": input " + x.describe() +
          " does not match weight " + w.describe() + " ([out, in])");
}

/// One column-major GEMM operand: `elements` floats read as op(matrix)
/// with leading dimension `ld`, `stride` apart between batch entries.
struct Operand {
  const float *data;
  int64_t elements;
  cublasOperation_t op;
  int64_t ld, stride;
};

/// C [m, n] (column-major, ldc m, `strideC` apart) = op(A) op(B) for each
/// of `batch` entries.
void gemm(Context &ctx, const char *what, int64_t m, int64_t n, int64_t k,
          const Operand &a, const Operand &b, float *c, int64_t strideC,
          int64_t batch) {
  const float one = 1.0f, zero = 0.0f;
  if (ctx.autocast() == DType::BF16) {
    std::shared_ptr<unsigned char[]> a16 = toBf16(a.data, a.elements);
    std::shared_ptr<unsigned char[]> b16 = toBf16(b.data, b.elements);
    check(cublas().gemmStridedBatchedEx(
              blas(), a.op, b.op, m, n, k, &one, a16.get(), CUDA_R_16BF, a.ld,
              a.stride, b16.get(), CUDA_R_16BF, b.ld, b.stride, &zero, c,
              CUDA_R_32F, m, strideC, batch, CUBLAS_COMPUTE_32F,
              CUBLAS_GEMM_DEFAULT),
          what);
    return;
  }
  check(cublas().sgemmStridedBatched(blas(), a.op, b.op, m, n, k, &one, a.data,
                                     a.ld, a.stride, b.data, b.ld, b.stride,
                                     &zero, c, m, strideC, batch),
        what);
}

} // namespace

Tensor linear(Context &ctx, const Tensor &x, const Tensor &w) {
  checkLinear(x, w, "linear");
  int64_t in = w.dim(1), outF = w.dim(0), rows = x.numel() / in;
  std::vector<int64_t> shape = x.shape();
  shape.back() = outF;
  Tensor out = Tensor::uninitialized(DType::F32, shape, Device::CUDA);
  if (rows == 0 || outF == 0)
    return out;
  gemm(ctx, "linear: cuBLAS GEMM", outF, rows, in,
       {w.f32(), w.numel(), CUBLAS_OP_T, in, 0},
       {x.f32(), x.numel(), CUBLAS_OP_N, in, 0}, out.f32(), 0, 1);
  return out;
}

Tensor linear_bmm(Context &ctx, const Tensor &x, const Tensor &w) {
  checkLinear(x, w, "linear_bmm");
  if (x.rank() != 3)
    fatal("linear_bmm: the input must be 3-D, got " + x.describe());
  int64_t batch = x.dim(0), seq = x.dim(1), in = w.dim(1), outF = w.dim(0);
  Tensor out =
      Tensor::uninitialized(DType::F32, {batch, seq, outF}, Device::CUDA);
  if (batch == 0 || seq == 0 || outF == 0)
    return out;
  gemm(ctx, "linear_bmm: cuBLAS strided-batched GEMM", outF, seq, in,
       {w.f32(), w.numel(), CUBLAS_OP_T, in, 0},
       {x.f32(), x.numel(), CUBLAS_OP_N, in, seq * in}, out.f32(), seq * outF,
       batch);
  return out;
}

Tensor linear_grad_input(Context &ctx, const Tensor &dy, const Tensor &w) {
  requireGpu(dy, DType::F32, "linear_grad_input", "dy");
  requireGpu(w, DType::F32, "linear_grad_input", "the weight");
  if (w.rank() != 2 || dy.rank() < 1 || dy.dim(-1) != w.dim(0))
    fatal("linear_grad_input: dy " + dy.describe() + " does not match weight " +
          w.describe());
  int64_t outF = w.dim(0), in = w.dim(1), rows = outF ? dy.numel() / outF : 0;
  std::vector<int64_t> shape = dy.shape();
  shape.back() = in;
  // dx [rows, in] = dy [rows, out] w [out, in]: column-major, w(N) dy(N).
  // The GEMM writes every element (beta 0); an empty product is zeros.
  if (rows == 0 || outF == 0 || in == 0)
    return zeros(shape);
  Tensor dx = Tensor::uninitialized(DType::F32, shape, Device::CUDA);
  gemm(ctx, "linear_grad_input: cuBLAS GEMM", in, rows, outF,
       {w.f32(), w.numel(), CUBLAS_OP_N, in, 0},
       {dy.f32(), dy.numel(), CUBLAS_OP_N, outF, 0}, dx.f32(), 0, 1);
  return dx;
}

Tensor linear_grad_weight(Context &ctx, const Tensor &dy, const Tensor &x) {
  requireGpu(dy, DType::F32, "linear_grad_weight", "dy");
  requireGpu(x, DType::F32, "linear_grad_weight", "x");
  int64_t outF = dy.rank() ? dy.dim(-1) : 0, in = x.rank() ? x.dim(-1) : 0;
  int64_t rows = outF ? dy.numel() / outF : 0;
  if (dy.rank() < 1 || x.rank() != dy.rank() ||
      rows != (in ? x.numel() / in : 0))
    fatal("linear_grad_weight: dy " + dy.describe() + " and x " + x.describe() +
          " have different rows");
  // dw [out, in] = dy^T x: column-major, x(N) dy(T).
  if (rows == 0 || outF == 0 || in == 0)
    return zeros({outF, in});
  Tensor dw = Tensor::uninitialized(DType::F32, {outF, in}, Device::CUDA);
  gemm(ctx, "linear_grad_weight: cuBLAS GEMM", in, outF, rows,
       {x.f32(), x.numel(), CUBLAS_OP_N, in, 0},
       {dy.f32(), dy.numel(), CUBLAS_OP_T, outF, 0}, dw.f32(), 0, 1);
  return dw;
}

} // namespace cuda
} // namespace tprt
