//===- MappedTensorTest.cpp - tprt::Tensor::mapped ------------------------===//

#include "tprt/tprt.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <unistd.h>
#include <vector>

namespace {

/// A file of 3000 floats 0, 1, 2, ... after a 24-byte prefix (so the
/// mapping starts inside a page).
std::string writeFloats() {
  std::string path =
      ::testing::TempDir() + "mapped_" + std::to_string(::getpid()) + ".bin";
  std::ofstream out(path, std::ios::binary);
  out << std::string(24, 'x');
  for (int i = 0; i < 3000; ++i) {
    float f = static_cast<float>(i);
    out.write(reinterpret_cast<const char *>(&f), sizeof(f));
  }
  return path;
}

TEST(MappedTensor, HoldsTheFileBytesFromTheOffset) {
  std::string path = writeFloats();
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  // Elements 1000 to 2999 as [2, 1000]: the offset is inside the second
  // page of the file.
  tprt::Tensor t =
      tprt::Tensor::mapped(fd, 24 + 1000 * 4, tprt::DType::F32, {2, 1000});
  ::close(fd); // the mapping outlives the descriptor
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.shape(), (std::vector<int64_t>{2, 1000}));
  EXPECT_EQ(t.f32()[0], 1000.0f);
  EXPECT_EQ(t.f32()[1999], 2999.0f);
  std::remove(path.c_str());
}

TEST(MappedTensor, AWriteStaysInTheProcess) {
  std::string path = writeFloats();
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  tprt::Tensor t = tprt::Tensor::mapped(fd, 24, tprt::DType::F32, {3000});
  ::close(fd);
  ASSERT_TRUE(t.defined());
  t.f32()[5] = -1.0f; // private: copied on write, the file keeps 5
  EXPECT_EQ(t.f32()[5], -1.0f);
  std::ifstream in(path, std::ios::binary);
  in.seekg(24 + 5 * 4);
  float f = 0;
  in.read(reinterpret_cast<char *>(&f), sizeof(f));
  EXPECT_EQ(f, 5.0f);
  std::remove(path.c_str());
}

TEST(MappedTensor, AFileThatCannotBeMappedGivesNoTensor) {
  // A directory's descriptor cannot be mapped: the caller falls back to
  // reading.
  int fd = ::open(::testing::TempDir().c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(tprt::Tensor::mapped(fd, 0, tprt::DType::F32, {4}).defined());
  ::close(fd);
}

} // namespace
