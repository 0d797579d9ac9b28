//===- npy.cpp - NumPy .npy files (format version 1/2)
//---------------------===//

#include "tprt/tprt.h"

#include <cstdio>
#include <cstring>
#include <fstream>

namespace tprt {

namespace {

/// The header of a .npy file: a Python dict literal with 'descr',
/// 'fortran_order' and 'shape'. Parsed strictly: anything else is an error
/// naming the file, never an exception or a guess.
class NpyHeader {
public:
  NpyHeader(const std::string &path, std::string text)
      : path(path), text(std::move(text)) {}

  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;

  void parse() {
    expect('{');
    while (true) {
      skipSpace();
      if (peek() == '}')
        break;
      std::string key = quoted();
      expect(':');
      if (key == "descr")
        descr = quoted();
      else if (key == "fortran_order")
        fortranOrder = boolean();
      else if (key == "shape")
        shapeTuple();
      else
        fail("unknown header key '" + key + "'");
      skipSpace();
      if (peek() == ',')
        ++pos;
    }
    if (descr.empty())
      fail("header has no 'descr'");
  }

private:
  [[noreturn]] void fail(const std::string &what) {
    fatal("'" + path + "': " + what);
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n'))
      ++pos;
  }
  char peek() {
    if (pos >= text.size())
      fail("truncated header");
    return text[pos];
  }
  void expect(char c) {
    skipSpace();
    if (peek() != c)
      fail(std::string("malformed header: expected '") + c + "' at byte " +
           std::to_string(pos));
    ++pos;
  }
  std::string quoted() {
    skipSpace();
    char q = peek();
    if (q != '\'' && q != '"')
      fail("malformed header: expected a string at byte " +
           std::to_string(pos));
    size_t end = text.find(q, ++pos);
    if (end == std::string::npos)
      fail("malformed header: unterminated string");
    std::string s = text.substr(pos, end - pos);
    pos = end + 1;
    return s;
  }
  bool boolean() {
    skipSpace();
    for (const char *word : {"True", "False"})
      if (text.compare(pos, std::strlen(word), word) == 0) {
        pos += std::strlen(word);
        return word[0] == 'T';
      }
    fail("malformed header: fortran_order is neither True nor False");
  }
  /// (d0, d1, ...) of non-negative integers, each below 2^62.
  void shapeTuple() {
    expect('(');
    while (true) {
      skipSpace();
      if (peek() == ')') {
        ++pos;
        return;
      }
      int64_t d = 0;
      size_t start = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        if (d > (int64_t(1) << 58))
          fail("shape dimension too large");
        d = d * 10 + (text[pos++] - '0');
      }
      if (pos == start)
        fail("malformed shape: expected a non-negative integer at byte " +
             std::to_string(pos));
      shape.push_back(d);
      skipSpace();
      if (peek() == ',')
        ++pos;
      else if (peek() != ')')
        fail("malformed shape at byte " + std::to_string(pos));
    }
  }

  const std::string &path;
  std::string text;
  size_t pos = 0;
};

} // namespace

Tensor readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    fatal("cannot open '" + path + "'");
  uint64_t fileSize = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  char magic[8];
  if (fileSize < 10 || !in.read(magic, 8) ||
      std::memcmp(magic, "\x93NUMPY", 6) != 0)
    fatal("'" + path + "' is not a .npy file");
  int version = static_cast<unsigned char>(magic[6]);
  if (version < 1 || version > 3)
    fatal("'" + path + "': unsupported .npy version " +
          std::to_string(version));
  unsigned char b[4] = {0, 0, 0, 0};
  size_t lenBytes = version == 1 ? 2 : 4;
  if (!in.read(reinterpret_cast<char *>(b), lenBytes))
    fatal("'" + path + "': truncated header");
  uint64_t headerLen =
      b[0] | (b[1] << 8) | (uint64_t(b[2]) << 16) | (uint64_t(b[3]) << 24);
  uint64_t dataStart = 8 + lenBytes + headerLen;
  // Checked against the file before anything is allocated.
  if (headerLen > (1u << 20) || dataStart > fileSize)
    fatal("'" + path + "': header length " + std::to_string(headerLen) +
          " runs past the end of the file (" + std::to_string(fileSize) +
          " bytes)");
  std::string text(headerLen, '\0');
  if (!in.read(text.data(), headerLen))
    fatal("'" + path + "': truncated header");
  NpyHeader header(path, std::move(text));
  header.parse();
  if (header.fortranOrder)
    fatal("'" + path + "': Fortran order is not supported");
  DType dtype;
  if (header.descr == "<f4")
    dtype = DType::F32;
  else if (header.descr == "<f2")
    dtype = DType::F16;
  else if (header.descr == "<i8")
    dtype = DType::I64;
  else
    fatal("'" + path + "': unsupported dtype '" + header.descr +
          "' (float32, float16 or int64)");
  uint64_t bytes = dtypeSize(dtype), available = fileSize - dataStart;
  bool overflow = false;
  for (int64_t d : header.shape)
    overflow |= __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  if (overflow)
    fatal("'" + path + "': the shape's byte count overflows 64 bits");
  if (bytes != available)
    fatal("'" + path + "': the shape needs " + std::to_string(bytes) +
          " data bytes but the file holds " + std::to_string(available));
  Tensor t = Tensor::uninitialized(dtype, header.shape);
  if (!in.read(static_cast<char *>(t.raw()), bytes))
    fatal("'" + path + "': truncated data");
  return t;
}

void writeNpy(const std::string &path, const Tensor &tensor) {
  const char *descr = tensor.dtype() == DType::F32   ? "<f4"
                      : tensor.dtype() == DType::F16 ? "<f2"
                      : tensor.dtype() == DType::I64 ? "<i8"
                                                     : nullptr;
  if (!descr)
    fatal("writeNpy: cannot write " + tensor.describe());
  // Python tuple syntax: "()", "(5,)", "(2, 3)".
  std::string shape;
  for (int i = 0; i < tensor.rank(); ++i)
    shape += (i ? ", " : "") + std::to_string(tensor.dim(i));
  if (tensor.rank() == 1)
    shape += ",";
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': (" + shape + "), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out)
    fatal("cannot write '" + path + "'");
  out.write("\x93NUMPY\x01\x00", 8);
  unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xff),
                          static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<char *>(len), 2);
  out << header;
  out.write(static_cast<const char *>(tensor.raw()), tensor.bytes());
  if (!out)
    fatal("write of '" + path + "' failed");
}

} // namespace tprt
