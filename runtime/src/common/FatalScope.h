//===- FatalScope.h - tprt::fatal as an exception, for a while -*- C++ -*-===//
//
// While a ThrowingFatal lives on a thread, tprt::fatal on that thread throws
// FatalError instead of stopping the program. A CUDA graph capture runs the
// forward under one: a call that cannot be captured (a copy from pageable
// host memory, a synchronization) makes its CUDA call fail, and the capture
// ends with the message and runs eagerly instead (cuda/graphs.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_COMMON_FATALSCOPE_H
#define TPRT_COMMON_FATALSCOPE_H

#include <stdexcept>
#include <string>

namespace tprt {

struct FatalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ThrowingFatal {
public:
  ThrowingFatal() { ++depth(); }
  ~ThrowingFatal() { --depth(); }
  ThrowingFatal(const ThrowingFatal &) = delete;
  ThrowingFatal &operator=(const ThrowingFatal &) = delete;

  /// Whether fatal throws on this thread.
  static bool active() { return depth() > 0; }

private:
  static int &depth() {
    static thread_local int scopes = 0;
    return scopes;
  }
};

} // namespace tprt

#endif // TPRT_COMMON_FATALSCOPE_H
