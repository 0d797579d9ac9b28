//===- main.cpp - the entry point of generated executables ----------------===//
//
//   model --input ids.npy [--attention-mask mask.npy] --output logits.npy
//         [--weights MODEL.onnx] [--threads T] [--bench N] [--device D]
//         [--autocast bf16|f32] [--collective-timeout S] [--report-reads]
//         [--report-memory] [--cuda-graphs on|off]
//   model --train --data tokens.npy [--data-mask mask.npy] [--steps S]
//         [--micro-batch B] [--grad-accum K] [--lr --weight-decay --betas
//         B1,B2 --eps --momentum --max-grad-norm --norm-type 2|inf --seed S]
//         [--save DIR [--save-shard-mib M]] [--resume DIR] [--log F]
//         [--weights MODEL.onnx] [--threads T]
//
// Each MPI rank runs tprt_model_forward on the same inputs; rank 0 writes
// the logits. --bench N runs N more timed forward passes (parameters are
// read once, by the first) and prints their median time (on the GPU
// replaying the forward as a CUDA graph, unless --cuda-graphs off). --train
// runs the training loop of a program compiled with tpc --train
// (tprt/Train.h).
// --device cuda runs forward and training on the GPU of each rank (one per
// rank, NCCL collectives) when the runtime was built with the CUDA backend;
// --autocast bf16 runs its linears in bf16 with FP32 accumulation (on the
// CPU too); --collective-timeout S bounds how long an NCCL collective
// waits for the other ranks (default 600 s, 0: no limit). --report-reads
// and --report-memory print each rank's parameter bytes read and peak
// memory at the end.
//
//===----------------------------------------------------------------------===//

#include "cpu/Gemm.h"
#include "cuda/Cuda.h"
#include "cuda/Graphs.h"
#include "tprt/Train.h"
#include "tprt/tprt.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <malloc.h>
#include <memory>
#include <mpi.h>
#include <omp.h>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

void usage(const char *argv0) {
  std::fprintf(
      stderr,
      "usage: %s --input ids.npy [--attention-mask mask.npy] "
      "--output logits.npy [--weights MODEL.onnx|CHECKPOINT] [--threads T] "
      "[--bench N] [--device cpu|cuda] [--autocast bf16|f32] "
      "[--collective-timeout S] [--report-reads] [--report-memory] "
      "[--cuda-graphs on|off]\n"
      "       %s --train --data tokens.npy [--data-mask mask.npy] "
      "[--steps S] [--micro-batch B] [--grad-accum K] [--lr LR] "
      "[--weight-decay WD] [--betas B1,B2] [--eps EPS] "
      "[--momentum M] [--max-grad-norm N] [--norm-type 2|inf] [--seed S] "
      "[--save DIR] [--save-shard-mib M] [--resume DIR] [--log F] "
      "[--weights MODEL.onnx|CHECKPOINT] [--threads T] [--device cpu|cuda] "
      "[--autocast bf16|f32] [--collective-timeout S] [--report-reads] "
      "[--report-memory]\n",
      argv0, argv0);
}

