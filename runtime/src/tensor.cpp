//===- tensor.cpp - tprt tensors, dtypes and errors -----------------------===//

#include "Bf16.h"
#include "common/FatalScope.h"
#include "cpu/Vector.h"
#include "cuda/Cuda.h"
#include "tprt/tprt.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mpi.h>
#include <new>
#include <sstream>
#include <sys/mman.h>
#include <unistd.h>

namespace tprt {

namespace {

/// fatal's message and MPI_Abort; `quick` leaves without running static
/// destructors (std::_Exit).
[[noreturn]] void stop(const std::string &message, bool quick) {
  int initialized = 0, finalized = 0, rank = 0, size = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  bool mpi = initialized && !finalized;
  if (mpi) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  if (size > 1)
    std::fprintf(stderr, "tprt: error (rank %d): %s\n", rank, message.c_str());
  else
    std::fprintf(stderr, "tprt: error: %s\n", message.c_str());
  std::fflush(stderr);
  if (mpi && size > 1)
    MPI_Abort(MPI_COMM_WORLD, 1);
  if (quick)
    std::_Exit(1);
  std::exit(1);
}

} // namespace

void fatal(const std::string &message) {
  if (ThrowingFatal::active())
    throw FatalError(message);
  stop(message, /*quick=*/false);
}

bool keepsEveryKey(const Tensor &mask) {
  if (!mask.defined() || mask.dtype() != DType::I64 ||
      mask.device() != Device::CPU)
    return false;
  const int64_t *m = mask.i64();
  return std::all_of(m, m + mask.numel(), [](int64_t v) { return v != 0; });
}

void fatalFromThread(const std::string &message) {
  stop(message, /*quick=*/true);
}

uint64_t physicalMemoryBytes() {
  static const uint64_t bytes = [] {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? uint64_t(pages) * uint64_t(size)
                                 : uint64_t(1) << 47;
  }();
  return bytes;
}

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I64:
    return "i64";
  }
  return "?";
}

const char *deviceName(Device device) {
  return device == Device::CUDA ? "cuda" : "cpu";
}

bool cudaBackendBuilt() {
#ifdef TPRT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

Tensor Tensor::uninitialized(DType dtype, std::vector<int64_t> shape,
                             Device device) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.device_ = device;
  // The size is checked before anything is allocated: a crafted or
  // mistaken shape is an error that says how large, not a wrapped size.
  uint64_t bytes = dtypeSize(dtype);
  for (int64_t d : t.shape_) {
    if (d < 0)
      fatal("negative tensor dimension in " + t.describe());
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) ||
        bytes > physicalMemoryBytes())
      fatal("a tensor of shape " + t.describe() +
            " does not fit in this machine's " +
            std::to_string(physicalMemoryBytes()) + " bytes of memory");
  }
  if (device == Device::CUDA) {
#ifdef TPRT_WITH_CUDA
    t.storage_ = cuda::allocate(bytes);
    return t;
#else
    fatal("this runtime was built without the CUDA backend");
#endif
  }
  // new[] without () leaves the bytes uninitialized; at least one byte so
  // that empty tensors are still defined.
  unsigned char *data =
      new (std::nothrow) unsigned char[std::max<uint64_t>(bytes, 1)];
  if (!data)
    fatal("cannot allocate " + std::to_string(bytes) + " bytes for " +
          t.describe());
  t.storage_ = std::shared_ptr<unsigned char[]>(data);
  return t;
}

Tensor Tensor::mapped(int fd, uint64_t offset, DType dtype,
                      std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  uint64_t start = offset / page * page, length = offset - start + t.bytes();
  // MAP_POPULATE reads the pages in now, so the time of the read is spent
  // here, as a copy's would be.
  void *base =
      ::mmap(nullptr, length, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_POPULATE, fd, static_cast<off_t>(start));
  if (base == MAP_FAILED)
    return Tensor();
  std::shared_ptr<unsigned char[]> mapping(
      static_cast<unsigned char *>(base),
      [length](unsigned char *p) { ::munmap(p, length); });
  t.storage_ = std::shared_ptr<unsigned char[]>(mapping, mapping.get() +
                                                             (offset - start));
  return t;
}

