//===- FuzzNpy.cpp - the runtime's .npy header parser ---------------------===//

#include "tprt/tprt.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tprt::NpyLayout layout;
  std::string error;
  tprt::parseNpyPrefix(reinterpret_cast<const char *>(data), size, size,
                       layout, error);
  return 0;
}