/// Every rank's `bytes` gathered on rank 0 as "rank 0 N bytes, rank 1 M
/// bytes" (collective; empty on the other ranks).
std::string bytesPerRank(unsigned long long bytes, int rank, int size) {
  std::vector<unsigned long long> all(size);
  MPI_Gather(&bytes, 1, MPI_UNSIGNED_LONG_LONG, all.data(), 1,
             MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  std::string line;
  for (int r = 0; rank == 0 && r < size; ++r)
    line += (r ? ", rank " : "rank ") + std::to_string(r) + " " +
            std::to_string(all[r]) + " bytes";
  return line;
}

/// --report-reads: each rank's bytes of parameters read, one line from
/// rank 0 (collective).
void reportReads(const tprt::Context &ctx, int rank, int size) {
  std::string line = bytesPerRank(ctx.parameterBytesRead(), rank, size);
  double seconds = ctx.parameterReadSeconds();
  std::vector<double> times(size);
  MPI_Gather(&seconds, 1, MPI_DOUBLE, times.data(), 1, MPI_DOUBLE, 0,
             MPI_COMM_WORLD);
  if (rank != 0)
    return;
  std::string timeLine = "parameter reads took:";
  for (int r = 0; r < size; ++r) {
    char text[64];
    std::snprintf(text, sizeof(text), "%s rank %d %.3f s", r ? "," : "", r,
                  times[r]);
    timeLine += text;
  }
  std::printf("parameters read: %s\n%s\n", line.c_str(), timeLine.c_str());
}

/// --report-memory: each rank's peak memory, one line from rank 0
/// (collective). On the GPU the stream-ordered pool's high-water mark of
/// allocated bytes (what torch.cuda.max_memory_allocated() counts); on the
/// CPU the process's peak resident set.
void reportMemory(tprt::Device device, int rank, int size) {
  unsigned long long mine = 0;
  const char *what = "host resident set";
#ifdef TPRT_WITH_CUDA
  if (device == tprt::Device::CUDA) {
    mine = tprt::cuda::peakAllocatedBytes();
    what = "GPU memory allocated";
  }
#endif
  if (device == tprt::Device::CPU) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    mine = static_cast<unsigned long long>(usage.ru_maxrss) * 1024;
  }
  std::string line = bytesPerRank(mine, rank, size);
  if (rank == 0)
    std::printf("peak memory (%s): %s\n", what, line.c_str());
}

std::string baseName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// The integer value of option `name`, within [lo, hi]; anything else is an
/// error naming the option.
long long intOption(const std::string &name, const std::string &text,
                    long long lo, long long hi) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi)
    tprt::fatal(name + " takes an integer from " + std::to_string(lo) + " to " +
                std::to_string(hi) + ", got '" + text + "'");
  return v;
}

/// The number of option `name`, finite and within [lo, hi].
double realOption(const std::string &name, const std::string &text, double lo,
                  double hi) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !(v >= lo) ||
      !(v <= hi))
    tprt::fatal(name + " takes a number from " + std::to_string(lo) + " to " +
                std::to_string(hi) + ", got '" + text + "'");
  return v;
}

/// The data-parallel ranks the program was compiled for (weak: 1 when the
/// program does not say).
int dataParallelSize() { return &tprt_model_dp_size ? tprt_model_dp_size : 1; }

