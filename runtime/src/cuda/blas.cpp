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

} // namespace cuda
} // namespace tprt
