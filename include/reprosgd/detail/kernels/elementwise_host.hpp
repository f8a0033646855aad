// SPDX-License-Identifier: BSD-3-Clause
/// @file Host row loops of the elementwise kernels that compilers do not vectorise on their own.
#pragma once

// The ReLU derivative step gin = gout * (y > 0 ? 1 : 0) is a compare, a select and a multiply; GCC
// keeps the scalar branch under its default -ftrapping-math, which made this pass 3% of a training
// step. Here the select is spelled as a bit mask on GCC/Clang vector extensions: y > 0 gives all
// ones in a lane exactly when the scalar condition holds (false for NaN and -0), the mask picks the
// bits of 1.0f or +0.0f, and the multiply is the same rounded product, so every lane gets the bits
// of the scalar expression. Host-only: never part of a device compilation pass.

#include <reprosgd/version.hpp>

#include <cstring>

#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__) && \
    !defined(__SYCL_DEVICE_ONLY__)
#define REPROSGD_IMPL_ELEMENTWISE_HOST 1
#else
#define REPROSGD_IMPL_ELEMENTWISE_HOST 0
#endif

#if REPROSGD_IMPL_ELEMENTWISE_HOST
REPROSGD_BEGIN_NAMESPACE
namespace detail::elementwise_host {

typedef float vfloat8 __attribute__((vector_size(8 * sizeof(float))));
typedef int vint8 __attribute__((vector_size(8 * sizeof(int))));

/// gi[j] = g[j] * (y[j] > 0.0f ? 1.0f : 0.0f) for j < n.
inline void relu_backward_row(const float* y, const float* g, float* gi, long n) {
  static_assert(sizeof(float) == sizeof(int));
  vint8 one_bits;
  for (int l = 0; l < 8; ++l) one_bits[l] = 0x3f800000;  // the bits of 1.0f
  long j = 0;
  for (; j + 8 <= n; j += 8) {
    vfloat8 yv, gv;
    std::memcpy(&yv, y + j, sizeof(yv));
    std::memcpy(&gv, g + j, sizeof(gv));
    const vint8 mask = yv > 0.0f;                                   // -1 where y > 0, else 0
    const vfloat8 d = reinterpret_cast<vfloat8>(mask & one_bits);  // 1.0f or +0.0f
    const vfloat8 r = gv * d;
    std::memcpy(gi + j, &r, sizeof(r));
  }
  for (; j < n; ++j) gi[j] = g[j] * (y[j] > 0.0f ? 1.0f : 0.0f);
}

}  // namespace detail::elementwise_host
REPROSGD_END_NAMESPACE
#endif
