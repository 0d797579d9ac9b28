//===- cublaslt.cpp - cuBLASLt's GEMM with a fused bias epilogue ----------===//

#include "CublasLt.h"

#include "Cublas.h"
#include "Runtime.h"

#include <cublasLt.h>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace tprt {
namespace cuda {

namespace {

/// Workspace the heuristic may choose algorithms up to (split-K and the
/// larger Hopper kernels use some).
constexpr size_t kWorkspaceBytes = 32u << 20;

/// The cuBLASLt functions called here, looked up by name.
struct Api {
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtMatmulDescCreate) descCreate;
  decltype(&::cublasLtMatmulDescSetAttribute) descSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) layoutCreate;
  decltype(&::cublasLtMatmulPreferenceCreate) preferenceCreate;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preferenceSetAttribute;
  decltype(&::cublasLtMatmulPreferenceDestroy) preferenceDestroy;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&::cublasLtMatmul) matmul;
};

/// The library's functions, or null (said once on rank 0) when it or one
/// of them is missing.
const Api *api() {
  static std::unique_ptr<Api> loaded = []() -> std::unique_ptr<Api> {
    std::string library, tried;
    void *handle = openCublasFamily("libcublasLt", library, tried);
    if (!handle) {
      noteOnRank0("cannot open " + library + " (" + tried +
                  "): linears add their bias after the GEMM");
      return nullptr;
    }
    auto a = std::make_unique<Api>();
    bool complete = true;
    auto symbol = [&](auto &field, const char *name) {
      field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(
          dlsym(handle, name));
      if (!field && complete) {
        noteOnRank0(library + " has no function " + name +
                    ": linears add their bias after the GEMM");
        complete = false;
      }
    };
    symbol(a->create, "cublasLtCreate");
    symbol(a->descCreate, "cublasLtMatmulDescCreate");
    symbol(a->descSetAttribute, "cublasLtMatmulDescSetAttribute");
    symbol(a->layoutCreate, "cublasLtMatrixLayoutCreate");
    symbol(a->preferenceCreate, "cublasLtMatmulPreferenceCreate");
    symbol(a->preferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    symbol(a->preferenceDestroy, "cublasLtMatmulPreferenceDestroy");
    symbol(a->heuristic, "cublasLtMatmulAlgoGetHeuristic");
    symbol(a->matmul, "cublasLtMatmul");
    return complete ? std::move(a) : nullptr;
  }();
  return loaded.get();
}

/// One shape's matmul: its descriptors and algorithm (found: false when
/// cuBLASLt has none). Kept for the process, as cuDNN's graphs are.
struct Plan {
  bool found = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo;
};

struct State {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  std::shared_ptr<unsigned char[]> workspace;
  std::map<std::tuple<int64_t, int64_t, int64_t>, Plan> plans;
  int64_t runs = 0;
};

State &state() {
  static State s;
  return s;
}

/// The plan of [m, n, k], made on first use.
const Plan &planFor(const Api &lt, State &s, int64_t m, int64_t n, int64_t k) {
  auto key = std::make_tuple(m, n, k);
  auto it = s.plans.find(key);
  if (it != s.plans.end())
    return it->second;
  Plan &p = s.plans[key];
  const char *what = "cuBLASLt matmul with a bias";
  check(lt.descCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), what);
  cublasOperation_t transposed = CUBLAS_OP_T;
  check(lt.descSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transposed,
                            sizeof(transposed)),
        what);
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  check(lt.descSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                            sizeof(epilogue)),
        what);
  cudaDataType biasType = CUDA_R_16BF;
  check(lt.descSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                            &biasType, sizeof(biasType)),
        what);
  check(lt.layoutCreate(&p.a, CUDA_R_16BF, k, m, k), what);
  check(lt.layoutCreate(&p.b, CUDA_R_16BF, k, n, k), what);
  check(lt.layoutCreate(&p.d, CUDA_R_16BF, m, n, m), what);
  cublasLtMatmulPreference_t preference = nullptr;
  check(lt.preferenceCreate(&preference), what);
  size_t workspace = kWorkspaceBytes;
  check(lt.preferenceSetAttribute(preference,
                                  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                  &workspace, sizeof(workspace)),
        what);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = lt.heuristic(s.handle, p.desc, p.a, p.b, p.d, p.d,
                                       preference, 1, &result, &found);
  lt.preferenceDestroy(preference);
  p.found = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (p.found)
    p.algo = result.algo;
  return p;
}

} // namespace

bool gemmBiasBf16(int64_t m, int64_t n, int64_t k, const void *a, const void *b,
                  const void *bias, void *d) {
  const Api *lt = api();
  if (!lt)
    return false;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // The workspace is allocated outside any capture (a graph's allocation
  // would not outlive its launches).
  if (!s.workspace) {
    if (capturing(stream()))
      return false;
    check(lt->create(&s.handle), "cublasLtCreate");
    s.workspace = allocate(kWorkspaceBytes);
  }
  const Plan &p = planFor(*lt, s, m, n, k);
  if (!p.found)
    return false;
  check(lt->descSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                             sizeof(bias)),
        "cuBLASLt matmul with a bias");
  const float one = 1.0f, zero = 0.0f;
  check(lt->matmul(s.handle, p.desc, &one, a, p.a, b, p.b, &zero, d, p.d, d,
                   p.d, &p.algo, s.workspace.get(), kWorkspaceBytes, stream()),
        "cuBLASLt matmul with a bias");
  ++s.runs;
  return true;
}

bool cublasLtAvailable() { return api() != nullptr; }

int64_t cublasLtBiasRuns() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.runs;
}

} // namespace cuda
} // namespace tprt
