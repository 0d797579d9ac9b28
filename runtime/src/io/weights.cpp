//===- weights.cpp - parameters straight from the model's files -----------===//
//
// Each rank reads the byte range of each parameter it needs with pread; it
// never reads the whole file.
//
//===----------------------------------------------------------------------===//

#include "cuda/Cuda.h"
#include "tprt/tprt.h"

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tprt {

Context::Context(int rank, int worldSize, std::string modelPath,
                 std::string modelFile)
    : rank_(rank), worldSize_(worldSize), modelPath_(std::move(modelPath)),
      modelFile_(std::move(modelFile)) {
  size_t slash = modelPath_.find_last_of('/');
  modelDir_ = slash == std::string::npos ? "." : modelPath_.substr(0, slash);
}

Context::~Context() = default;

void Context::setGrid(int tp, int dp) {
  if (tp < 1 || dp < 1 || tp * dp != worldSize_)
    fatal("a grid of " + std::to_string(dp) + " x " + std::to_string(tp) +
          " ranks does not make the " + std::to_string(worldSize_) + " ranks");
  tp_ = makeCommunicator(rank_ / tp, "tp");
  dp_ = makeCommunicator(rank_ % tp, "dp");
}

void Context::setDevice(Device device) {
  if (tp_ || dp_ || !params_.empty())
    fatal("the device is chosen before the first communicator or parameter");
  if (device == Device::CUDA) {
#ifdef TPRT_WITH_CUDA
    cuda::initialize();
#else
    fatal("--device cuda: this runtime was built without the CUDA backend "
          "(CMake found no nvcc when it was built)");
#endif
  }
  device_ = device;
}

void Context::setAutocast(DType dtype) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    fatal(std::string("autocast to ") + dtypeName(dtype) +
          " is not supported (bf16 or f32)");
  autocast_ = dtype;
}

void Context::setCollectiveTimeout(double seconds) {
  if (!(seconds >= 0))
    fatal("the collective timeout must be a number of seconds >= 0");
  if (device_ != Device::CUDA)
    fatal("--collective-timeout applies to the NCCL collectives of --device "
          "cuda; MPI's have none (mpirun --timeout bounds a whole CPU run)");
  if (tp_ || dp_)
    fatal("the collective timeout is set before the first communicator");
  collectiveTimeout_ = seconds;
}

std::unique_ptr<Communicator> Context::makeCommunicator(int color,
                                                        const char *group) {
#ifdef TPRT_WITH_CUDA
  if (device_ == Device::CUDA)
    return cuda::createNcclCommunicator(color, group, collectiveTimeout_);
#endif
  return createMpiCommunicator(color);
}

Communicator &Context::tp() {
  if (!tp_)
    tp_ = makeCommunicator(0, "tp");
  return *tp_;
}

Communicator &Context::dp() {
  if (!dp_)
    dp_ = makeCommunicator(rank_, "dp");
  return *dp_;
}

std::string Context::resolve(const std::string &file) const {
  if (file == modelFile_)
    return modelPath_;
  // An absolute path: a file beside the model's, e.g. a LoRA adapter.
  if (!file.empty() && file[0] == '/')
    return file;
  // External data stays inside the model's directory, as the compiler
  // checked; a symlink swapped in since must not lead elsewhere.
  std::string path = modelDir_ + "/" + file;
  char dir[PATH_MAX], real[PATH_MAX];
  if (!::realpath(modelDir_.c_str(), dir))
    fatal("cannot resolve the model directory '" + modelDir_ + "'");
  if (!::realpath(path.c_str(), real))
    return path; // missing: the reader says so, naming the parameter
  std::string inside = std::string(dir) + "/";
  if (std::string(real).compare(0, inside.size(), inside) != 0)
    fatal("weight file '" + file + "' resolves to '" + real +
          "', outside the model's directory '" + dir + "'");
  return path;
}

Tensor *Context::cachedParam(const std::string &fqn) {
  auto it = params_.find(fqn);
  return it == params_.end() ? nullptr : &it->second;
}

void Context::cacheParam(const std::string &fqn, Tensor value) {
  params_[fqn] = std::move(value);
}

void Context::holdParamRun(const std::string &fqn, Tensor run, int64_t begin) {
  auto layout = layouts_.find(fqn);
  if (layout == layouts_.end())
    fatal("parameter '" + fqn + "' was not read");
  layout->second.runBegin = begin;
  params_[fqn] = std::move(run);
}