/// Whether every rank passed the same `value`. Collective.
bool agree(uint64_t value) {
  uint64_t lo = value, hi = value;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

uint64_t hashLine(const char *line) {
  uint64_t h = 1469598103934665603ull;
  for (; *line; ++line)
    h = (h ^ static_cast<unsigned char>(*line)) * 1099511628211ull;
  return h;
}

/// Ranks launched with different programs would exchange mismatched
/// collectives (garbage or a hang): they compare fingerprints first and,
/// when those differ, their program summaries line by line, so that every
/// rank stops with the first difference.
void checkSameProgram(int size) {
  if (agree(tprt_model_fingerprint))
    return;
  int64_t lines = 0;
  while (tprt_model_summary[lines])
    ++lines;
  int64_t common = lines;
  MPI_Allreduce(MPI_IN_PLACE, &common, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  int64_t first = 0;
  while (first < common && agree(hashLine(tprt_model_summary[first])))
    ++first;
  if (first == common && agree(static_cast<uint64_t>(lines)))
    tprt::fatal("the ranks run different programs (their fingerprints "
                "differ; their parameters, replica classes and buckets "
                "agree): launch one compiled program on every rank");
  // Each rank's version of that line (a program that ended: none).
  constexpr int kWidth = 240;
  char mine[kWidth] = "(nothing: its program summary ends earlier)";
  if (first < lines)
    std::snprintf(mine, kWidth, "%s", tprt_model_summary[first]);
  std::vector<char> all(static_cast<size_t>(kWidth) * size);
  MPI_Allgather(mine, kWidth, MPI_CHAR, all.data(), kWidth, MPI_CHAR,
                MPI_COMM_WORLD);
  int other = 1;
  while (other < size - 1 &&
         std::strncmp(all.data(), all.data() + other * kWidth, kWidth) == 0)
    ++other;
  tprt::fatal("the ranks run different programs: rank 0 has '" +
              std::string(all.data()) + "' where rank " +
              std::to_string(other) + " has '" +
              std::string(all.data() + other * kWidth) + "' (line " +
              std::to_string(first + 1) +
              " of the program summary); launch one compiled program on "
              "every rank");
}

/// The weights files must be the ones the program was compiled against
/// (size and a sampled hash): another model's weights would give garbage.
void checkWeightFiles(tprt::Context &ctx) {
  for (const tprt::WeightFile *w = tprt_model_weight_files; w->file; ++w) {
    std::string path = ctx.resolve(w->file);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      tprt::fatal("cannot open the weights file '" + path + "'");
    uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size != w->size)
      tprt::fatal("'" + path +
                  "' is not the weights file the program was "
                  "compiled against (" +
                  std::to_string(size) + " bytes, expected " +
                  std::to_string(w->size) + ")");
    if (tprt::sampledFileHash(path.c_str(), size) != w->hash)
      tprt::fatal("'" + path +
                  "' is not the weights file the program was "
                  "compiled against (same size, different content)");
  }
}

/// A checkpoint must hold every parameter the program reads, in its
/// shape: checked on every rank before the first collective.
void checkCheckpoint(const tprt::Context &ctx) {
  auto dims = [](const std::vector<int64_t> &shape) {
    std::string out;
    for (size_t i = 0; i < shape.size(); ++i)
      out += (i ? ", " : "") + std::to_string(shape[i]);
    return "[" + out + "]";
  };
  for (const tprt::ParamSpec *p = tprt_model_params; p->fqn; ++p) {
    std::vector<int64_t> shape(p->shape, p->shape + p->rank);
    auto entry = ctx.checkpoint().find(p->fqn);
    if (entry == ctx.checkpoint().end())
      tprt::fatal("checkpoint '" + ctx.checkpointPath() + "' has no tensor '" +
                  p->fqn + "' (a parameter of the program, " + dims(shape) +
                  ")");
    if (entry->second.shape != shape)
      tprt::fatal("checkpoint '" + ctx.checkpointPath() + "': tensor '" +
                  p->fqn + "' is " + dims(entry->second.shape) +
                  ", the program's parameter " + dims(shape));
  }
}

/// --weights: another copy of the model file (checked against the one the
/// program was compiled with), or a checkpoint that every parameter is
/// read from by FQN: a `model.safetensors` (as `--train --save` writes
/// it), an HF sharded checkpoint's `model.safetensors.index.json`, or an
/// HF model directory.
bool isCheckpoint(const std::string &weights) {
  auto endsWith = [&](const std::string &suffix) {
    return weights.size() >= suffix.size() &&
           weights.compare(weights.size() - suffix.size(), suffix.size(),
                           suffix) == 0;
  };
  struct stat st;
  return endsWith(".safetensors") || endsWith(".safetensors.index.json") ||
         (::stat(weights.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
}

/// Where and how a rank runs: --device, --autocast, --collective-timeout.
struct DeviceOptions {
  tprt::Device device = tprt::Device::CPU;
  tprt::DType autocast = tprt::DType::F32;
  /// Negative: not given (the context's default).
  double collectiveTimeout = -1;
};

/// The context of this rank, reading parameters from `weights`; for a
/// forward run, after the program's init (training runs it in
/// tprt::train, with the training state set).
std::unique_ptr<tprt::Context> makeContext(int rank, int size,
                                           const std::string &weights,
                                           const DeviceOptions &options) {
  bool checkpoint = isCheckpoint(weights);
  auto ctx = std::make_unique<tprt::Context>(
      rank, size, checkpoint ? tprt_model_path : weights,
      baseName(tprt_model_path));
  ctx->setDevice(options.device);
  ctx->setAutocast(options.autocast);
  if (options.collectiveTimeout >= 0)
    ctx->setCollectiveTimeout(options.collectiveTimeout);
  ctx->setGrid(tprt_model_tp_size, dataParallelSize());
  if (!checkpoint) {
    checkWeightFiles(*ctx);
  } else {
    char real[PATH_MAX];
    if (!::realpath(weights.c_str(), real))
      tprt::fatal("cannot open the checkpoint '" + weights + "'");
    ctx->useCheckpoint(real);
    checkCheckpoint(*ctx);
  }
  return ctx;
}

/// What the command line asks for.
struct RunOptions {
  std::string input, mask, output, weights = tprt_model_path;
  int threads = 1, bench = 0;
  bool training = false, reportReads = false, reportMemory = false,
       weightsGiven = false, cudaGraphs = true;
  DeviceOptions device;
  tprt::TrainOptions train;
};

/// One command-line option: its name and what its value (none for a
/// switch) sets.
struct Option {
  const char *name;
  bool takesValue;
  std::function<void(RunOptions &, const std::string &)> set;
};

/// One of `choices` (`names[i]` gives `choices[i]`), or an error naming
/// the option.
template <typename T>
T choice(const std::string &option, const std::string &text,
         std::initializer_list<std::pair<const char *, T>> choices) {
  std::string names;
  for (const auto &[name, value] : choices) {
    if (text == name)
      return value;
    names += std::string(names.empty() ? "" : " or ") + name;
  }
  tprt::fatal(option + " must be " + names + ", got '" + text + "'");
}

const std::vector<Option> &options() {
  using O = RunOptions;
  using S = const std::string &;
  static const std::vector<Option> table = {
      {"--input", true, [](O &o, S v) { o.input = v; }},
      {"--attention-mask", true, [](O &o, S v) { o.mask = v; }},
      {"--output", true, [](O &o, S v) { o.output = v; }},
      {"--weights", true,
       [](O &o, S v) {
         o.weights = v;
         o.weightsGiven = true;
       }},
      {"--threads", true,
       [](O &o, S v) {
         o.threads = static_cast<int>(intOption("--threads", v, 1, 1024));
       }},
      {"--bench", true,
       [](O &o, S v) {
         o.bench = static_cast<int>(intOption("--bench", v, 0, 1000000));
       }},
      {"--train", false, [](O &o, S) { o.training = true; }},
      {"--report-reads", false, [](O &o, S) { o.reportReads = true; }},
      {"--report-memory", false, [](O &o, S) { o.reportMemory = true; }},
      {"--cuda-graphs", true,
       [](O &o, S v) {
         o.cudaGraphs = o.train.cudaGraphs =
             choice<bool>("--cuda-graphs", v, {{"on", true}, {"off", false}});
       }},
      {"--device", true,
       [](O &o, S v) {
         o.device.device = choice<tprt::Device>(
             "--device", v,
             {{"cpu", tprt::Device::CPU}, {"cuda", tprt::Device::CUDA}});
       }},
      {"--autocast", true,
       [](O &o, S v) {
         o.device.autocast = choice<tprt::DType>(
             "--autocast", v,
             {{"bf16", tprt::DType::BF16}, {"f32", tprt::DType::F32}});
       }},
      {"--collective-timeout", true,
       [](O &o, S v) {
         o.device.collectiveTimeout =
             realOption("--collective-timeout", v, 0, 1e9);
       }},
      {"--data", true, [](O &o, S v) { o.train.data = v; }},
      {"--data-mask", true, [](O &o, S v) { o.train.dataMask = v; }},
      {"--steps", true,
       [](O &o, S v) {
         o.train.steps = intOption("--steps", v, 1, 1LL << 40);
       }},
      {"--seed", true,
       [](O &o, S v) {
         o.train.seed =
             static_cast<uint64_t>(intOption("--seed", v, 0, 1LL << 62));
       }},
      {"--micro-batch", true,
       [](O &o, S v) {
         o.train.microBatch = intOption("--micro-batch", v, 1, 1LL << 30);
       }},
      {"--grad-accum", true,
       [](O &o, S v) {
         o.train.gradAccum = intOption("--grad-accum", v, 1, 1LL << 30);
       }},
      {"--lr", true,
       [](O &o, S v) { o.train.lr = realOption("--lr", v, 0, 1e6); }},
      {"--weight-decay", true,
       [](O &o, S v) {
         o.train.weightDecay = realOption("--weight-decay", v, 0, 1e6);
       }},
      {"--eps", true,
       [](O &o, S v) { o.train.eps = realOption("--eps", v, 0, 1); }},
      {"--momentum", true,
       [](O &o, S v) { o.train.momentum = realOption("--momentum", v, 0, 1); }},
      {"--max-grad-norm", true,
       [](O &o, S v) {
         o.train.maxGradNorm = realOption("--max-grad-norm", v, 0, 1e30);
       }},
      {"--norm-type", true,
       [](O &o, S v) {
         o.train.normType = choice<double>(
             "--norm-type", v,
             {{"2", 2.0}, {"inf", std::numeric_limits<double>::infinity()}});
       }},
      {"--betas", true,
       [](O &o, S v) {
         size_t comma = v.find(',');
         if (comma == std::string::npos)
           tprt::fatal("--betas takes two numbers B1,B2, got '" + v + "'");
         o.train.beta1 = realOption("--betas", v.substr(0, comma), 0, 0.999999);
         o.train.beta2 =
             realOption("--betas", v.substr(comma + 1), 0, 0.999999999);
       }},
      {"--save", true, [](O &o, S v) { o.train.save = v; }},
      {"--save-shard-mib", true,
       [](O &o, S v) {
         o.train.saveShardMiB =
             realOption("--save-shard-mib", v, 1.0 / 1024, 1 << 30);
       }},
      {"--resume", true, [](O &o, S v) { o.train.resume = v; }},
      {"--log", true, [](O &o, S v) { o.train.log = v; }},
  };
  return table;
}

/// The command line as RunOptions; an unknown option or a bad value is an
/// error naming it. Returns false for --help (usage printed).
bool parseOptions(int argc, char **argv, RunOptions &o) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(argv[0]);
      return false;
    }
    auto option = std::find_if(options().begin(), options().end(),
                               [&](const Option &x) { return arg == x.name; });
    if (option == options().end()) {
      usage(argv[0]);
      tprt::fatal("unknown argument '" + arg + "'");
    }
    if (option->takesValue && i + 1 >= argc) {
      usage(argv[0]);
      tprt::fatal("missing value for " + arg);
    }
    option->set(o, option->takesValue ? argv[++i] : "");
  }
  return true;
}

