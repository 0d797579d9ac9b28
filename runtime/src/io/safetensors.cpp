//===- safetensors.cpp - where a checkpoint's tensors are -----------------===//
//
// The index of a .safetensors file (`model --weights ckpt/model.safetensors`
// resumes from a saved checkpoint): an 8-byte little-endian header size, a
// JSON object naming each tensor's dtype, shape and byte range, the data.
// Only that JSON subset is read: objects, arrays, strings, non-negative
// integers. Errors name the file and the byte offset.
//
//===----------------------------------------------------------------------===//

#include "tprt/tprt.h"

#include <cctype>
#include <cstdint>
#include <fstream>

namespace tprt {
namespace {

class HeaderParser {
public:
  HeaderParser(const std::string &path, const std::string &text)
      : path_(path), text_(text) {}

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
  [[noreturn]] void fail(const std::string &message) {
    fatal("'" + path_ + "': " + message + " (header byte " +
          std::to_string(8 + pos_) + ")");
  }
  char peek() {
    while (pos_ < text_.size() &&
           std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  void expect(char c) {
    if (peek() != c)
      fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  /// After an element: true at ',', false at `close` (both consumed).
  bool comma(char close) {
    char c = peek();
    if (c != ',' && c != close)
      fail(std::string("expected ',' or '") + close + "'");
    ++pos_;
    return c == ',';
  }
  std::string string() {
    expect('"');
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\') {
        if (pos_ >= text_.size() || text_[pos_] == 'u')
          fail("unsupported escape in a string");
        c = text_[pos_++];
      }
      out.push_back(c);
    }
    expect('"');
    return out;
  }
  uint64_t integer() {
    peek();
    uint64_t v = 0;
    size_t start = pos_;
    while (pos_ < text_.size() &&
           std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      if (v > (UINT64_MAX - 9) / 10)
        fail("an integer overflows");
      v = v * 10 + (text_[pos_++] - '0');
    }
    if (pos_ == start)
      fail("expected a non-negative integer");
    return v;
  }
  std::vector<uint64_t> integers() {
    std::vector<uint64_t> out;
    expect('[');
    if (peek() == ']') {
      ++pos_;
      return out;
    }
    do
      out.push_back(integer());
    while (comma(']'));
    return out;
  }
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

  const std::string &path_;
  const std::string &text_;
  size_t pos_ = 0;
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

void Context::useCheckpoint(const std::string &path) {
  checkpointPath_ = path;
  checkpoint_ = readSafetensorsIndex(path);
  size_t slash = path.find_last_of('/');
  std::string adapter =
      (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) +
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
