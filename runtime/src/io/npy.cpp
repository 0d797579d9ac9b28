//===- npy.cpp - NumPy .npy files (format versions 1 to 3) ----------------===//

#include "tprt/tprt.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace tprt {

namespace {

/// The header of a .npy file: a Python dict literal with 'descr',
/// 'fortran_order' and 'shape'. Parsed strictly: anything else is an error
/// message, never an exception or a guess. Every step returns false after
/// setting `error`.
class NpyHeader {
public:
  NpyHeader(const std::string &text, std::string &error)
      : text(text), error(error) {}

  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;

  bool parse() {
    if (!expect('{'))
      return false;
    while (true) {
      char c;
      if (!peek(c))
        return false;
      if (c == '}')
        break;
      std::string key;
      if (!quoted(key) || !expect(':'))
        return false;
      bool ok = key == "descr"           ? quoted(descr)
                : key == "fortran_order" ? boolean(fortranOrder)
                : key == "shape"         ? shapeTuple()
                                 : fail("unknown header key '" + key + "'");
      if (!ok || !peek(c))
        return false;
      if (c == ',')
        ++pos;
    }
    return !descr.empty() || fail("header has no 'descr'");
  }

private:
  bool fail(const std::string &what) {
    error = what;
    return false;
  }
  /// The next non-space character, not consumed.
  bool peek(char &c) {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n'))
      ++pos;
    if (pos >= text.size())
      return fail("truncated header");
    c = text[pos];
    return true;
  }
  bool expect(char want) {
    char c;
    if (!peek(c))
      return false;
    if (c != want)
      return fail(std::string("malformed header: expected '") + want +
                  "' at byte " + std::to_string(pos));
    ++pos;
    return true;
  }
  bool quoted(std::string &out) {
    char q;
    if (!peek(q))
      return false;
    if (q != '\'' && q != '"')
      return fail("malformed header: expected a string at byte " +
                  std::to_string(pos));
    size_t end = text.find(q, ++pos);
    if (end == std::string::npos)
      return fail("malformed header: unterminated string");
    out = text.substr(pos, end - pos);
    pos = end + 1;
    return true;
  }
  bool boolean(bool &out) {
    char c;
    if (!peek(c))
      return false;
    for (const char *word : {"True", "False"})
      if (text.compare(pos, std::strlen(word), word) == 0) {
        pos += std::strlen(word);
        out = word[0] == 'T';
        return true;
      }
    return fail("malformed header: fortran_order is neither True nor False");
  }
  /// (d0, d1, ...) of non-negative integers, each below 2^59.
  bool shapeTuple() {
    if (!expect('('))
      return false;
    while (true) {
      char c;
      if (!peek(c))
        return false;
      if (c == ')') {
        ++pos;
        return true;
      }
      int64_t d = 0;
      size_t start = pos;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        if (d > (int64_t(1) << 58))
          return fail("shape dimension too large");
        d = d * 10 + (text[pos++] - '0');
      }
      if (pos == start)
        return fail("malformed shape: expected a non-negative integer at "
                    "byte " +
                    std::to_string(pos));
      shape.push_back(d);
      if (!peek(c))
        return false;
      if (c == ',')
        ++pos;
      else if (c != ')')
        return fail("malformed shape at byte " + std::to_string(pos));
    }
  }

  const std::string &text;
  std::string &error;
  size_t pos = 0;
};

} // namespace

bool parseNpyPrefix(const char *data, size_t size, uint64_t fileSize,
                    NpyLayout &layout, std::string &error) {
  if (size < 10 || fileSize < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0) {
    error = "not a .npy file";
    return false;
  }
  int version = static_cast<unsigned char>(data[6]);
  if (version < 1 || version > 3) {
    error = "unsupported .npy version " + std::to_string(version);
    return false;
  }
  size_t lenBytes = version == 1 ? 2 : 4;
  if (size < 8 + lenBytes) {
    error = "truncated header";
    return false;
  }
  const unsigned char *b = reinterpret_cast<const unsigned char *>(data + 8);
  uint64_t headerLen = b[0] | (b[1] << 8);
  if (lenBytes == 4)
    headerLen |= (uint64_t(b[2]) << 16) | (uint64_t(b[3]) << 24);
  uint64_t dataStart = 8 + lenBytes + headerLen;
  // Checked against the file before anything is allocated.
  if (headerLen > kMaxNpyHeader || dataStart > fileSize) {
    error = "header length " + std::to_string(headerLen) +
            " runs past the end of the file (" + std::to_string(fileSize) +
            " bytes)";
    return false;
  }
  if (dataStart > size) {
    error = "truncated header";
    return false;
  }
  std::string text(data + 8 + lenBytes, headerLen);
  NpyHeader header(text, error);
  if (!header.parse())
    return false;
  if (header.fortranOrder) {
    error = "Fortran order is not supported";
    return false;
  }
  if (header.descr == "<f4")
    layout.dtype = DType::F32;
  else if (header.descr == "<f2")
    layout.dtype = DType::F16;
  else if (header.descr == "<i8")
    layout.dtype = DType::I64;
  else if (header.descr == "<i4") {
    layout.dtype = DType::I64;
    layout.int32 = true;
  } else {
    error = "unsupported dtype '" + header.descr +
            "' (float32, float16, int32 or int64)";
    return false;
  }
  uint64_t bytes = layout.int32 ? 4 : dtypeSize(layout.dtype),
           available = fileSize - dataStart;
  bool overflow = false;
  for (int64_t d : header.shape)
    overflow |= __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  if (overflow) {
    error = "the shape's byte count overflows 64 bits";
    return false;
  }
  if (bytes != available) {
    error = "the shape needs " + std::to_string(bytes) +
            " data bytes but the file holds " + std::to_string(available);
    return false;
  }
  layout.shape = header.shape;
  layout.dataOffset = dataStart;
  layout.dataBytes = bytes;
  return true;
}

Tensor readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    fatal("cannot open '" + path + "'");
  uint64_t fileSize = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  std::string prefix(std::min<uint64_t>(fileSize, 12 + kMaxNpyHeader), '\0');
  if (!in.read(prefix.data(), prefix.size()))
    fatal("cannot read '" + path + "'");
  NpyLayout layout;
  std::string error;
  if (!parseNpyPrefix(prefix.data(), prefix.size(), fileSize, layout, error))
    fatal(error == "not a .npy file" ? "'" + path + "' is not a .npy file"
                                     : "'" + path + "': " + error);
  Tensor t = Tensor::uninitialized(layout.dtype, layout.shape);
  in.seekg(layout.dataOffset);
  if (layout.int32) {
    std::vector<int32_t> narrow(t.numel());
    if (!in.read(reinterpret_cast<char *>(narrow.data()), layout.dataBytes))
      fatal("'" + path + "': truncated data");
    std::copy(narrow.begin(), narrow.end(), t.i64());
    return t;
  }
  if (!in.read(static_cast<char *>(t.raw()), layout.dataBytes))
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
