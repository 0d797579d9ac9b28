//===- safetensors.cpp - where a checkpoint's tensors are -----------------===//
//
// The index of a .safetensors file (`model --weights ckpt/model.safetensors`
// resumes from a saved checkpoint): an 8-byte little-endian header size, a
// JSON object naming each tensor's dtype, shape and byte range, the data.
// And an HF sharded checkpoint: its model.safetensors.index.json maps each
// tensor to the shard file that holds it. Only those JSON subsets are read
// (objects, arrays, strings, non-negative integers; the index's metadata is
// skipped, iteratively), without recursion. Errors name the file and the
// byte offset.
//
//===----------------------------------------------------------------------===//

#include "io/JsonSubset.h"
#include "tprt/tprt.h"

#include <cctype>
#include <cstdint>
#include <fstream>

namespace tprt {
namespace {

using detail::JsonSubset;

class HeaderParser : public JsonSubset {
public:
  HeaderParser(const std::string &path, const std::string &text)
      : JsonSubset(path, text, 8) {}

  std::map<std::string, SafetensorsEntry> parse(uint64_t dataStart,
                                                uint64_t dataBytes) {
    std::map<std::string, SafetensorsEntry> entries;
    expect('{');
    if (peek() == '}') {
      ++pos_;
      return entries;
    }
    do {
      std::string name = string();
      expect(':');
      if (name == "__metadata__") {
        skipStringObject();
        continue;
      }
      SafetensorsEntry entry = tensor(name);
      if (entry.end < entry.begin || entry.end > dataBytes)
        fail("tensor '" + name + "': its data_offsets are outside the " +
             std::to_string(dataBytes) + " data bytes");
      entry.offset = dataStart + entry.begin;
      entry.file = path_;
      if (!entries.emplace(name, entry).second)
        fail("tensor '" + name + "' appears twice");
    } while (comma('}'));
    return entries;
  }

private:
  void skipStringObject() {
    expect('{');
    if (peek() == '}') {
      ++pos_;
      return;
    }
    do {
      string();
      expect(':');
      string();
    } while (comma('}'));
  }
  SafetensorsEntry tensor(const std::string &name) {
    SafetensorsEntry entry;
    bool dtype = false, shape = false, offsets = false;
    expect('{');
    do {
      std::string key = string();
      expect(':');
      if (key == "dtype") {
        std::string d = string();
        dtype = true;
        if (d == "F32")
          entry.dtype = DType::F32;
        else if (d == "BF16")
          entry.dtype = DType::BF16;
        else if (d == "F16")
          entry.dtype = DType::F16;
        else
          fail("tensor '" + name + "' is " + d + " (F32, BF16 or F16)");
      } else if (key == "shape") {
        shape = true;
        for (uint64_t d : integers())
          entry.shape.push_back(static_cast<int64_t>(d));
      } else if (key == "data_offsets") {
        std::vector<uint64_t> range = integers();
        if (range.size() != 2)
          fail("tensor '" + name + "': data_offsets must be [begin, end]");
        entry.begin = range[0];
        entry.end = range[1];
        offsets = true;
      } else {
        fail("tensor '" + name + "': unknown field '" + key + "'");
      }
    } while (comma('}'));
    if (!dtype || !shape || !offsets)
      fail("tensor '" + name + "' lacks dtype, shape or data_offsets");
    return entry;
  }
};

/// model.safetensors.index.json: {"metadata": ..., "weight_map": {tensor:
/// shard file}}.
class IndexParser : public JsonSubset {
public:
  IndexParser(const std::string &path, const std::string &text)
      : JsonSubset(path, text, 0) {}

