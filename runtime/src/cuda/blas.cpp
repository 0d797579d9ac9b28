//===- blas.cpp - the linear forms on cuBLAS ------------------------------===//
//
// Row-major x [rows, in] times w [out, in]^T is, read column-major, the
// product w^T(op T) x(op N) into out [out, rows]: one cublasSgemm for the
// linear form, one strided-batched call (the weight's stride 0) for the bmm
// form, as TPLinear dispatches them on the CPU.
//
//===----------------------------------------------------------------------===//

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

} // namespace

Tensor linear(Context &, const Tensor &x, const Tensor &w) {
  checkLinear(x, w, "linear");
  int64_t in = w.dim(1), outF = w.dim(0), rows = x.numel() / in;
  std::vector<int64_t> shape = x.shape();
  shape.back() = outF;
  Tensor out = Tensor::uninitialized(DType::F32, shape, Device::CUDA);
  if (rows == 0 || outF == 0)
    return out;
  const float one = 1.0f, zero = 0.0f;
  check(cublasSgemm_64(blas(), CUBLAS_OP_T, CUBLAS_OP_N, outF, rows, in, &one,
                       w.f32(), in, x.f32(), in, &zero, out.f32(), outF),
        "linear: cublasSgemm");
  return out;
}

Tensor linear_bmm(Context &, const Tensor &x, const Tensor &w) {
  checkLinear(x, w, "linear_bmm");
  if (x.rank() != 3)
    fatal("linear_bmm: the input must be 3-D, got " + x.describe());
  int64_t batch = x.dim(0), seq = x.dim(1), in = w.dim(1), outF = w.dim(0);
  Tensor out =
      Tensor::uninitialized(DType::F32, {batch, seq, outF}, Device::CUDA);
  if (batch == 0 || seq == 0 || outF == 0)
    return out;
  const float one = 1.0f, zero = 0.0f;
  check(cublasSgemmStridedBatched_64(blas(), CUBLAS_OP_T, CUBLAS_OP_N, outF,
                                     seq, in, &one, w.f32(), in, 0, x.f32(), in,
                                     seq * in, &zero, out.f32(), outF,
                                     seq * outF, batch),
        "linear_bmm: cublasSgemmStridedBatched");
  return out;
}

Tensor linear_grad_input(Context &, const Tensor &dy, const Tensor &w) {
  requireGpu(dy, DType::F32, "linear_grad_input", "dy");
  requireGpu(w, DType::F32, "linear_grad_input", "the weight");
  if (w.rank() != 2 || dy.rank() < 1 || dy.dim(-1) != w.dim(0))
    fatal("linear_grad_input: dy " + dy.describe() + " does not match weight " +
          w.describe());
  int64_t outF = w.dim(0), in = w.dim(1), rows = outF ? dy.numel() / outF : 0;
  std::vector<int64_t> shape = dy.shape();
  shape.back() = in;
  // dx [rows, in] = dy [rows, out] w [out, in]: column-major, w(N) dy(N).
  Tensor dx = zeros(shape);
  if (rows == 0 || outF == 0 || in == 0)
    return dx;
  const float one = 1.0f, zero = 0.0f;
  check(cublasSgemm_64(blas(), CUBLAS_OP_N, CUBLAS_OP_N, in, rows, outF, &one,
                       w.f32(), in, dy.f32(), outF, &zero, dx.f32(), in),
        "linear_grad_input: cublasSgemm");
  return dx;
}

Tensor linear_grad_weight(Context &, const Tensor &dy, const Tensor &x) {
  requireGpu(dy, DType::F32, "linear_grad_weight", "dy");
  requireGpu(x, DType::F32, "linear_grad_weight", "x");
  int64_t outF = dy.rank() ? dy.dim(-1) : 0, in = x.rank() ? x.dim(-1) : 0;
  int64_t rows = outF ? dy.numel() / outF : 0;
  if (dy.rank() < 1 || x.rank() != dy.rank() ||
      rows != (in ? x.numel() / in : 0))
    fatal("linear_grad_weight: dy " + dy.describe() + " and x " + x.describe() +
          " have different rows");
  // dw [out, in] = dy^T x: column-major, x(N) dy(T).
  Tensor dw = zeros({outF, in});
  if (rows == 0 || outF == 0 || in == 0)
    return dw;
  const float one = 1.0f, zero = 0.0f;
  check(cublasSgemm_64(blas(), CUBLAS_OP_N, CUBLAS_OP_T, in, outF, rows, &one,
                       x.f32(), in, dy.f32(), outF, &zero, dw.f32(), in),
        "linear_grad_weight: cublasSgemm");
  return dw;
}

} // namespace cuda
} // namespace tprt
