//===- checkpoint.cpp - trained weights as a transformers checkpoint ------===//
//
// model.safetensors with every parameter whole under its HF FQN (split
// parameters gathered onto rank 0) and the config.json the model came with,
// so that transformers' from_pretrained(DIR) and `model --weights` read it.
// Files appear under their names only when complete.
//
//===----------------------------------------------------------------------===//

#include "tprt/Train.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace tprt {
namespace {

/// `whole` along `axis` holds one block of `rows` per rank, in rank order;
/// ranks sharing a block (KV heads fewer than the ranks) hold copies: keep
/// one of each.
Tensor dropReplicaBlocks(const Tensor &whole, int axis, int64_t rows,
                         int64_t replicas) {
  if (replicas == 1)
    return whole;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < whole.rank(); ++d)
    if (d < axis)
      outer *= whole.dim(d);
    else if (d > axis)
      inner *= whole.dim(d);
  int64_t kept = whole.dim(axis) / rows / replicas;
  std::vector<int64_t> shape = whole.shape();
  shape[axis] = kept * rows;
  Tensor out = Tensor::uninitialized(DType::F32, shape);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t b = 0; b < kept; ++b)
      std::copy_n(whole.f32() +
                      (o * whole.dim(axis) + b * replicas * rows) * inner,
                  rows * inner, out.f32() + (o * kept + b) * rows * inner);
  return out;
}

void writeOrFail(std::ofstream &out, const void *data, size_t bytes,
                 const std::string &path) {
  out.write(static_cast<const char *>(data), bytes);
  if (!out)
    fatal("cannot write '" + path + "'");
}

void publish(const std::string &temp, const std::string &path) {
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    fatal("cannot write '" + path + "'");
  }
}

} // namespace

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// `tensors` as DIR/NAME in the safetensors layout (an 8-byte header size, a
/// JSON header padded with spaces to 8 bytes, the data in header order),
/// each key prefixed with `prefix`.
static void writeSafetensors(const std::string &path,
                             const NamedTensors &tensors,
                             const std::string &prefix) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (const auto &[fqn, t] : tensors) {
    std::string shape;
    for (int i = 0; i < t.rank(); ++i)
      shape += (i ? "," : "") + std::to_string(t.dim(i));
    header += ",\"" + prefix + fqn + "\":{\"dtype\":\"F32\",\"shape\":[" +
              shape + "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.bytes()) + "]}";
    offset += t.bytes();
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary);
    if (!out)
      fatal("cannot write '" + temp + "'");
    uint64_t size = header.size();
    writeOrFail(out, &size, sizeof(size), temp);
    writeOrFail(out, header.data(), header.size(), temp);
    for (const auto &entry : tensors)
      writeOrFail(out, entry.second.raw(), entry.second.bytes(), temp);
  }
  publish(temp, path);
}

/// A copy of `from` as `to` (nothing when `from` does not exist).
static void copyIfPresent(const std::string &from, const std::string &to) {
  std::ifstream in(from, std::ios::binary);
  if (!in)
    return;
  std::string temp = to + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary);
    out << in.rdbuf();
    if (!out)
      fatal("cannot write '" + temp + "'");
  }
  publish(temp, to);
}

static bool isAdapterTensor(const std::string &fqn) {
  for (const char *suffix :
       {".lora_A.weight", ".lora_B.weight", ".lora_B.bias"}) {
    std::string s = suffix;
    if (fqn.size() >= s.size() &&
        fqn.compare(fqn.size() - s.size(), s.size(), s) == 0)
      return true;
  }
  return false;
}

void saveCheckpoint(Context &ctx, const std::string &dir) {
  NamedTensors base, adapter;
  std::string adapterFile;
  for (const auto &[fqn, layout] : ctx.paramLayouts()) {
    Tensor local = *ctx.cachedParam(fqn);
    int64_t rows = layout.shardDim >= 0 ? local.dim(layout.shardDim) : 0;
    // Gathered where the parameter is, then written from the host.
    if (layout.shardDim >= 0)
      local = all_gather(ctx, local, layout.shardDim);
    local = local.to(Device::CPU);
    if (local.dtype() != DType::F32)
      local = local.to(DType::F32);
    if (layout.shardDim >= 0)
      local = dropReplicaBlocks(local, layout.shardDim, rows, layout.replicas);
    if (isAdapterTensor(fqn)) {
      adapter.emplace_back(fqn, local);
      adapterFile = layout.file;
    } else {
      base.emplace_back(fqn, local);
    }
  }
  if (ctx.rank() != 0)
    return;
  writeSafetensors(dir + "/model.safetensors", base, "");
  copyIfPresent(ctx.resolve("config.json"), dir + "/config.json");
  if (adapter.empty())
    return;
  // PEFT's layout: the factors under base_model.model.<module>, beside the
  // adapter_config.json they were read with.
  writeSafetensors(dir + "/adapter_model.safetensors", adapter,
                   "base_model.model.");
  size_t slash = adapterFile.find_last_of('/');
  if (slash != std::string::npos)
    copyIfPresent(adapterFile.substr(0, slash) + "/adapter_config.json",
                  dir + "/adapter_config.json");
}

} // namespace tprt