  std::map<std::string, std::string> parse() {
    std::map<std::string, std::string> weightMap;
    bool sawMap = false;
    expect('{');
    if (peek() != '}') {
      do {
        std::string key = string();
        expect(':');
        if (key != "weight_map") {
          skipValue();
          continue;
        }
        sawMap = true;
        expect('{');
        if (peek() == '}') {
          ++pos_;
          continue;
        }
        do {
          std::string tensor = string();
          expect(':');
          std::string file = string();
          if (file.empty() || file.find('/') != std::string::npos ||
              file == "." || file == "..")
            fail("tensor '" + tensor + "' is in '" + file +
                 "', not a file name beside the index");
          if (!weightMap.emplace(tensor, file).second)
            fail("tensor '" + tensor + "' appears twice");
        } while (comma('}'));
      } while (comma('}'));
    } else {
      ++pos_;
    }
    if (peek() != '\0')
      fail("text after the index's object");
    if (!sawMap)
      fail("no weight_map");
    return weightMap;
  }
};

} // namespace

std::map<std::string, SafetensorsEntry>
readSafetensorsIndex(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    fatal("cannot open '" + path + "'");
  uint64_t size = static_cast<uint64_t>(in.tellg()), headerBytes = 0;
  in.seekg(0);
  unsigned char prefix[8] = {};
  if (size < 8 || !in.read(reinterpret_cast<char *>(prefix), 8))
    fatal("'" + path + "' is not a safetensors file (shorter than 8 bytes)");
  for (int i = 7; i >= 0; --i)
    headerBytes = headerBytes << 8 | prefix[i];
  // The format caps the header at 100 MB.
  if (headerBytes > size - 8 || headerBytes > 100'000'000)
    fatal("'" + path + "' is not a safetensors file (a header of " +
          std::to_string(headerBytes) + " bytes in a file of " +
          std::to_string(size) + ")");
  std::string header(headerBytes, '\0');
  if (!in.read(header.data(), headerBytes))
    fatal("cannot read '" + path + "'");
  return HeaderParser(path, header)
      .parse(8 + headerBytes, size - 8 - headerBytes);
}

std::map<std::string, SafetensorsEntry>
readShardedCheckpointIndex(const std::string &path) {
  // An index names each tensor once: megabytes for the largest models.
  std::string text = detail::readBoundedText(path, 64u << 20);
  std::map<std::string, std::string> weightMap =
      IndexParser(path, text).parse();
  size_t slash = path.find_last_of('/');
  std::string dir =
      slash == std::string::npos ? std::string(".") : path.substr(0, slash);
  // Each shard's header once.
  std::map<std::string, std::map<std::string, SafetensorsEntry>> shards;
  std::map<std::string, SafetensorsEntry> entries;
  for (const auto &[tensor, file] : weightMap) {
    auto shard = shards.find(file);
    if (shard == shards.end()) {
      std::string shardPath = dir + "/" + file;
      if (!std::ifstream(shardPath))
        fatal("'" + path + "' puts tensor '" + tensor + "' in '" + file +
              "', which cannot be opened");
      shard = shards.emplace(file, readSafetensorsIndex(shardPath)).first;
    }
    auto entry = shard->second.find(tensor);
    if (entry == shard->second.end())
      fatal("'" + path + "' puts tensor '" + tensor + "' in '" + file +
            "', which has no such tensor");
    entries.emplace(tensor, entry->second);
  }
  return entries;
}

void Context::useCheckpoint(const std::string &path) {
  auto endsWith = [](const std::string &s, const std::string &suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  // An HF model directory: its sharded index, else its one file.
  std::string file = path;
  if (!endsWith(path, ".safetensors") && !endsWith(path, ".json")) {
    if (std::ifstream(path + "/model.safetensors.index.json"))
      file = path + "/model.safetensors.index.json";
    else if (std::ifstream(path + "/model.safetensors"))
      file = path + "/model.safetensors";
    else
      fatal("'" + path +
            "' holds neither model.safetensors.index.json nor "
            "model.safetensors");
  }
  checkpointPath_ = file;
  checkpoint_ = endsWith(file, ".json") ? readShardedCheckpointIndex(file)
                                        : readSafetensorsIndex(file);
  size_t slash = file.find_last_of('/');
  std::string adapter =
      (slash == std::string::npos ? std::string(".") : file.substr(0, slash)) +
      "/adapter_model.safetensors";
  if (!std::ifstream(adapter))
    return;
  const std::string prefix = "base_model.model.";
  for (auto &[name, entry] : readSafetensorsIndex(adapter))
    checkpoint_[name.compare(0, prefix.size(), prefix) == 0
                    ? name.substr(prefix.size())
                    : name] = entry;
}

} // namespace tprt
