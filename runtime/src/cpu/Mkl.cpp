//===- Mkl.cpp - Intel MKL's sgemm, opened when the products choose it ----===//

#include "Mkl.h"

#include "OpenLibrary.h"

#include <dlfcn.h>

namespace tprt::cpu {

namespace {

constexpr const char *kLibrary = "libmkl_rt.so.3";
/// mkl_service.h's codes for MKL_Set_Interface_Layer and
/// MKL_Set_Threading_Layer.
constexpr int kInterfaceLp64 = 0, kThreadingGnu = 3;

void *open(std::string &tried) {
#ifdef TPRT_MKL_DIR
  return openLibrary(TPRT_MKL_DIR, kLibrary, tried);
#else
  return openLibrary(nullptr, kLibrary, tried);
#endif
}

struct Loaded {
  Mkl api{};
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded loaded;
  void *handle = open(loaded.why);
  if (!handle)
    return loaded;
  bool missing = false;
  auto symbol = [&](const char *name) {
    void *f = dlsym(handle, name);
    if (!f) {
      loaded.why += std::string(kLibrary) + " has no function " + name + "; ";
      missing = true;
    }
    return f;
  };
  Mkl &api = loaded.api;
  api.sgemm = reinterpret_cast<decltype(api.sgemm)>(symbol("cblas_sgemm"));
  api.sgemmPackGetSize = reinterpret_cast<decltype(api.sgemmPackGetSize)>(
      symbol("cblas_sgemm_pack_get_size"));
  api.sgemmPack =
      reinterpret_cast<decltype(api.sgemmPack)>(symbol("cblas_sgemm_pack"));
  api.sgemmCompute = reinterpret_cast<decltype(api.sgemmCompute)>(
      symbol("cblas_sgemm_compute"));
  api.setNumThreads = reinterpret_cast<decltype(api.setNumThreads)>(
      symbol("MKL_Set_Num_Threads"));
  auto setInterface =
      reinterpret_cast<int (*)(int)>(symbol("MKL_Set_Interface_Layer"));
  auto setThreading =
      reinterpret_cast<int (*)(int)>(symbol("MKL_Set_Threading_Layer"));
  auto versionString =
      reinterpret_cast<void (*)(char *, int)>(symbol("MKL_Get_Version_String"));
  if (missing)
    return loaded;
  // Before any other call: 32-bit integers, and the GNU OpenMP the
  // runtime's loops run on (not a second OpenMP runtime, Intel's).
  setInterface(kInterfaceLp64);
  setThreading(kThreadingGnu);
  char version[256] = {};
  versionString(version, sizeof(version) - 1);
  api.version = version;
  loaded.ok = true;
  return loaded;
}

} // namespace

const Mkl *mkl(std::string *why) {
  static const Loaded loaded = load();
  if (why)
    *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

} // namespace tprt::cpu