Tensor Tensor::view(const Tensor &base, int64_t offset,
                    std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = base.dtype_;
  t.device_ = base.device_;
  t.shape_ = std::move(shape);
  if (offset < 0 || offset + t.numel() > base.numel())
    fatal("a view of " + std::to_string(t.numel()) + " elements at " +
          std::to_string(offset) + " does not fit a tensor of " +
          std::to_string(base.numel()));
  // The aliasing constructor: points into base's storage, owns all of it.
  t.storage_ = std::shared_ptr<unsigned char[]>(
      base.storage_, base.storage_.get() + offset * dtypeSize(base.dtype_));
  return t;
}

Tensor Tensor::placedIn(std::shared_ptr<unsigned char[]> buffer,
                        size_t byteOffset, DType dtype,
                        std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  unsigned char *data = buffer.get() + byteOffset;
  // A control block of its own whose deleter holds the buffer: the
  // tensor's copies count, the arena's other tensors do not.
  t.storage_ = std::shared_ptr<unsigned char[]>(
      data, [keep = std::move(buffer)](unsigned char *) {});
  return t;
}

Tensor Tensor::withRelease(const Tensor &base, std::function<void()> released) {
  Tensor t = base;
  t.storage_ = std::shared_ptr<unsigned char[]>(
      base.storage_.get(),
      [keep = base.storage_,
       released = std::move(released)](unsigned char *) mutable {
        keep.reset();
        released();
      });
  return t;
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape)
    : Tensor(uninitialized(dtype, std::move(shape))) {
  std::memset(raw(), 0, bytes());
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_)
    n *= d;
  return n;
}

float *Tensor::f32() {
  if (dtype_ != DType::F32)
    fatal("expected an f32 tensor, got " + describe());
  return static_cast<float *>(raw());
}
const float *Tensor::f32() const { return const_cast<Tensor *>(this)->f32(); }
int64_t *Tensor::i64() {
  if (dtype_ != DType::I64)
    fatal("expected an i64 tensor, got " + describe());
  return static_cast<int64_t *>(raw());
}
const int64_t *Tensor::i64() const { return const_cast<Tensor *>(this)->i64(); }

std::string Tensor::describe() const {
  std::ostringstream os;
  os << dtypeName(dtype_) << "[";
  for (size_t i = 0; i < shape_.size(); ++i)
    os << (i ? ", " : "") << shape_[i];
  os << "]";
  if (onGpu())
    os << " on cuda";
  return os.str();
}

float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mant = bits & 0x7fffffu;
  if (((bits >> 23) & 0xff) == 0xff) // inf or nan
    return sign | 0x7c00u | (mant ? 0x200u : 0);
  if (exp >= 0x1f)
    return sign | 0x7c00u;
  if (exp <= 0) {
    if (exp < -10)
      return sign;
    mant |= 0x800000u;
    uint32_t shift = 14 - exp;
    uint32_t half = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1)))
      ++half;
    return sign | half;
  }
  uint32_t half = sign | (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
    ++half;
  return half;
}

float bf16ToFloat(uint16_t b) { return bf16Load(b); }

uint16_t floatToBf16(float f) { return bf16Store(f); }

Tensor Tensor::to(Device device) const {
  if (device == device_ || !defined())
    return *this;
#ifdef TPRT_WITH_CUDA
  Tensor out = uninitialized(dtype_, shape_, device);
  cuda::copy(out.raw(), device, raw(), device_, bytes());
  return out;
#else
  fatal("this runtime was built without the CUDA backend");
#endif
}