/// model --train: the training loop (tprt/Train.h).
int runTraining(RunOptions &o, const char *argv0, int rank, int size) {
  if (o.train.data.empty() || !o.input.empty() || !o.output.empty() ||
      o.bench) {
    usage(argv0);
    tprt::fatal("--train takes --data (not --input, --output or --bench)");
  }
  // --resume DIR: the weights, the optimizer state and the position of
  // the run saved there, checked against the program before anything is
  // read.
  std::unique_ptr<tprt::ResumePoint> resume;
  if (!o.train.resume.empty()) {
    if (o.weightsGiven)
      tprt::fatal("--resume reads the weights from '" + o.train.resume +
                  "'; do not also give --weights");
    resume = tprt::readResumePoint(o.train.resume, o.train, tprt_model_params);
    o.weights = o.train.resume;
  }
  std::unique_ptr<tprt::Context> ctx =
      makeContext(rank, size, o.weights, o.device);
  int status =
      tprt::train(*ctx, o.train, tprt_model_sequence_multiple, resume.get());
  if (o.reportReads)
    reportReads(*ctx, rank, size);
  if (o.reportMemory)
    reportMemory(o.device.device, rank, size);
  return status;
}

/// --bench N: N more timed forward passes (the parameters already read);
/// rank 0 prints their median.
void benchForward(tprt::Context &ctx, const tprt::Tensor &ids,
                  const tprt::Tensor &attentionMask, int runs,
                  tprt::Device device, bool cudaGraphs, int rank, int size) {
  std::vector<double> times;
#ifdef TPRT_WITH_CUDA
  // Captured on the first timed run (the forward before the timing ran it
  // eagerly), replayed by the rest.
  tprt::cuda::EntryGraphs graphs(tprt_model_forward, "the forward");
  cudaGraphs = cudaGraphs && device == tprt::Device::CUDA;
#else
  cudaGraphs = false;
#endif
  for (int i = 0; i < runs; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
#ifdef TPRT_WITH_CUDA
    if (cudaGraphs)
      graphs.run(ctx, ids, attentionMask);
    else
#endif
      tprt_model_forward(ctx, ids, attentionMask);
#ifdef TPRT_WITH_CUDA
    // The GPU's work is queued: the pass ends when it is done.
    if (device == tprt::Device::CUDA)
      tprt::cuda::synchronize();
#endif
    MPI_Barrier(MPI_COMM_WORLD);
    times.push_back(MPI_Wtime() - start);
  }
  std::sort(times.begin(), times.end());
  // Every rank gets here, so tp() may make the group (collective).
  std::string allReduce =
      size > 1 && ctx.tp().size() > 1
          ? std::string(", all-reduce: ") + ctx.tp().allReduceMethod()
          : "";
  std::string graph;
#ifdef TPRT_WITH_CUDA
  if (cudaGraphs)
    graph = graphs.captured() ? ", CUDA graph" : ", no CUDA graph";
#endif
  if (rank == 0)
    std::printf("forward: median %.3f ms, min %.3f ms over %d runs (%s%s%s)\n",
                1e3 * times[times.size() / 2], 1e3 * times.front(), runs,
                device == tprt::Device::CUDA ? "cuBLAS"
                                             : tprt::cpu::gemmLibrary(),
                allReduce.c_str(), graph.c_str());
}

