//===- checkpoint.cpp - sharded checkpoints, written in parallel ----------===//
//
// `--save DIR` writes what transformers' save_pretrained writes
// (model-0000k-of-0000n.safetensors and model.safetensors.index.json, or
// model.safetensors when one file holds it all; every parameter whole under
// its HF FQN), a PEFT adapter for LoRA factors,
// the config.json the model came with, and what `--resume DIR` needs: the
// optimizer state in the same layout and trainer_state.json.
//
// Nothing is gathered: every rank computes the same plan of files and
// offsets, rank 0 creates each file at its full size, and each rank writes
// the blocks it holds at their offsets (a block split on dimension 1 as one
// run per row). A replicated tensor is written by one rank, and split ones
// by one data-parallel group, chosen so that the bytes each rank writes are
// about equal. Files carry temporary names until every rank is done; rank 0
// then renames them and writes the indexes and trainer_state.json last, so
// an interrupted save never leaves a directory that looks complete.
//
//===----------------------------------------------------------------------===//

#include "io/JsonSubset.h"
#include "tprt/Train.h"
#include "train/CheckpointPlan.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <mpi.h>
#include <numeric>
#include <sys/stat.h>
#include <unistd.h>

namespace tprt {
namespace {

/// The format trainer_state.json declares (and --resume requires).
constexpr const char *kFormat = "tp-opt training checkpoint 1";

void writeAt(int fd, const char *data, uint64_t bytes, uint64_t offset,
             const std::string &path) {
  for (uint64_t done = 0; done < bytes;) {
    ssize_t n = ::pwrite(fd, data + done, bytes - done,
                         static_cast<off_t>(offset + done));
    if (n <= 0)
      fatal("cannot write '" + path + "': " + std::strerror(errno));
    done += static_cast<uint64_t>(n);
  }
}

/// Writes `text` as `path` through a temporary name.
void writeWhole(const std::string &path, const std::string &text) {
  std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary);
    out << text;
    if (!out)
      fatal("cannot write '" + temp + "'");
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0)
    fatal("cannot write '" + path + "': " + std::strerror(errno));
}

/// This rank's block of `item` (held in `host`; the whole tensor when it
/// is not split), or the run of it from item.runBegin (--zero: elements of
/// the block as held, padding included), into the file at `offset`: one
/// write per row of a block split on a later dimension. An uneven block's
/// padding is not written.
void writeBlock(int fd, const std::string &path, const CheckpointTensor &item,
                const Tensor &host, uint64_t offset) {
  const char *data = static_cast<const char *>(host.raw());
  uint64_t elem = dtypeSize(item.dtype), outer = 1, inner = 1;
  int dim = std::max(item.block.dim, 0);
  for (int d = 0; d < dim; ++d)
    outer *= static_cast<uint64_t>(item.shape[d]);
  for (size_t d = dim + 1; d < item.shape.size(); ++d)
    inner *= static_cast<uint64_t>(item.shape[d]);
  uint64_t dimLen = item.shape.empty() ? 1 : item.shape[dim];
  // The block's rows in the file [start, start + extent), of `held` rows
  // in `host` (more: an uneven block's padding).
  uint64_t extent = dimLen, start = 0, held = dimLen;
  if (item.block.dim >= 0) {
    extent = static_cast<uint64_t>(item.block.size);
    start = static_cast<uint64_t>(item.block.start);
    held = static_cast<uint64_t>(item.block.extent);
  }
  // Element k of the held block is in row o = k / heldRow at column
  // k % heldRow; the columns from realRow on are an uneven block's padding.
  uint64_t heldRow = held * inner, realRow = extent * inner,
           blockElems = outer * heldRow;
  uint64_t begin = item.runBegin < 0 ? 0 : item.runBegin,
           count = item.runBegin < 0 ? blockElems : host.bytes() / elem,
           end = begin + count;
  if (item.runBegin < 0 ? host.bytes() / elem != blockElems : end > blockElems)
    fatal("--save: '" + item.name + "' on this rank is " + host.describe() +
          ", not its block of " + jsonShape(item.shape));
  for (uint64_t k = begin; k < end;) {
    uint64_t o = k / heldRow, column = k % heldRow;
    if (column >= realRow) {
      k = std::min(end, (o + 1) * heldRow);
      continue;
    }
    uint64_t take = std::min(end, o * heldRow + realRow) - k;
    writeAt(fd, data + (k - begin) * elem, take * elem,
            offset + ((o * dimLen + start) * inner + column) * elem, path);
    k += take;
  }
}