namespace {
float loadAsFloat(DType dtype, const void *data, int64_t i) {
  switch (dtype) {
  case DType::F32:
    return static_cast<const float *>(data)[i];
  case DType::F16:
    return halfToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::I64:
    return static_cast<float>(static_cast<const int64_t *>(data)[i]);
  }
  return 0.0f;
}

void storeFloat(DType dtype, void *data, int64_t i, float value) {
  switch (dtype) {
  case DType::F32:
    static_cast<float *>(data)[i] = value;
    return;
  case DType::F16:
    static_cast<uint16_t *>(data)[i] = floatToHalf(value);
    return;
  case DType::BF16:
    static_cast<uint16_t *>(data)[i] = floatToBf16(value);
    return;
  case DType::I64:
    static_cast<int64_t *>(data)[i] = static_cast<int64_t>(value);
    return;
  }
}
} // namespace

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_ || !defined())
    return *this;
  if (onGpu()) {
#ifdef TPRT_WITH_CUDA
    return cuda::convert(*this, dtype);
#else
    fatal("this runtime was built without the CUDA backend");
#endif
  }
  // Through f32, element by element: the kernels of a bf16 / f16 program
  // (tpc --dtype) widen their operands and round their results with it.
  Tensor out = uninitialized(dtype, shape_);
  int64_t n = numel();
  const void *src = raw();
  void *dst = out.raw();
  DType from = dtype_;
  // bf16 <-> f32, every kernel call of a bf16 program: the vector loops of
  // cpu/Vector.h in blocks over the threads.
  constexpr int64_t kBlock = 1 << 16;
  if (from == DType::BF16 && dtype == DType::F32) {
    const auto *in = static_cast<const uint16_t *>(src);
    auto *o = static_cast<float *>(dst);
    cpu::parallelBlocks(n, kBlock, [&](int64_t begin, int64_t count) {
      cpu::widenBf16(in + begin, o + begin, count);
    });
    return out;
  }
  if (from == DType::F32 && dtype == DType::BF16) {
    const auto *in = static_cast<const float *>(src);
    auto *o = static_cast<uint16_t *>(dst);
    cpu::parallelBlocks(n, kBlock, [&](int64_t begin, int64_t count) {
      cpu::narrowToBf16(in + begin, o + begin, count);
    });
    return out;
  }
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t i = 0; i < n; ++i)
    storeFloat(dtype, dst, i, loadAsFloat(from, src, i));
  return out;
}

Communicator::~Communicator() = default;

std::vector<int64_t>
Communicator::blockOffsets(const std::vector<int64_t> &counts,
                           const char *what) const {
  if (counts.size() != static_cast<size_t>(size()))
    fatal(std::string(what) + ": " + std::to_string(counts.size()) +
          " block sizes for " + std::to_string(size()) + " ranks");
  std::vector<int64_t> offsets = {0};
  for (int64_t count : counts) {
    if (count < 0)
      fatal(std::string(what) + ": a block of " + std::to_string(count) +
            " elements");
    offsets.push_back(offsets.back() + count);
  }
  return offsets;
}

Tensor padSequence(const Tensor &rows, int64_t multiple) {
  if (rows.dtype() != DType::I64 || rows.rank() != 2 || multiple < 1)
    fatal("padSequence: " + rows.describe() +
          " is not an int64 [rows, length] array");
  int64_t count = rows.dim(0), length = rows.dim(1);
  int64_t padded = (length + multiple - 1) / multiple * multiple;
  if (padded == length)
    return rows;
  Tensor out(DType::I64, {count, padded});
  const int64_t *from = rows.i64();
  int64_t *to = out.i64();
  for (int64_t r = 0; r < count; ++r) {
    std::memcpy(to + r * padded, from + r * length, length * sizeof(int64_t));
    std::fill(to + r * padded + length, to + (r + 1) * padded, int64_t(0));
  }
  return out;
}

Tensor truncateSequence(const Tensor &t, int64_t length) {
  if (t.rank() < 2 || length < 0 || length > t.dim(1))
    fatal("truncateSequence: " + t.describe() + " has no " +
          std::to_string(length) + " positions");
  if (length == t.dim(1))
    return t;
  int64_t batch = t.dim(0), seq = t.dim(1);
  std::vector<int64_t> shape = t.shape();
  shape[1] = length;
  Tensor out(t.dtype(), shape);
  size_t position = dtypeSize(t.dtype());
  for (size_t i = 2; i < shape.size(); ++i)
    position *= static_cast<size_t>(shape[i]);
  const auto *from = static_cast<const unsigned char *>(t.raw());
  auto *to = static_cast<unsigned char *>(out.raw());
  for (int64_t b = 0; b < batch; ++b)
    std::memcpy(to + b * length * position, from + b * seq * position,
                length * position);
  return out;
}

} // namespace tprt
