//===- CheckpointPlanTest.cpp - the files and writers of a sharded save ---===//

#include "train/CheckpointPlan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <numeric>
#include <unistd.h>

namespace {

using tprt::CheckpointTensor;
using tprt::DType;

CheckpointTensor tensor(std::string name, std::vector<int64_t> shape,
                        int dim = -1, int64_t shards = 1,
                        int64_t replicas = 1) {
  return {std::move(name), DType::F32, std::move(shape), dim, shards, replicas};
}

TEST(CheckpointFiles, FillsFilesUpToTheLimitAndNamesThemAsTransformers) {
  // 400 + 400 bytes fill 1000 no further; the 2000-byte tensor is alone.
  std::vector<CheckpointTensor> t = {tensor("a", {100}), tensor("b", {100}),
                                     tensor("c", {500}), tensor("d", {10})};
  tprt::CheckpointFiles files = tprt::planCheckpointFiles(t, 1000, "model", "");
  ASSERT_EQ(files.names.size(), 3u);
  EXPECT_EQ(files.names[0], "model-00001-of-00003.safetensors");
  EXPECT_EQ(files.names[2], "model-00003-of-00003.safetensors");
  EXPECT_EQ(files.placements[0].file, 0u);
  EXPECT_EQ(files.placements[1].file, 0u);
  EXPECT_EQ(files.placements[2].file, 1u);
  EXPECT_EQ(files.placements[3].file, 2u);
  // The second tensor follows the first; each file is its header and data.
  EXPECT_EQ(files.placements[1].offset, files.placements[0].offset + 400);
  EXPECT_EQ(files.sizes[0], files.headers[0].size() + 800);
  EXPECT_EQ(files.placements[0].offset, files.headers[0].size());
  // The data starts at a multiple of 64 bytes (mappable in place).
  EXPECT_EQ(files.headers[0].size() % 64, 0u);
}

TEST(CheckpointFiles, OneFileIsNamedAsTransformersNamesIt) {
  std::vector<CheckpointTensor> t = {tensor("a", {10}), tensor("b", {10})};
  tprt::CheckpointFiles files =
      tprt::planCheckpointFiles(t, 1000, "optimizer", "");
  ASSERT_EQ(files.names.size(), 1u);
  EXPECT_EQ(files.names[0], "optimizer.safetensors");
}

TEST(CheckpointFiles, OneNamedFileHoldsEverything) {
  std::vector<CheckpointTensor> t = {tensor("a", {1000}), tensor("b", {1000})};
  tprt::CheckpointFiles files =
      tprt::planCheckpointFiles(t, 100, "", "adapter_model.safetensors");
  ASSERT_EQ(files.names.size(), 1u);
  EXPECT_EQ(files.names[0], "adapter_model.safetensors");
}

TEST(CheckpointFiles, HeadersAreWhatTheSafetensorsReaderReads) {
  std::vector<CheckpointTensor> t = {tensor("w", {4, 6}, 1, 2),
                                     tensor("quote\"d", {3})};
  t[1].dtype = DType::BF16;
  tprt::CheckpointFiles files = tprt::planCheckpointFiles(t, 1 << 20, "m", "");
  std::string path = ::testing::TempDir() + "plan_" +
                     std::to_string(::getpid()) + ".safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    out << files.headers[0];
    out << std::string(files.sizes[0] - files.headers[0].size(), '\0');
  }
  auto index = tprt::readSafetensorsIndex(path);
  std::remove(path.c_str());
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index["w"].shape, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(index["w"].offset, files.placements[0].offset);
  EXPECT_EQ(index["quote\"d"].dtype, DType::BF16);
  EXPECT_EQ(index["quote\"d"].offset, files.placements[1].offset);
  EXPECT_EQ(index["quote\"d"].end - index["quote\"d"].begin, 6u);
}

TEST(CheckpointWriters, SpreadsReplicatedTensorsOverTheRanksByBytes) {
  // Four replicated tensors of 400, 300, 200, 100 bytes over 2 x 2 ranks:
  // largest first, each to the rank with the least so far.
  std::vector<CheckpointTensor> t = {tensor("a", {25}), tensor("b", {100}),
                                     tensor("c", {75}), tensor("d", {50})};
  tprt::CheckpointWriters w = tprt::assignCheckpointWriters(t, 2, 2);
  EXPECT_EQ(w.rank[1], 0); // 400 bytes
  EXPECT_EQ(w.rank[2], 1); // 300
  EXPECT_EQ(w.rank[3], 2); // 200
  EXPECT_EQ(w.rank[0], 3); // 100
}

TEST(CheckpointWriters, AlternatesDataParallelGroupsForSplitTensors) {
  // Two split tensors of equal size over dp = 2: one group each; a third
  // goes to the group with less (the one that got the smaller).
  std::vector<CheckpointTensor> t = {tensor("a", {8, 8}, 0, 2),
                                     tensor("b", {8, 8}, 1, 2),
                                     tensor("c", {4, 8}, 0, 2)};
  tprt::CheckpointWriters w = tprt::assignCheckpointWriters(t, 2, 2);
  EXPECT_NE(w.group[0], w.group[1]);
  // Blocks held by two ranks each (KV heads fewer than the ranks): only
  // the first of each pair writes; its group is still chosen by load.
  std::vector<CheckpointTensor> kv = {tensor("k", {2, 8}, 0, 2, 2)};
  tprt::CheckpointWriters wk = tprt::assignCheckpointWriters(kv, 4, 1);
  EXPECT_EQ(wk.group[0], 0);
}

TEST(CheckpointWriters, EveryRankOfAGridWritesAboutItsShare) {
  // 64 replicated tensors of 1..64 KiB over 8 ranks: no rank writes more
  // than its share by more than the largest tensor.
  std::vector<CheckpointTensor> t;
  for (int i = 1; i <= 64; ++i)
    t.push_back(tensor("t" + std::to_string(i), {i * 256}));
  tprt::CheckpointWriters w = tprt::assignCheckpointWriters(t, 4, 2);
  std::vector<uint64_t> load(8, 0);
  uint64_t total = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    load[w.rank[i]] += t[i].bytes();
    total += t[i].bytes();
  }
  for (uint64_t l : load)
    EXPECT_LE(l, total / 8 + 64 * 1024);
}

} // namespace