/// The files of `plan` in `dir` under temporary names, every rank writing
/// its blocks. Collective; rank 0 renames them (publishFiles) later.
void writeFiles(Context &ctx, const std::string &dir,
                const CheckpointFiles &plan,
                const std::vector<CheckpointTensor> &items,
                const std::vector<const Tensor *> &locals) {
  int tp = ctx.tp().size(), dp = ctx.dp().size();
  if (ctx.rank() == 0)
    for (size_t f = 0; f < plan.names.size(); ++f) {
      std::string temp = dir + "/" + plan.names[f] + ".tmp";
      int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0)
        fatal("cannot write '" + temp + "': " + std::strerror(errno));
      writeAt(fd, plan.headers[f].data(), plan.headers[f].size(), 0, temp);
      if (::ftruncate(fd, static_cast<off_t>(plan.sizes[f])) != 0)
        fatal("cannot write '" + temp + "': " + std::strerror(errno));
      ::close(fd);
    }
  MPI_Barrier(MPI_COMM_WORLD);
  CheckpointWriters writers = assignCheckpointWriters(items, tp, dp);
  int tpRank = ctx.tp().rank(), dpRank = ctx.dp().rank();
  std::vector<int> fds(plan.names.size(), -1);
  for (size_t i = 0; i < items.size(); ++i) {
    const CheckpointTensor &item = items[i];
    // A run (--zero's optimizer state) is written by whichever
    // data-parallel rank holds it: tensor-parallel rank 0's for a
    // replicated tensor, each block's first holder's for a split one.
    bool mine =
        item.runBegin >= 0
            ? locals[i] && (item.owned || item.shardDim < 0 ? tpRank == 0
                                                            : item.block.first)
        : item.owned        ? ctx.rank() == 0
        : item.shardDim < 0 ? ctx.rank() == writers.rank[i]
                            : dpRank == writers.group[i] && item.block.first;
    if (!mine)
      continue;
    const FilePlacement &at = plan.placements[i];
    std::string path = dir + "/" + plan.names[at.file] + ".tmp";
    if (fds[at.file] < 0) {
      fds[at.file] = ::open(path.c_str(), O_WRONLY);
      if (fds[at.file] < 0)
        fatal("cannot write '" + path + "': " + std::strerror(errno));
    }
    // One tensor in flight on the host, in the type it is saved in.
    Tensor host = locals[i]->to(Device::CPU);
    if (host.dtype() != item.dtype)
      host = host.to(item.dtype);
    writeBlock(fds[at.file], path, item, host, at.offset);
  }
  // A test hook: TPRT_TEST_INTERRUPT_SAVE=R stops rank R once it wrote its
  // blocks of the first file set, as a crash would (what is left must not
  // look like a checkpoint).
  if (const char *rank = std::getenv("TPRT_TEST_INTERRUPT_SAVE"))
    if (*rank && std::atoi(rank) == ctx.rank())
      fatal("--save interrupted (TPRT_TEST_INTERRUPT_SAVE)");
  for (int fd : fds)
    if (fd >= 0 && ::close(fd) != 0)
      fatal("--save: closing a file in '" + dir +
            "' failed: " + std::strerror(errno));
  MPI_Barrier(MPI_COMM_WORLD);
}

