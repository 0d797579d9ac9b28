//===- CublasLoadTest.cpp - cuBLAS is opened only by GPU programs ---------===//
//
// A runtime built with CUDA must not cost CPU programs cuBLAS's memory:
// CPU work leaves it unopened (the process maps no libcublas at all), and
// opening it (and cuBLASLt) finds every function the backend calls.
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"
#include "cuda/Cublas.h"
#include "cuda/CublasLt.h"

#include <gtest/gtest.h>

using namespace tprt;
using namespace tprt::test;

namespace {

bool mapsCublas() { return mapsLibrary("libcublas"); }

TEST(CublasLoad, OnlyTheGpuBackendOpensCublas) {
  Tensor x = randomTensor({2, 3, 8}, 1), w = randomTensor({4, 8}, 2);
  Tensor y = linear(ctx(), x, w, LinearForm::Flat);
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_FALSE(cuda::cublasLoaded());
  EXPECT_FALSE(mapsCublas()) << "a CPU program mapped libcublas";

  const cuda::Cublas &api = cuda::cublas();
  EXPECT_TRUE(cuda::cublasLoaded());
  EXPECT_TRUE(mapsCublas()) << cuda::cublasLibraryName();
  EXPECT_NE(api.create, nullptr);
  EXPECT_NE(api.setStream, nullptr);
  EXPECT_NE(api.setMathMode, nullptr);
  EXPECT_NE(api.statusName, nullptr);
  EXPECT_NE(api.statusString, nullptr);
  EXPECT_NE(api.sgemmStridedBatched, nullptr);
  EXPECT_NE(api.gemmStridedBatchedEx, nullptr);
  // A function of the library, called without a GPU.
  EXPECT_STREQ(api.statusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  // cuBLASLt, for the bias epilogue, with every function it is called by.
  EXPECT_TRUE(cuda::cublasLtAvailable());
}

} // namespace