/// The forward pass on --input, the logits to --output.
int runForward(RunOptions &o, const char *argv0, int rank, int size) {
  if (!o.train.resume.empty() || !o.train.save.empty())
    tprt::fatal("--save and --resume need --train");
  if (o.input.empty() || o.output.empty()) {
    usage(argv0);
    tprt::fatal("--input and --output are required");
  }

  tprt::Tensor ids = tprt::readNpy(o.input);
  if (ids.dtype() != tprt::DType::I64 || ids.rank() != 2)
    tprt::fatal("--input must be an int64 [batch, seq] array, got " +
                ids.describe());
  tprt::Tensor attentionMask;
  if (!o.mask.empty()) {
    attentionMask = tprt::readNpy(o.mask);
    if (attentionMask.dtype() != tprt::DType::I64 ||
        attentionMask.shape() != ids.shape())
      tprt::fatal("--attention-mask must be an int64 array of the input's "
                  "shape " +
                  ids.describe() + ", got " + attentionMask.describe());
  } else {
    attentionMask = tprt::Tensor(tprt::DType::I64, ids.shape());
    int64_t *m = attentionMask.i64();
    for (int64_t i = 0; i < attentionMask.numel(); ++i)
      m[i] = 1;
  }

  // Sequence parallelism holds an equal share of the positions on each
  // rank: a length that is not a multiple is padded (mask 0) and the
  // logits are returned for the real positions, as NeMo AutoModel pads.
  int64_t length = ids.dim(1);
  ids = tprt::padSequence(ids, tprt_model_sequence_multiple);
  attentionMask =
      tprt::padSequence(attentionMask, tprt_model_sequence_multiple);

  std::unique_ptr<tprt::Context> context =
      makeContext(rank, size, o.weights, o.device);
  tprt::Context &ctx = *context;
  // Weak: a partitioned training program's broadcast of its replicas.
  if (tprt_model_init)
    tprt_model_init(ctx);
  ctx.setConstantWeights(true);
  if (ids.dim(1) != length)
    ctx.setUnpaddedSequence(length);
  // The inputs go where the kernels run; the logits come back.
  ids = ids.to(o.device.device);
  bool keepsAll = tprt::keepsEveryKey(attentionMask);
  attentionMask = attentionMask.to(o.device.device);
  if (keepsAll)
    ctx.setKeyMaskKeepsAll(attentionMask);
  tprt::Tensor logits = tprt::truncateSequence(
      tprt_model_forward(ctx, ids, attentionMask).to(tprt::Device::CPU),
      length);
  // A bf16 / f16 program's logits are written widened (exactly).
  logits = logits.to(tprt::DType::F32);
  if (rank == 0)
    tprt::writeNpy(o.output, logits);
  if (o.reportReads)
    reportReads(ctx, rank, size);
  if (o.bench > 0)
    benchForward(ctx, ids, attentionMask, o.bench, o.device.device,
                 o.cudaGraphs, rank, size);
  if (o.reportMemory)
    reportMemory(o.device.device, rank, size);
  return 0;
}

} // namespace