/// This rank in the tensor-parallel group, asked only of a split parameter
/// (a replicated one is read before, or without, any group).
static int thisTpRank(Context &ctx, const Context::ParamLayout &layout) {
  return layout.shardDim >= 0 ? ctx.tp().rank() : 0;
}

ParamBlock paramBlockOf(const std::string &fqn,
                        const Context::ParamLayout &layout, int rank) {
  ParamBlock block;
  if (layout.shardDim < 0)
    return block;
  const std::vector<int64_t> &shape = layout.shape;
  int dim = layout.shardDim;
  auto bad = [&](const std::string &why) {
    fatal("parameter '" + fqn + "': cannot split dimension " +
          std::to_string(dim) + " of size " +
          (dim < static_cast<int>(shape.size()) ? std::to_string(shape[dim])
                                                : std::string("?")) +
          ": " + why);
  };
  if (dim >= static_cast<int>(shape.size()))
    bad("the parameter has no such dimension");
  block.dim = dim;
  if (!layout.sizes.empty()) {
    if (layout.starts.size() != layout.sizes.size() || rank < 0 ||
        rank >= static_cast<int>(layout.sizes.size()))
      bad("the uneven split has no range for rank " + std::to_string(rank));
    block.start = layout.starts[rank];
    block.size = layout.sizes[rank];
    block.extent = *std::max_element(layout.sizes.begin(), layout.sizes.end());
    if (block.start < 0 || block.size < 1 ||
        block.start + block.size > shape[dim])
      bad("rank " + std::to_string(rank) + "'s range [" +
          std::to_string(block.start) + ", " +
          std::to_string(block.start + block.size) + ") is outside it");
    // Ranges are equal or disjoint: the ranks with this start share it.
    auto begin = layout.starts.begin(), end = layout.starts.end();
    block.holders = std::count(begin, end, block.start);
    block.first = std::find(begin, end, block.start) == begin + rank;
    return block;
  }
  int64_t shards = layout.shards, index = rank / layout.replicas;
  if (shards < 1 || index < 0 || index >= shards || shape[dim] % shards != 0)
    bad("not into " + std::to_string(shards) + " equal blocks");
  block.size = block.extent = shape[dim] / shards;
  block.start = index * block.size;
  block.holders = layout.replicas;
  block.first = rank % layout.replicas == 0;
  return block;
}

