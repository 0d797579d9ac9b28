//===- JsonSubset.h - the JSON the runtime reads ----------------*- C++ -*-===//
//
// The subsets of JSON the runtime reads (safetensors headers, HF indexes,
// checkpoint manifests): objects, arrays, strings, non-negative integers;
// any other value skipped, iteratively. Errors name the file and the byte.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_IO_JSONSUBSET_H
#define TPRT_IO_JSONSUBSET_H

#include "tprt/tprt.h"

#include <cctype>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace tprt::detail {

/// Reading helpers over a JSON text; errors name the file and the byte
/// (`base` is the text's offset in the file).
class JsonSubset {
public:
  JsonSubset(const std::string &path, const std::string &text, size_t base)
      : path_(path), text_(text), base_(base) {}

protected:
  [[noreturn]] void fail(const std::string &message) {
    fatal("'" + path_ + "': " + message + " (" +
          (base_ ? "header byte " : "byte ") + std::to_string(base_ + pos_) +
          ")");
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
  /// Any JSON value, skipped without recursion (nesting up to 64 levels).
  void skipValue() {
    int depth = 0;
    do {
      char c = peek();
      if (c == '"') {
        string();
      } else if (c == '{' || c == '[') {
        if (++depth > 64)
          fail("nested deeper than 64 levels");
        ++pos_;
      } else if (c == '}' || c == ']') {
        if (depth == 0)
          fail(std::string("unexpected '") + c + "'");
        --depth;
        ++pos_;
      } else if (c == ',' || c == ':') {
        if (depth == 0)
          fail(std::string("unexpected '") + c + "'");
        ++pos_;
      } else if (c == '\0') {
        fail("the text ends inside a value");
      } else {
        // A number, true, false or null.
        size_t start = pos_;
        while (pos_ < text_.size() &&
               (std::isalnum(static_cast<unsigned char>(text_[pos_])) ||
                text_[pos_] == '-' || text_[pos_] == '+' || text_[pos_] == '.'))
          ++pos_;
        if (pos_ == start)
          fail(std::string("unexpected '") + c + "'");
      }
    } while (depth > 0);
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

  const std::string &path_;
  const std::string &text_;
  size_t base_;
  size_t pos_ = 0;
};

/// The whole of the text file `path` (an index, a manifest), refused
/// before it is read when it is larger than `maxBytes`; errors name it.
inline std::string readBoundedText(const std::string &path, uint64_t maxBytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    fatal("cannot open '" + path + "'");
  uint64_t size = static_cast<uint64_t>(in.tellg());
  if (size > maxBytes)
    fatal("'" + path + "' is " + std::to_string(size) + " bytes; at most " +
          std::to_string(maxBytes >> 20) + " MiB is read");
  std::string text(size, '\0');
  in.seekg(0);
  if (!in.read(text.data(), static_cast<std::streamsize>(size)))
    fatal("cannot read '" + path + "'");
  return text;
}

} // namespace tprt::detail

#endif // TPRT_IO_JSONSUBSET_H
