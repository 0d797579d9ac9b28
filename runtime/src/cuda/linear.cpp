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
// other mixes of types go through f32 (the CPU kernels' rule). The fused
// f32 calls add in the GEMM (beta 1): linear_add the product into its
// residual, accumulate_linear_grad_weight the gradient into the FP32
// buffer; linear_epilogue's SiLU-and-multiply is one pass over the product
// (of any float type).
//
//===----------------------------------------------------------------------===//

#include "Cublas.h"
#include "CublasLt.h"
#include "Gemm.h"
#include "common/Checks.h"

#include <utility>

namespace tprt {
namespace cuda {

void gemm(Context &ctx, const char *what, DType operands, DType result,
          int64_t m, int64_t n, int64_t k, const GemmOperand &a,
          const GemmOperand &b, void *c, int64_t strideC, int64_t batch,
          float beta) {
  const float one = 1.0f;
  auto gemmEx = [&](const void *aData, const void *bData, cudaDataType cType) {
    check(cublas().gemmStridedBatchedEx(
              blas(), a.op, b.op, m, n, k, &one, aData, CUDA_R_16BF, a.ld,
              a.stride, bData, CUDA_R_16BF, b.ld, b.stride, &beta, c, cType, m,
              strideC, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          what);
  };
  if (operands == DType::BF16)
    return gemmEx(a.data, b.data,
                  result == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F);
  const auto *af = static_cast<const float *>(a.data);
  const auto *bf = static_cast<const float *>(b.data);
  if (ctx.autocast() == DType::BF16) {
    std::shared_ptr<unsigned char[]> a16 = toBf16(af, a.elements);
    std::shared_ptr<unsigned char[]> b16 = toBf16(bf, b.elements);
    return gemmEx(a16.get(), b16.get(), CUDA_R_32F);
  }
  check(cublas().sgemmStridedBatched(
            blas(), a.op, b.op, m, n, k, &one, af, a.ld, a.stride, bf, b.ld,
            b.stride, &beta, static_cast<float *>(c), m, strideC, batch),
        what);
}

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

/// `out` = x w^T (beta 0) or `out` + x w^T (beta 1) in `form`, x and w of
/// the product's `type` and checked, `out` of its shape and type: the flat
/// form flattens x's leading dimensions into rows, the bmm form multiplies
/// each [seq, in] slice of a 3-D x by w^T (the weight's stride 0).
void productInto(Context &ctx, const Tensor &x, const Tensor &w,
                 LinearForm form, DType type, Tensor &out, float beta) {
  int64_t in = w.dim(1), outF = w.dim(0);
  if (out.numel() == 0)
    return;
  if (in == 0) { // an empty sum
    if (beta == 0.0f)
      memset(out.raw(), 0, out.bytes());
    return;
  }
  GemmOperand weight{w.raw(), w.numel(), CUBLAS_OP_T, in, 0};
  if (form == LinearForm::Bmm) {
    int64_t batch = x.dim(0), seq = x.dim(1);
    gemm(ctx, "linear (bmm): cuBLAS strided-batched GEMM", type, type, outF,
         seq, in, weight, {x.raw(), x.numel(), CUBLAS_OP_N, in, seq * in},
         out.raw(), seq * outF, batch, beta);
    return;
  }
  gemm(ctx, "linear: cuBLAS GEMM", type, type, outF, x.numel() / in, in, weight,
       {x.raw(), x.numel(), CUBLAS_OP_N, in, 0}, out.raw(), 0, 1, beta);
}

/// The product's type after the operand checks of `form`, and its shape.
DType checkedProduct(const Tensor &x, const Tensor &w, LinearForm form,
                     std::vector<int64_t> &shape) {
  DType type = productType(x, w);
  bool bmm = form == LinearForm::Bmm;
  checkLinear(x, w, type, bmm ? "linear (bmm)" : "linear");
  if (bmm && x.rank() != 3)
    fatal("linear (bmm): the input must be 3-D, got " + x.describe());
  shape = x.shape();
  shape.back() = w.dim(0);
  return type;
}

/// The rows of dy [.., out] and x [.., in] (checked: of `type`, on the GPU,
/// as many rows).
int64_t weightGradRows(const Tensor &dy, const Tensor &x, DType type,
                       const char *op) {
  requireGpu(dy, type, op, "dy");
  requireGpu(x, type, op, "x");
  int64_t outF = dy.rank() ? dy.dim(-1) : 0, in = x.rank() ? x.dim(-1) : 0;
  int64_t rows = outF ? dy.numel() / outF : 0;
  if (dy.rank() < 1 || x.rank() != dy.rank() ||
      rows != (in ? x.numel() / in : 0))
    fatal(std::string(op) + ": dy " + dy.describe() + " and x " + x.describe() +
          " have different rows");
  return rows;
}

/// dw [out, in] (beta 0) or dw + (beta 1) dy^T x over `rows` rows:
/// column-major, x(N) dy(T); `dw` of the type the operands' give.
void weightGradInto(Context &ctx, const Tensor &dy, const Tensor &x, DType type,
                    int64_t rows, void *dw, float beta) {
  int64_t outF = dy.dim(-1), in = x.dim(-1);
  gemm(ctx, "linear_grad_weight: cuBLAS GEMM", type, type, in, outF, rows,
       {x.raw(), x.numel(), CUBLAS_OP_N, in, 0},
       {dy.raw(), dy.numel(), CUBLAS_OP_T, outF, 0}, dw, 0, 1, beta);
}

/// Whether linear_add's GEMM can add the product into `other`'s values:
/// f32 operands (the product's type rule otherwise rounds the product
/// before the sum) and a residual of the product's shape on the GPU.
bool addsInGemm(const Tensor &x, const Tensor &w, const Tensor &other) {
  if (!x.defined() || !w.defined() || !other.defined() ||
      x.dtype() != DType::F32 || w.dtype() != DType::F32 ||
      other.dtype() != DType::F32 || !other.onGpu() || w.rank() != 2 ||
      x.rank() < 1)
    return false;
  std::vector<int64_t> product = x.shape();
  product.back() = w.dim(0);
  return other.shape() == product;
}

/// A bf16 linear of the flat form with a bf16 bias [out]: one cuBLASLt
/// matmul whose epilogue adds the bias to the FP32 accumulator, rounded
/// once. Undefined where that does not apply or cuBLASLt declines (the
/// caller adds the bias after the GEMM).
Tensor biasInGemm(const Tensor &x, const Tensor &w, const Tensor &bias,
                  LinearForm form, LinearEpilogue epilogue) {
  if (epilogue != LinearEpilogue::Bias || form != LinearForm::Flat ||
      productType(x, w) != DType::BF16 || !bias.defined() ||
      bias.dtype() != DType::BF16 || !bias.onGpu())
    return Tensor();
  std::vector<int64_t> shape;
  checkedProduct(x, w, form, shape);
  int64_t in = w.dim(1), outF = w.dim(0), rows = in ? x.numel() / in : 0;
  if (bias.rank() != 1 || bias.dim(0) != outF || rows == 0 || in == 0 ||
      outF == 0)
    return Tensor();
  Tensor out = Tensor::uninitialized(DType::BF16, shape, Device::CUDA);
  if (!gemmBiasBf16(outF, rows, in, w.raw(), x.raw(), bias.raw(), out.raw()))
    return Tensor();
  return out;
}

} // namespace

Tensor linear(Context &ctx, const Tensor &x, const Tensor &w, LinearForm form,
              int64_t) {
  if (productType(x, w) == DType::F32)
    TPRT_IN_F32(x, cuda::linear(ctx, widened(x), widened(w), form))
  std::vector<int64_t> shape;
  DType type = checkedProduct(x, w, form, shape);
  Tensor out = Tensor::uninitialized(type, shape, Device::CUDA);
  productInto(ctx, x, w, form, type, out, 0.0f);
  return out;
}

Tensor linear_add(Context &ctx, const Tensor &x, const Tensor &w,
                  const Tensor &other, LinearForm form, bool once) {
  if (once && ctx.tp().rank() != 0)
    return cuda::linear(ctx, x, w, form);
  if (!addsInGemm(x, w, other))
    return composed::linear_add(ctx, x, w, other, form, /*once=*/false);
  std::vector<int64_t> shape;
  checkedProduct(x, w, form, shape);
  Tensor out = Tensor::uninitialized(DType::F32, shape, Device::CUDA);
  copy(out.raw(), Device::CUDA, other.raw(), Device::CUDA, out.bytes());
  productInto(ctx, x, w, form, DType::F32, out, 1.0f);
  return out;
}

Tensor linear_add_consuming(Context &ctx, const Tensor &x, const Tensor &w,
                            Tensor &other, LinearForm form, bool once) {
  Tensor residual = std::exchange(other, Tensor());
  if (once && ctx.tp().rank() != 0)
    return cuda::linear(ctx, x, w, form);
  if (!addsInGemm(x, w, residual) || !residual.soleOwner())
    return cuda::linear_add(ctx, x, w, residual, form, /*once=*/false);
  std::vector<int64_t> shape;
  checkedProduct(x, w, form, shape);
  productInto(ctx, x, w, form, DType::F32, residual, 1.0f);
  return residual;
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
  gemm(ctx, "linear_grad_input: cuBLAS GEMM", type, type, in, rows, outF,
       {w.raw(), w.numel(), CUBLAS_OP_N, in, 0},
       {dy.raw(), dy.numel(), CUBLAS_OP_N, outF, 0}, dx.raw(), 0, 1);
  return dx;
}

Tensor linear_grad_weight(Context &ctx, const Tensor &dy, const Tensor &x) {
  DType type = productType(dy, x);
  if (type == DType::F32)
    TPRT_IN_F32(reducedType(dy, x),
                cuda::linear_grad_weight(ctx, widened(dy), widened(x)))
  int64_t rows = weightGradRows(dy, x, type, "linear_grad_weight");
  int64_t outF = dy.dim(-1), in = x.dim(-1);
  if (rows == 0 || outF == 0 || in == 0)
    return zeros({outF, in}, type);
  Tensor dw = Tensor::uninitialized(type, {outF, in}, Device::CUDA);
  weightGradInto(ctx, dy, x, type, rows, dw.raw(), 0.0f);
  return dw;
}

void accumulate_linear_grad_weight(Context &ctx, const Tensor &dy,
                                   const Tensor &x, const Tensor &param,
                                   const char *fqn, int64_t splitDim,
                                   bool owned) {
  // Only f32 adds in the product: a bf16 or f16 gradient is rounded to its
  // type before it is added, as the separate calls do on both devices.
  if (!dy.defined() || !x.defined() || dy.dtype() != DType::F32 ||
      x.dtype() != DType::F32)
    return composed::accumulate_linear_grad_weight(ctx, dy, x, param, fqn,
                                                   splitDim, owned);
  const char *op = "accumulate_linear_grad_weight";
  int64_t rows = weightGradRows(dy, x, DType::F32, op);
  int64_t outF = dy.dim(-1), in = x.dim(-1);
  if (param.rank() != 2 || outF != param.dim(0) || in != param.dim(1))
    fatal(std::string(op) + ": dy " + dy.describe() + " and x " + x.describe() +
          " do not give the gradient of '" + fqn + "', " + param.describe());
  Context::GradBuffer &buffer = ctx.gradBuffer(param, fqn);
  bool first = buffer.takeFirst(splitDim, owned);
  if (rows > 0 && outF > 0 && in > 0)
    weightGradInto(ctx, dy, x, DType::F32, rows, buffer.grad.raw(),
                   first ? 0.0f : 1.0f);
  else if (first)
    memset(buffer.grad.raw(), 0, buffer.grad.bytes());
}

/// A bf16 product's bias in cuBLASLt's epilogue (biasInGemm), else in
/// place on the product (in f32, rounded once); SiluMul in one pass over
/// the product in place where `other` is of its type and shape (a bf16
/// program's product rounded as linear rounds it, silu(p) * other in f32
/// rounded once, as the CPU's fused bf16 epilogue), else composed (the
/// SiLU, then the product with `other`).
Tensor linear_epilogue(Context &ctx, const Tensor &x, const Tensor &w,
                       const Tensor &other, LinearForm form,
                       LinearEpilogue epilogue, int64_t) {
  if (Tensor out = biasInGemm(x, w, other, form, epilogue); out.defined())
    return out;
  Tensor out = cuda::linear(ctx, x, w, form);
  if (epilogue == LinearEpilogue::SiluMul) {
    if (!other.defined() || other.dtype() != out.dtype() ||
        other.shape() != out.shape())
      return cuda::mul(ctx, cuda::silu(ctx, out), other);
    siluMulInPlace(out, other);
    return out;
  }
  // In place on the product of any float type; a bias of another reduced
  // type than the product's as bias_add takes it.
  if (reducedType(other) != DType::F32 && other.dtype() != out.dtype())
    return cuda::bias_add(ctx, out, other, -1);
  addBias(out, other, "linear");
  return out;
}

} // namespace cuda
} // namespace tprt