// Nothing throws out of main: a library exception (std::bad_alloc from a
// size no check foresaw) is an error message and a non-zero exit on every
// rank, not std::terminate.
int main(int argc, char **argv) try {
  // libgomp busy-waits its idle threads by default. With MPI ranks, MPI's
  // progress engine and a GEMM library sharing few cores, that spinning
  // starves the threads doing work; sleeping at once is the other extreme,
  // every op's parallel region then waking its threads from the kernel
  // (docs/runtime.md has the measurements). So: passive, with a bounded
  // spin before sleeping (GOMP_SPINCOUNT, which overrides the policy's 0).
  // libgomp reads both when it loads, before main, so set them and restart
  // once; values the user set are kept.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    setenv("GOMP_SPINCOUNT", "10000", 0);
    execv("/proc/self/exe", argv);
    // Not fatal if the restart is impossible: only slower.
  }
  // Every op allocates its result; keep freed blocks in the heap instead of
  // returning them to the kernel, so a forward pass does not page-fault its
  // activations in again.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int ranks = tprt_model_tp_size * dataParallelSize();
  if (size != ranks)
    tprt::fatal("the program was partitioned for " + std::to_string(ranks) +
                " ranks" +
                (dataParallelSize() > 1
                     ? " (" + std::to_string(dataParallelSize()) + " x " +
                           std::to_string(tprt_model_tp_size) + ")"
                     : std::string()) +
                " but runs on " + std::to_string(size) + " (use mpirun -np " +
                std::to_string(ranks) + ")");
  checkSameProgram(size);

  RunOptions options;
  if (!parseOptions(argc, argv, options)) {
    MPI_Finalize();
    return 0;
  }
  omp_set_num_threads(options.threads);
  tprt::cpu::setThreads(options.threads);
  int status = options.training ? runTraining(options, argv[0], rank, size)
                                : runForward(options, argv[0], rank, size);
  MPI_Finalize();
  return status;
} catch (const std::exception &e) {
  tprt::fatal(std::string("unexpected error: ") + e.what());
}
