//===- OpenLibrary.h - a shared library the runtime opens itself -*- C++
//-*-===//
//
// cuBLAS and MKL are opened with dlopen when first used rather than linked
// (src/cuda/Cublas.h, src/cpu/Mkl.h): from the directory the build knew,
// then wherever the loader finds them.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_OPENLIBRARY_H
#define TPRT_OPENLIBRARY_H

#include <dlfcn.h>
#include <string>

namespace tprt {

/// `name` from `dir` (when not null), else from the loader's path; null
/// when neither opens, with `tried` holding the loader's reasons.
inline void *openLibrary(const char *dir, const char *name,
                         std::string &tried) {
  if (dir) {
    std::string path = std::string(dir) + "/" + name;
    if (void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))
      return handle;
    tried = std::string(dlerror()) + "; ";
  }
  if (void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL))
    return handle;
  tried += dlerror();
  return nullptr;
}

} // namespace tprt

#endif // TPRT_OPENLIBRARY_H
