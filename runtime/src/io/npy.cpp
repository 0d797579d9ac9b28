//===- npy.cpp - NumPy .npy files (format version 1/2) ---------------------===//

#include "tprt/tprt.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tprt {

Tensor readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fatal("cannot open '" + path + "'");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    fatal("'" + path + "' is not a .npy file");
  uint32_t headerLen = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char *>(b), 2);
    headerLen = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    in.read(reinterpret_cast<char *>(b), 4);
    headerLen = b[0] | (b[1] << 8) | (b[2] << 16) | (uint32_t(b[3]) << 24);
  }
  std::string header(headerLen, '\0');
  if (!in.read(header.data(), headerLen))
    fatal("'" + path + "': truncated header");
  auto field = [&](const char *key) {
    size_t pos = header.find(key);
    if (pos == std::string::npos)
      fatal("'" + path + "': header has no " + key);
    return pos + std::strlen(key);
  };
  size_t d = header.find('\'', field("'descr':")) + 1;
  std::string descr = header.substr(d, header.find('\'', d) - d);
  if (header.find("True", field("'fortran_order':")) <
      header.find(',', field("'fortran_order':")))
    fatal("'" + path + "': Fortran order is not supported");
  size_t s = header.find('(', field("'shape':")) + 1;
  std::string dims = header.substr(s, header.find(')', s) - s);
  std::vector<int64_t> shape;
  std::stringstream ss(dims);
  std::string item;
  while (std::getline(ss, item, ','))
    if (item.find_first_not_of(" ") != std::string::npos)
      shape.push_back(std::stoll(item));
  DType dtype;
  if (descr == "<f4")
    dtype = DType::F32;
  else if (descr == "<f2")
    dtype = DType::F16;
  else if (descr == "<i8")
    dtype = DType::I64;
  else
    fatal("'" + path + "': unsupported dtype '" + descr +
          "' (float32, float16 or int64)");
  Tensor t(dtype, shape);
  if (!in.read(static_cast<char *>(t.raw()), t.bytes()))
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
                       "', 'fortran_order': False, 'shape': (" + shape +
                       "), }";
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
