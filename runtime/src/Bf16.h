//===- Bf16.h - bf16 elements as f32 and back ---------------------*- C++
//-*-===//
//
// Inline, branch-free: the conversions of whole tensors (Tensor::to) and the
// elementwise loops of a bf16 program (cpu/KernelUtils.h) vectorize with
// them. Rounding is to nearest even; NaNs stay NaNs (quiet).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_BF16_H
#define TPRT_BF16_H

#include <cstdint>
#include <cstring>

namespace tprt {

inline float bf16Load(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t bf16Store(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1)) >> 16;
  bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(nan ? (bits >> 16) | 0x40u : rounded);
}

} // namespace tprt

#endif // TPRT_BF16_H