/// Rank 0: the files of `plan` under their names, and their index
/// (`index`: empty for a single file).
void publishFiles(const std::string &dir, const CheckpointFiles &plan,
                  const std::vector<CheckpointTensor> &items,
                  const std::string &index) {
  for (const std::string &name : plan.names) {
    std::string path = dir + "/" + name;
    if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0)
      fatal("cannot write '" + path + "': " + std::strerror(errno));
  }
  // One file needs no index (transformers writes none then).
  if (index.empty() || plan.names.size() == 1)
    return;
  uint64_t total = 0;
  std::vector<std::pair<std::string, size_t>> map;
  for (size_t i = 0; i < items.size(); ++i) {
    total += items[i].bytes();
    map.emplace_back(items[i].name, plan.placements[i].file);
  }
  std::sort(map.begin(), map.end());
  std::string text =
      "{\n  \"metadata\": {\"total_size\": " + std::to_string(total) +
      "},\n  \"weight_map\": {";
  for (size_t i = 0; i < map.size(); ++i)
    text += std::string(i ? "," : "") + "\n    " + jsonString(map[i].first) +
            ": " + jsonString(plan.names[map[i].second]);
  writeWhole(dir + "/" + index, text + "\n  }\n}\n");
}

bool isAdapterTensor(const std::string &fqn) {
  for (const char *suffix :
       {".lora_A.weight", ".lora_B.weight", ".lora_B.bias"}) {
    std::string s = suffix;
    if (fqn.size() >= s.size() &&
        fqn.compare(fqn.size() - s.size(), s.size(), s) == 0)
      return true;
  }
  return false;
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string parentOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// A copy of `from` as `to` through a temporary name.
void copyFile(const std::string &from, const std::string &to) {
  std::ifstream in(from, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    fatal("cannot read '" + from + "'");
  writeWhole(to, text);
}

/// Rank 0, first: what an earlier save left in `dir` goes, its indexes and
/// trainer_state.json before any shard, so that no mix of two saves looks
/// complete.
void removeEarlierSave(const std::string &dir) {
  for (const char *name :
       {"trainer_state.json", "model.safetensors.index.json",
        "optimizer.safetensors.index.json", "model.safetensors",
        "optimizer.safetensors", "adapter_model.safetensors"})
    std::remove((dir + "/" + name).c_str());
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    fatal("--save: cannot read '" + dir + "': " + std::strerror(errno));
  std::vector<std::string> stale;
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    bool shard =
        (name.rfind("model-", 0) == 0 || name.rfind("optimizer-", 0) == 0) &&
        name.find("-of-") != std::string::npos &&
        (name.find(".safetensors") != std::string::npos);
    if (shard)
      stale.push_back(dir + "/" + name);
  }
  ::closedir(d);
  for (const std::string &path : stale)
    std::remove(path.c_str());
}

std::string placementText(const Context::ParamLayout &l) {
  if (l.shardDim < 0)
    return "replicated";
  if (!l.sizes.empty())
    return "split(" + std::to_string(l.shardDim) +
           "), starts = " + jsonShape(l.starts) +
           ", sizes = " + jsonShape(l.sizes);
  return "split(" + std::to_string(l.shardDim) +
         "), blocks = " + std::to_string(l.shards) +
         ", replicas = " + std::to_string(l.replicas);
}

/// trainer_state.json: the grid, the position, the optimizer and each
/// parameter's global shape, placement and state tensors.
std::string trainerState(Context &ctx, const TrainOptions &o,
                         const RunPosition &position,
                         const Optimizer *optimizer) {
  char numbers[512];
  std::snprintf(numbers, sizeof(numbers),
                "  \"hyperparameters\": {\"lr\": %.17g, \"weight_decay\": "
                "%.17g, \"betas\": [%.17g, %.17g], \"eps\": %.17g, "
                "\"momentum\": %.17g, \"max_grad_norm\": %.17g},\n",
                o.lr, o.weightDecay, o.beta1, o.beta2, o.eps, o.momentum,
                o.maxGradNorm);
  std::string text = "{\n  \"format\": " + jsonString(kFormat) + ",\n";
  text += "  \"tp\": " + std::to_string(ctx.tp().size()) +
          ",\n  \"dp\": " + std::to_string(ctx.dp().size()) + ",\n";
  text += "  \"step\": " + std::to_string(position.step) + ",\n";
  text +=
      "  \"rows_consumed\": " + std::to_string(position.rowsConsumed) + ",\n";
  if (position.seed)
    text += "  \"seed\": " + std::to_string(*position.seed) + ",\n";
  text += "  \"data_rows\": " + std::to_string(position.dataRows) +
          ",\n  \"data_length\": " + std::to_string(position.dataLength) +
          ",\n  \"data_hash\": " + std::to_string(position.dataHash) + ",\n";
  if (optimizer)
    text +=
        "  \"optimizer\": " + jsonString(optimizer->name()) +
        ",\n  \"optimizer_step\": " + std::to_string(optimizer->stepCount()) +
        ",\n";
  text += numbers;
  text += "  \"parameters\": {";
  bool first = true;
  for (const auto &[fqn, layout] : ctx.paramLayouts()) {
    std::string state;
    if (optimizer && optimizer->sharded()) {
      if (ctx.grads().count(fqn))
        for (const std::string &name :
             optimizer->stateNames(*ctx.cachedParam(fqn)))
          state += (state.empty() ? "" : ", ") + jsonString(name);
    } else if (optimizer) {
      for (const auto &entry : optimizer->stateOf(fqn))
        state += (state.empty() ? "" : ", ") + jsonString(entry.first);
    }
    text += std::string(first ? "" : ",") + "\n    " + jsonString(fqn) +
            ": {\"shape\": " + jsonShape(layout.shape) +
            ", \"placement\": " + jsonString(placementText(layout)) +
            ", \"state\": [" + state + "]}";
    first = false;
  }
  return text + "\n  }\n}\n";
}

} // namespace

