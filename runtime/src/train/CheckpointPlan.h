//===- CheckpointPlan.h - the files of a sharded save -----------*- C++ -*-===//
//
// What every rank computes alike before `--save` writes anything: the shard
// files (HF's model-0000k-of-0000n.safetensors), their headers, where each
// tensor goes in them, and which ranks write each tensor.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_TRAIN_CHECKPOINTPLAN_H
#define TPRT_TRAIN_CHECKPOINTPLAN_H

#include "tprt/tprt.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tprt {

/// A tensor of a checkpoint: its name in the files, its type, its global shape
/// and how the ranks hold it.
struct CheckpointTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  int shardDim;
  int64_t shards, replicas;
  /// Each rank's own copy (a plan's exclude): rank 0's is written.
  bool owned = false;
  /// This rank's block of it (an uneven split's padding is not written;
  /// the first of the ranks holding a block writes it).
  ParamBlock block;
  /// A rank's local tensor is the run of its block's elements (row-major)
  /// from here on, not the whole block (optimizer state under --zero: each
  /// data-parallel rank writes its own run); -1: the whole block.
  int64_t runBegin = -1;

  uint64_t bytes() const {
    uint64_t n = dtypeSize(dtype);
    for (int64_t d : shape)
      n *= static_cast<uint64_t>(d);
    return n;
  }
};

/// Where a tensor is: its file and the offset of its first byte.
struct FilePlacement {
  size_t file = 0;
  uint64_t offset = 0;
};

/// The files of one save and where each tensor goes in them.
struct CheckpointFiles {
  std::vector<std::string> names;
  std::vector<std::string> headers; ///< the 8-byte size, then the JSON
  std::vector<uint64_t> sizes;
  std::vector<FilePlacement> placements; ///< by tensor
};

/// Which ranks write each tensor: for a split one, the data-parallel group
/// whose block holders write it (the first rank of each block's
/// replicas); for a replicated one, the one rank. Greedy by bytes, largest
/// first, the same on every rank.
struct CheckpointWriters {
  std::vector<int> group; ///< split tensors
  std::vector<int> rank;  ///< replicated tensors
};

/// `tensors` in files of at most `maxBytes` of data each (a larger tensor
/// gets a file of its own), named PREFIX-0000k-of-0000n.safetensors, or
/// PREFIX.safetensors when one file holds them all (as transformers names
/// them), or one file `single` when it is given.
CheckpointFiles
planCheckpointFiles(const std::vector<CheckpointTensor> &tensors,
                    uint64_t maxBytes, const std::string &prefix,
                    const std::string &single);

/// Greedy by bytes, largest tensor first, the same on every rank of a
/// dp x tp grid: a replicated tensor goes to the rank that has the fewest
/// bytes to write so far, a split one to the data-parallel group whose
/// block writers have the fewest.
CheckpointWriters
assignCheckpointWriters(const std::vector<CheckpointTensor> &tensors, int tp,
                        int dp);

/// A shape as JSON: [d0,d1,...].
std::string jsonShape(const std::vector<int64_t> &shape);
/// A string as JSON, quoted and escaped.
std::string jsonString(const std::string &s);

} // namespace tprt

#endif // TPRT_TRAIN_CHECKPOINTPLAN_H