Tensor readParamBlock(Context &ctx, const char *fqn, const char *initializer,
                      const char *file, uint64_t offset, uint64_t length,
                      DType storedDtype, const std::vector<int64_t> &shape,
                      bool transposed, const ParamBlock &block) {
  auto started = std::chrono::steady_clock::now();
  std::string name = std::string("parameter '") + fqn + "' (initializer '" +
                     initializer + "')";
  uint64_t elements = 1;
  for (int64_t d : shape)
    elements *= static_cast<uint64_t>(d);
  size_t elem = dtypeSize(storedDtype);
  if (elements * elem != length)
    fatal(name + ": " + std::to_string(length) + " bytes of " +
          dtypeName(storedDtype) + " cannot hold its shape");
  if (transposed && shape.size() != 2)
    fatal(name + ": only 2-D parameters can be stored transposed");
  std::vector<int64_t> stored = shape;
  if (transposed)
    std::swap(stored[0], stored[1]);

  // The block of the stored tensor to read: [outer, extent, inner] runs,
  // of which the first `extent` rows of each are read (the rest: padding).
  int64_t storedDim = -1, extent = 0, start = 0, padded = 0;
  if (block.dim >= 0) {
    if (block.dim >= static_cast<int>(shape.size()) ||
        block.start + block.size > shape[block.dim] || block.size < 1 ||
        block.extent < block.size)
      fatal(name + ": no block [" + std::to_string(block.start) + ", " +
            std::to_string(block.start + block.size) + ") of dimension " +
            std::to_string(block.dim));
    storedDim = transposed ? 1 - block.dim : block.dim;
    extent = block.size;
    start = block.start;
    padded = block.extent;
  }
  std::vector<int64_t> local = stored;
  int64_t outer = 1, inner = 1, dimLen = 1;
  if (storedDim >= 0) {
    local[storedDim] = padded;
    for (int64_t i = 0; i < storedDim; ++i)
      outer *= stored[i];
    for (size_t i = storedDim + 1; i < stored.size(); ++i)
      inner *= stored[i];
    dimLen = stored[storedDim];
  } else {
    extent = elements; // one run: everything
    dimLen = extent;
  }

  std::string path = ctx.resolve(file);
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    fatal(name + ": cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 ||
      static_cast<uint64_t>(st.st_size) < offset + length) {
    ::close(fd);
    fatal(name + ": '" + path + "' is too short (" +
          std::to_string(st.st_size) + " bytes) for bytes [" +
          std::to_string(offset) + ", " + std::to_string(offset + length) +
          ")");
  }
  // A forward-only run's f32 block that is one run of the file is mapped,
  // not copied: it shares the page cache (with the other ranks on the
  // node too) and nothing writes it.
  uint64_t mappedOffset = offset + static_cast<uint64_t>(start) * inner * elem;
  if (ctx.constantWeights() && ctx.device() == Device::CPU && !transposed &&
      storedDtype == DType::F32 && outer == 1 && mappedOffset % 8 == 0 &&
      (storedDim < 0 || padded == extent)) {
    Tensor value = Tensor::mapped(fd, mappedOffset, storedDtype, local);
    if (value.defined()) {
      ::close(fd);
      ctx.countParameterBytesRead(
          value.bytes(), std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - started)
                             .count());
      return value;
    }
  }
  // Every byte but the padding is read into it: only padding is zeroed.
  bool padding = storedDim >= 0 && padded > extent;
  Tensor raw = padding ? Tensor(storedDtype, local)
                       : Tensor::uninitialized(storedDtype, local);
  auto *dst = static_cast<char *>(raw.raw());
  uint64_t run = static_cast<uint64_t>(extent) * inner * elem;
  uint64_t pitch =
      storedDim >= 0 ? static_cast<uint64_t>(padded) * inner * elem : run;
  for (int64_t o = 0; o < outer; ++o) {
    uint64_t from = offset + ((o * dimLen + start) * inner) * elem;
    for (uint64_t done = 0; done < run;) {
      ssize_t n = ::pread(fd, dst + o * pitch + done, run - done, from + done);
      if (n <= 0) {
        ::close(fd);
        fatal(name + ": read of '" + path + "' failed");
      }
      done += n;
    }
  }
  ::close(fd);
  Tensor value = raw.to(DType::F32);
  auto count = [&] {
    ctx.countParameterBytesRead(outer * run,
                                std::chrono::duration<double>(
                                    std::chrono::steady_clock::now() - started)
                                    .count());
  };
  if (!transposed) {
    count();
    return value;
  }
  std::vector<int64_t> canonicalLocal = {local[1], local[0]};
  Tensor canonical(DType::F32, canonicalLocal);
  const float *s = value.f32();
  float *d = canonical.f32();
  int64_t rows = local[0], cols = local[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      d[c * rows + r] = s[r * cols + c];
  count();
  return canonical;
}

static std::string joinDims(const std::vector<int64_t> &shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out;
}

/// What the model file stores undone, in f32, as `layout` says: a stored
/// offset subtracted (a folded norm weight `1 + w` read back as `w`; w + 1 -
/// 1 is exact for the norm weights this serves), a stored `-exp(p)` read
/// back as `p` (a folded Mamba2 `A` as `A_log`; an element that is not
/// negative has no such `p`).
static void undoStoredForm(Tensor &value, const Context::ParamLayout &layout,
                           const char *fqn) {
  if (layout.storedOffset == 0.0 && !layout.storedNegExp)
    return;
  float *v = value.f32();
  if (layout.storedOffset != 0.0) {
    auto shift = static_cast<float>(layout.storedOffset);
    for (int64_t i = 0; i < value.numel(); ++i)
      v[i] -= shift;
  }
  if (!layout.storedNegExp)
    return;
  for (int64_t i = 0; i < value.numel(); ++i) {
    if (!(v[i] < 0.0f))
      fatal(std::string("parameter '") + fqn + "': element " +
            std::to_string(i) + " of its block in '" + layout.file + "' is " +
            std::to_string(v[i]) +
            ", not the negative -exp(x) the export folded");
    v[i] = std::log(-v[i]);
  }
}

