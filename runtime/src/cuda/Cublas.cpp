//===- Cublas.cpp - cuBLAS, opened when a GPU program starts --------------===//

#include "Cublas.h"

#include "OpenLibrary.h"
#include "Runtime.h"

#include <dlfcn.h>
#include <string>

namespace tprt {
namespace cuda {

namespace {

#define TPRT_STRINGIFY_EXPANDED(x) TPRT_STRINGIFY(x)
#define TPRT_STRINGIFY(x) #x

constexpr const char *kLibrary =
    "libcublas.so." TPRT_STRINGIFY_EXPANDED(CUBLAS_VER_MAJOR);

bool &loaded() {
  static bool flag = false;
  return flag;
}

/// `name` from the toolkit directory the runtime was built with, then the
/// loader's path.
void *openFromToolkit(const char *name, std::string &tried) {
#ifdef TPRT_CUBLAS_DIR
  const char *dir = TPRT_CUBLAS_DIR;
#else
  const char *dir = nullptr;
#endif
  return openLibrary(dir, name, tried);
}

void *open() {
  std::string tried;
  if (void *handle = openFromToolkit(kLibrary, tried))
    return handle;
  fatal(std::string("cannot open cuBLAS (") + kLibrary + "): " + tried);
}

Cublas load() {
  void *handle = open();
  auto symbol = [&](const char *name) {
    void *f = dlsym(handle, name);
    if (!f)
      fatal(std::string(kLibrary) + " has no function " + name);
    return f;
  };
  Cublas api;
  // The exported names, after cublas_v2.h's macros.
#define TPRT_CUBLAS_LOAD(field, function)                                      \
  api.field = reinterpret_cast<decltype(api.field)>(                           \
      symbol(TPRT_STRINGIFY_EXPANDED(function)))
  TPRT_CUBLAS_LOAD(create, cublasCreate);
  TPRT_CUBLAS_LOAD(setStream, cublasSetStream);
  TPRT_CUBLAS_LOAD(setMathMode, cublasSetMathMode);
  TPRT_CUBLAS_LOAD(statusName, cublasGetStatusName);
  TPRT_CUBLAS_LOAD(statusString, cublasGetStatusString);
  TPRT_CUBLAS_LOAD(sgemmStridedBatched, cublasSgemmStridedBatched_64);
  TPRT_CUBLAS_LOAD(gemmStridedBatchedEx, cublasGemmStridedBatchedEx_64);
#undef TPRT_CUBLAS_LOAD
  loaded() = true;
  return api;
}

} // namespace

const Cublas &cublas() {
  static const Cublas api = load();
  return api;
}

const char *cublasLibraryName() { return kLibrary; }

void *openCublasFamily(const char *base, std::string &name,
                       std::string &tried) {
  name = std::string(base) + ".so." TPRT_STRINGIFY_EXPANDED(CUBLAS_VER_MAJOR);
  return openFromToolkit(name.c_str(), tried);
}
bool cublasLoaded() { return loaded(); }

} // namespace cuda
} // namespace tprt
