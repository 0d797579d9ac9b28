//===- Fingerprint.h - what identifies a weights file -----------*- C++ -*-===//
//
// Header-only and dependency-free: the compiler (tp-to-emitc) records the
// fingerprint of every weights file a program reads, and the executable
// recomputes it at start-up, with this one function, so that a program run
// with another model's weights stops instead of computing garbage.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_FINGERPRINT_H
#define TPRT_FINGERPRINT_H

#include <cstdint>
#include <cstdio>

namespace tprt {

/// FNV-1a over the file's size and 64 blocks of 64 bytes spread evenly over
/// it: cheap on a 100 GB file, and different for any other model. 0 when
/// the file cannot be read.
inline uint64_t sampledFileHash(const char *path, uint64_t size) {
  FILE *f = std::fopen(path, "rb");
  if (!f)
    return 0;
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](unsigned char byte) {
    h ^= byte;
    h *= 1099511628211ull;
  };
  for (int i = 0; i < 8; ++i)
    mix(static_cast<unsigned char>(size >> (8 * i)));
  constexpr uint64_t kBlocks = 64, kBlock = 64;
  unsigned char buffer[kBlock];
  for (uint64_t b = 0; b < kBlocks; ++b) {
    uint64_t offset = size > kBlock ? (size - kBlock) / (kBlocks - 1) * b : 0;
    if (std::fseek(f, static_cast<long>(offset), SEEK_SET) != 0)
      break;
    size_t n = std::fread(buffer, 1, kBlock, f);
    for (size_t i = 0; i < n; ++i)
      mix(buffer[i]);
  }
  std::fclose(f);
  return h;
}

/// A weights file a program was compiled against.
struct WeightFile {
  /// As the parameters name it (relative to the model's directory, or
  /// absolute for an adapter); null ends a table.
  const char *file;
  uint64_t size;
  uint64_t hash;
};

/// A parameter a program reads: its FQN and global shape (a checkpoint
/// given to --weights must hold it); null ends a table.
struct ParamSpec {
  const char *fqn;
  int rank;
  int64_t shape[8];
};

} // namespace tprt

#endif // TPRT_FINGERPRINT_H