namespace {

/// A field of /proc/self/status in MiB (VmRSS, VmHWM); 0 where there is
/// none.
double statusMiB(const char *field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  size_t n = std::strlen(field);
  while (std::getline(status, line))
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':')
      return std::strtod(line.c_str() + n + 1, nullptr) / 1024.0;
  return 0;
}

/// The files of the checkpoint (saveCheckpoint): written by every rank,
/// published by rank 0. Returns the bytes of the files.
uint64_t writeCheckpoint(Context &ctx, const std::string &dir,
                         const TrainOptions &options,
                         const RunPosition &position,
                         const Optimizer *optimizer) {
  if (ctx.rank() == 0)
    removeEarlierSave(dir);
  // What each file set holds, and this rank's block of each.
  struct Set {
    std::vector<CheckpointTensor> tensors;
    std::vector<const Tensor *> locals;
    CheckpointFiles files;
  } base, adapter, state;
  std::string adapterFile;
  for (const auto &[fqn, layout] : ctx.paramLayouts()) {
    const Tensor *local = ctx.cachedParam(fqn);
    auto grad = ctx.grads().find(fqn);
    bool owned = grad != ctx.grads().end() && grad->second.owned;
    CheckpointTensor tensor{
        fqn,           local->dtype(),  layout.shape, layout.shardDim,
        layout.shards, layout.replicas, owned};
    tensor.block = paramBlockOf(fqn, layout, ctx.tp().rank());
    // Held as a run (--zero 3): each data-parallel rank writes its own.
    tensor.runBegin = layout.runBegin;
    if (layout.runBegin >= 0 && local->numel() == 0)
      local = nullptr;
    Set &set = isAdapterTensor(fqn) ? adapter : base;
    if (&set == &adapter) {
      tensor.name = "base_model.model." + fqn;
      adapterFile = layout.file;
    }
    set.tensors.push_back(tensor);
    set.locals.push_back(local);
    tensor.runBegin = -1;
    if (optimizer && optimizer->sharded() && ctx.grads().count(fqn)) {
      // Every rank lists every state tensor; it writes its run, if any.
      std::vector<std::pair<std::string, const Tensor *>> held =
          optimizer->stateOf(fqn);
      std::vector<std::string> names =
          optimizer->stateNames(*ctx.cachedParam(fqn));
      for (size_t k = 0; k < names.size(); ++k) {
        CheckpointTensor s = tensor;
        s.name = fqn + "." + names[k];
        s.dtype = DType::F32;
        s.runBegin = optimizer->stateBegin(fqn).value_or(0);
        state.tensors.push_back(s);
        state.locals.push_back(k < held.size() ? held[k].second : nullptr);
      }
    } else if (optimizer) {
      for (const auto &[name, value] : optimizer->stateOf(fqn)) {
        CheckpointTensor s = tensor;
        s.name = fqn + "." + name;
        s.dtype = DType::F32;
        state.tensors.push_back(s);
        state.locals.push_back(value);
      }
    }
  }
  auto maxBytes = static_cast<uint64_t>(options.saveShardMiB * 1048576.0);
  base.files = planCheckpointFiles(base.tensors, maxBytes, "model", "");
  writeFiles(ctx, dir, base.files, base.tensors, base.locals);
  if (!adapter.tensors.empty()) {
    adapter.files = planCheckpointFiles(adapter.tensors, maxBytes, "",
                                        "adapter_model.safetensors");
    writeFiles(ctx, dir, adapter.files, adapter.tensors, adapter.locals);
  }
  if (!state.tensors.empty()) {
    state.files = planCheckpointFiles(state.tensors, maxBytes, "optimizer", "");
    writeFiles(ctx, dir, state.files, state.tensors, state.locals);
  }
  uint64_t bytes = 0;
  for (const Set *set : {&base, &adapter, &state})
    for (uint64_t size : set->files.sizes)
      bytes += size;
  if (ctx.rank() != 0)
    return bytes;
  publishFiles(dir, base.files, base.tensors, "model.safetensors.index.json");
  // The config.json the model came with: beside the checkpoint it was read
  // from, else beside its weights (a graph-only export's shards), else
  // beside the model file.
  std::vector<std::string> configs;
  if (!ctx.checkpointPath().empty())
    configs.push_back(parentOf(ctx.checkpointPath()) + "/config.json");
  for (const auto &entry : ctx.paramLayouts())
    configs.push_back(parentOf(entry.second.file) + "/config.json");
  configs.push_back(ctx.resolve("config.json"));
  for (const std::string &config : configs)
    if (exists(config)) {
      if (config != dir + "/config.json")
        copyFile(config, dir + "/config.json");
      break;
    }
  if (!adapter.tensors.empty()) {
    publishFiles(dir, adapter.files, adapter.tensors, "");
    std::string peft = parentOf(adapterFile) + "/adapter_config.json";
    if (exists(peft) && peft != dir + "/adapter_config.json")
      copyFile(peft, dir + "/adapter_config.json");
  }
  if (!state.tensors.empty())
    publishFiles(dir, state.files, state.tensors,
                 "optimizer.safetensors.index.json");
  writeWhole(dir + "/trainer_state.json",
             trainerState(ctx, options, position, optimizer));
  return bytes;
}

} // namespace

