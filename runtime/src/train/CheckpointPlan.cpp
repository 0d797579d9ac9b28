//===- CheckpointPlan.cpp - the files of a sharded save -------------------===//

#include "train/CheckpointPlan.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace tprt {

std::string jsonShape(const std::vector<int64_t> &shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? "," : "") + std::to_string(shape[i]);
  return "[" + out + "]";
}

// FQNs are plain, but a quote must not break a header.
std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

CheckpointFiles planCheckpointFiles(const std::vector<CheckpointTensor> &items,
                                    uint64_t maxBytes,
                                    const std::string &prefix,
                                    const std::string &single) {
  std::vector<std::vector<size_t>> groups(1);
  uint64_t filled = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (single.empty() && filled > 0 && filled + items[i].bytes() > maxBytes) {
      groups.emplace_back();
      filled = 0;
    }
    groups.back().push_back(i);
    filled += items[i].bytes();
  }
  CheckpointFiles plan;
  plan.placements.resize(items.size());
  for (size_t f = 0; f < groups.size(); ++f) {
    char name[64];
    std::snprintf(name, sizeof(name), "-%05zu-of-%05zu.safetensors", f + 1,
                  groups.size());
    // As transformers' save_pretrained: one file is PREFIX.safetensors.
    plan.names.push_back(!single.empty()      ? single
                         : groups.size() == 1 ? prefix + ".safetensors"
                                              : prefix + name);
    std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
    uint64_t offset = 0;
    for (size_t i : groups[f]) {
      const CheckpointTensor &item = items[i];
      header += "," + jsonString(item.name) + ":{\"dtype\":\"" +
                (item.dtype == DType::BF16  ? "BF16"
                 : item.dtype == DType::F16 ? "F16"
                                            : "F32") +
                "\",\"shape\":" + jsonShape(item.shape) +
                ",\"data_offsets\":[" + std::to_string(offset) + "," +
                std::to_string(offset + item.bytes()) + "]}";
      plan.placements[i] = {f, offset};
      offset += item.bytes();
    }
    header += "}";
    // Padded (with spaces, as the format allows) so that the data starts
    // at a multiple of 64 bytes: readers can map tensors in place.
    header.append((64 - (8 + header.size()) % 64) % 64, ' ');
    uint64_t headerBytes = header.size();
    std::string sized(8, '\0');
    for (int b = 0; b < 8; ++b)
      sized[b] = static_cast<char>((headerBytes >> (8 * b)) & 0xff);
    for (size_t i : groups[f])
      plan.placements[i].offset += 8 + headerBytes;
    plan.headers.push_back(sized + header);
    plan.sizes.push_back(8 + headerBytes + offset);
  }
  return plan;
}

CheckpointWriters
assignCheckpointWriters(const std::vector<CheckpointTensor> &items, int tp,
                        int dp) {
  CheckpointWriters w;
  w.group.assign(items.size(), 0);
  w.rank.assign(items.size(), 0);
  std::vector<uint64_t> load(static_cast<size_t>(tp) * dp, 0);
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return items[a].bytes() > items[b].bytes();
  });
  for (size_t i : order) {
    const CheckpointTensor &item = items[i];
    if (item.owned) {
      load[0] += item.bytes();
      continue;
    }
    if (item.shardDim < 0) {
      int best = 0;
      for (int r = 1; r < tp * dp; ++r)
        if (load[r] < load[best])
          best = r;
      w.rank[i] = best;
      load[best] += item.bytes();
      continue;
    }
    uint64_t block = item.bytes() / static_cast<uint64_t>(item.shards);
    int best = 0;
    uint64_t bestLoad = UINT64_MAX;
    for (int g = 0; g < dp; ++g) {
      uint64_t sum = 0;
      for (int64_t b = 0; b < item.shards; ++b)
        sum += load[g * tp + b * item.replicas];
      if (sum < bestLoad) {
        bestLoad = sum;
        best = g;
      }
    }
    w.group[i] = best;
    for (int64_t b = 0; b < item.shards; ++b)
      load[best * tp + b * item.replicas] += block;
  }
  return w;
}

} // namespace tprt