Tensor load_param(Context &ctx, const char *fqn, const char *initializer,
                  const char *file, uint64_t offset, uint64_t length,
                  DType storedDtype, std::vector<int64_t> shape,
                  bool transposed, int shardDim, int64_t shards,
                  int64_t replicas, std::vector<int64_t> starts,
                  std::vector<int64_t> sizes, DType dtype, double storedOffset,
                  bool storedNegExp) {
  if (Tensor *cached = ctx.cachedParam(fqn)) {
    if (ctx.paramLayouts().at(fqn).runBegin >= 0)
      fatal(std::string("parameter '") + fqn +
            "' is held as data-parallel runs (--zero 3): the program reads "
            "it through param_bucket_gather");
    return *cached;
  }
  // From a checkpoint: the tensor of that name, whole and canonical.
  if (!ctx.checkpointPath().empty()) {
    auto entry = ctx.checkpoint().find(fqn);
    if (entry == ctx.checkpoint().end())
      fatal("checkpoint '" + ctx.checkpointPath() + "' has no tensor '" + fqn +
            "'");
    if (entry->second.shape != shape)
      fatal("checkpoint '" + ctx.checkpointPath() + "': tensor '" + fqn +
            "' is [" + joinDims(entry->second.shape) +
            "], the program's parameter [" + joinDims(shape) + "]");
    file = entry->second.file.c_str();
    initializer = fqn;
    offset = entry->second.offset;
    length = entry->second.end - entry->second.begin;
    storedDtype = entry->second.dtype;
    transposed = false;
    // A checkpoint holds the parameter itself.
    storedOffset = 0.0;
    storedNegExp = false;
  }
  if (shardDim >= 0) {
    // main checked the ranks against the program's tp size; a parameter
    // that disagrees is a compiler bug, said as such.
    bool fits = sizes.empty()
                    ? replicas >= 1 && shards * replicas == ctx.tp().size()
                    : static_cast<int64_t>(sizes.size()) == ctx.tp().size() &&
                          shards == ctx.tp().size() && replicas == 1;
    if (!fits)
      fatal(std::string("parameter '") + fqn + "': " + std::to_string(shards) +
            " blocks held by " + std::to_string(replicas) + " ranks each (" +
            std::to_string(sizes.size()) + " uneven ranges) do not make the " +
            std::to_string(ctx.tp().size()) +
            " ranks of the tensor-parallel group");
  }
  Context::ParamLayout layout{shape,
                              shardDim,
                              shards,
                              replicas,
                              std::move(starts),
                              std::move(sizes),
                              ctx.resolve(file)};
  Tensor value = readParamBlock(
      ctx, fqn, initializer, file, offset, length, storedDtype, shape,
      transposed, paramBlockOf(fqn, layout, thisTpRank(ctx, layout)));
  layout.storedOffset = storedOffset;
  layout.storedNegExp = storedNegExp;
  undoStoredForm(value, layout, fqn);
  // A test hook: TPRT_TEST_PERTURB_REPLICAS=R makes rank R's copies of the
  // replicated parameters differ from the others' (what the init's
  // broadcast must undo).
  if (const char *perturbed = std::getenv("TPRT_TEST_PERTURB_REPLICAS"))
    if (*perturbed && shardDim < 0 && value.dtype() == DType::F32 &&
        std::atoi(perturbed) == ctx.tp().rank())
      for (int64_t i = 0; i < value.numel(); ++i)
        value.f32()[i] += 0.25f;
  // Read on the host in f32, held in the program's type (tpc --dtype), where
  // the kernels run.
  value = value.to(dtype).to(ctx.device());
  ctx.cacheParam(fqn, value);
  layout.initializer = initializer;
  layout.offset = offset;
  layout.length = length;
  layout.storedDtype = storedDtype;
  layout.transposed = transposed;
  ctx.setParamLayout(fqn, std::move(layout));
  return value;
}

Tensor readParamF32(Context &ctx, const std::string &fqn) {
  auto found = ctx.paramLayouts().find(fqn);
  if (found == ctx.paramLayouts().end())
    fatal("parameter '" + fqn + "' was not read");
  const Context::ParamLayout &l = found->second;
  Tensor value =
      readParamBlock(ctx, fqn.c_str(), l.initializer.c_str(), l.file.c_str(),
                     l.offset, l.length, l.storedDtype, l.shape, l.transposed,
                     paramBlockOf(fqn, l, thisTpRank(ctx, l)));
  undoStoredForm(value, l, fqn.c_str());
  return value;
}

void broadcast_replica(Context &ctx, const Tensor &param, const char *fqn,
                       const char *group) {
  if (!param.defined())
    fatal(std::string("broadcast_replica: parameter '") + fqn +
          "' has no value");
  // The handle shares the cached tensor's storage: the broadcast updates
  // what every later step reads.
  Tensor shared = param;
  Communicator &comm = std::string(group) == "dp" ? ctx.dp() : ctx.tp();
  comm.broadcast(shared.raw(), static_cast<int64_t>(shared.bytes()), 0);
}

} // namespace tprt