void saveCheckpoint(Context &ctx, const std::string &dir,
                    const TrainOptions &options, const RunPosition &position,
                    const Optimizer *optimizer) {
  // The resident high-water mark restarts here (Linux: clear_refs 5), so
  // that the save's own peak is what is reported.
  { std::ofstream("/proc/self/clear_refs") << "5"; }
  double before = statusMiB("VmRSS"), start = MPI_Wtime();
  uint64_t bytes = writeCheckpoint(ctx, dir, options, position, optimizer);
  double mine[3] = {MPI_Wtime() - start, statusMiB("VmHWM") - before, 0};
  for (const auto &entry : ctx.paramLayouts())
    mine[2] += ctx.cachedParam(entry.first)->bytes() / 1048576.0;
  std::vector<double> all(3 * static_cast<size_t>(ctx.worldSize()));
  MPI_Gather(mine, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (ctx.rank() != 0)
    return;
  double seconds = 0;
  std::string peaks;
  for (int r = 0; r < ctx.worldSize(); ++r) {
    seconds = std::max(seconds, all[3 * r]);
    char text[128];
    std::snprintf(text, sizeof(text), "%srank %d +%.1f MiB (parameters %.1f)",
                  r ? ", " : "", r, std::max(0.0, all[3 * r + 1]),
                  all[3 * r + 2]);
    peaks += text;
  }
  std::printf("saved '%s': %.1f MiB in %.3f s; resident memory added during "
              "the save: %s\n",
              dir.c_str(), bytes / 1048576.0, seconds, peaks.c_str());
  std::fflush(stdout);
}

namespace {

/// trainer_state.json as --resume reads it.
class TrainerStateParser : public detail::JsonSubset {
public:
  TrainerStateParser(const std::string &path, const std::string &text)
      : JsonSubset(path, text, 0) {}

  void parse(ResumePoint &point,
             std::map<std::string, std::vector<int64_t>> &shapes,
             std::map<std::string, std::vector<std::string>> &states) {
    bool sawFormat = false;
    expect('{');
    do {
      std::string key = string();
      expect(':');
      if (key == "format") {
        if (string() != kFormat)
          fail("not a tp-opt training checkpoint (\"format\" is not \"" +
               std::string(kFormat) + "\")");
        sawFormat = true;
      } else if (key == "tp") {
        point.tp = static_cast<int>(integer());
      } else if (key == "dp") {
        point.dp = static_cast<int>(integer());
      } else if (key == "step") {
        point.position.step = static_cast<int64_t>(integer());
      } else if (key == "rows_consumed") {
        point.position.rowsConsumed = static_cast<int64_t>(integer());
      } else if (key == "seed") {
        point.position.seed = integer();
      } else if (key == "data_rows") {
        point.position.dataRows = static_cast<int64_t>(integer());
      } else if (key == "data_length") {
        point.position.dataLength = static_cast<int64_t>(integer());
      } else if (key == "data_hash") {
        point.position.dataHash = integer();
      } else if (key == "optimizer") {
        point.optimizer = string();
      } else if (key == "optimizer_step") {
        point.optimizerStep = static_cast<int64_t>(integer());
      } else if (key == "parameters") {
        parameters(shapes, states);
      } else {
        skipValue();
      }
    } while (comma('}'));
    if (!sawFormat)
      fail("not a tp-opt training checkpoint (no \"format\")");
  }

private:
  void parameters(std::map<std::string, std::vector<int64_t>> &shapes,
                  std::map<std::string, std::vector<std::string>> &states) {
    expect('{');
    if (peek() == '}') {
      ++pos_;
      return;
    }
    do {
      std::string fqn = string();
      expect(':');
      expect('{');
      do {
        std::string key = string();
        expect(':');
        if (key == "shape") {
          for (uint64_t d : integers())
            shapes[fqn].push_back(static_cast<int64_t>(d));
        } else if (key == "state") {
          std::vector<std::string> &names = states[fqn];
          expect('[');
          if (peek() == ']') {
            ++pos_;
            continue;
          }
          do
            names.push_back(string());
          while (comma(']'));
        } else {
          skipValue();
        }
      } while (comma('}'));
    } while (comma('}'));
  }
};

std::string dims(const std::vector<int64_t> &shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return "[" + out + "]";
}

} // namespace

std::unique_ptr<ResumePoint> readResumePoint(const std::string &given,
                                             const TrainOptions &options,
                                             const ParamSpec *params) {
  auto point = std::make_unique<ResumePoint>();
  // Absolute: the state's files are read by path while the program runs.
  char real[PATH_MAX];
  if (!::realpath(given.c_str(), real))
    fatal("--resume: cannot open '" + given + "': " + std::strerror(errno));
  std::string dir = real;
  point->dir = dir;
  std::string path = dir + "/trainer_state.json";
  if (!exists(path))
    fatal("--resume: '" + path +
          "' cannot be opened (a directory `--save` finished writing has it)");
  std::string text = detail::readBoundedText(path, 64u << 20);
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::vector<std::string>> states;
  TrainerStateParser(path, text).parse(*point, shapes, states);

  // The program's parameters, each in the checkpoint with its shape.
  std::map<std::string, std::vector<int64_t>> program;
  for (const ParamSpec *p = params; p->fqn; ++p)
    program[p->fqn] = std::vector<int64_t>(p->shape, p->shape + p->rank);
  for (const auto &[fqn, shape] : program) {
    auto saved = shapes.find(fqn);
    if (saved == shapes.end())
      fatal("--resume: '" + path + "' has no parameter '" + fqn +
            "' (a parameter of the program, " + dims(shape) +
            "): a checkpoint of another model");
    if (saved->second != shape)
      fatal("--resume: '" + path + "': parameter '" + fqn + "' is " +
            dims(saved->second) + ", the program's " + dims(shape) +
            ": a checkpoint of another model");
  }
  for (const auto &entry : shapes)
    if (!program.count(entry.first))
      fatal("--resume: '" + path + "' has parameter '" + entry.first +
            "', which the program does not: a checkpoint of another model");
  std::string mine =
      &tprt_model_optimizer ? std::string(tprt_model_optimizer) : "";
  if (point->optimizer != mine)
    fatal("--resume: '" + path + "' holds the state of " +
          (point->optimizer.empty() ? std::string("no optimizer")
                                    : "optimizer " + point->optimizer) +
          "; this program's optimizer is " + mine +
          " (tpc --optimizer): its state cannot continue that run");
  if (options.seed && point->position.seed != options.seed)
    fatal("--resume: the run in '" + dir + "' " +
          (point->position.seed
               ? "was shuffled with --seed " +
                     std::to_string(*point->position.seed)
               : std::string("read its data in order (no --seed)")) +
          "; --seed " + std::to_string(*options.seed) +
          " would not continue it (leave --seed out)");

  // The optimizer state: every tensor the manifest lists, in the shape of
  // its parameter.
  bool anyState = false;
  for (const auto &entry : states)
    anyState |= !entry.second.empty();
  if (!anyState)
    return point;
  // Its index, or the one file that holds it all.
  std::string index = dir + "/optimizer.safetensors.index.json",
              single = dir + "/optimizer.safetensors";
  if (exists(index))
    point->state = readShardedCheckpointIndex(index);
  else if (exists(single))
    point->state = readSafetensorsIndex(index = single);
  else
    fatal("--resume: '" + path + "' lists optimizer state, but neither '" +
          index + "' nor '" + single + "' can be opened");
  for (const auto &[fqn, names] : states)
    for (const std::string &name : names) {
      std::string key = fqn + "." + name;
      auto entry = point->state.find(key);
      if (entry == point->state.end())
        fatal("--resume: '" + index + "' has no tensor '" + key + "'");
      if (entry->second.dtype != DType::F32 ||
          entry->second.shape != shapes[fqn])
        fatal("--resume: '" + entry->second.file + "': tensor '" + key +
              "' is " + dtypeName(entry->second.dtype) +
              dims(entry->second.shape) + ", not f32" + dims(shapes[fqn]));
    }
  return point;
}

} // namespace tprt
