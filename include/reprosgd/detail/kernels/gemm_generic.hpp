// SPDX-License-Identifier: BSD-3-Clause
/// @file Portable GEMM kernel over Kokkos Views (any execution space, CUDA included).
#pragma once

#include <reprosgd/version.hpp>

#include <Kokkos_Core.hpp>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// Which operands are transposed: C = op(A) * op(B).
enum class gemm_op { nn, tn, nt };

/// Element (i, p) of op(A) and (p, j) of op(B) for each operation.
template <gemm_op Op>
struct GemmAccess;
template <>
struct GemmAccess<gemm_op::nn> {
  template <class AV>
  KOKKOS_INLINE_FUNCTION static float a(const AV& v, int i, int p) { return v(i, p); }
  template <class BV>
  KOKKOS_INLINE_FUNCTION static float b(const BV& v, int p, int j) { return v(p, j); }
};
template <>
struct GemmAccess<gemm_op::tn> {
  template <class AV>
  KOKKOS_INLINE_FUNCTION static float a(const AV& v, int i, int p) { return v(p, i); }
  template <class BV>
  KOKKOS_INLINE_FUNCTION static float b(const BV& v, int p, int j) { return v(p, j); }
};
template <>
struct GemmAccess<gemm_op::nt> {
  template <class AV>
  KOKKOS_INLINE_FUNCTION static float a(const AV& v, int i, int p) { return v(i, p); }
  template <class BV>
  KOKKOS_INLINE_FUNCTION static float b(const BV& v, int p, int j) { return v(j, p); }
};

/// fma(a, b, acc): one rounding of the exact a*b + acc (IEEE fusedMultiplyAdd), the operation of
/// the host kernel's FMA instructions: correctly rounded everywhere (device intrinsic, hardware FMA
/// or glibc's fmaf), so every backend gives the same bits.
KOKKOS_INLINE_FUNCTION float fused_multiply_add(float a, float b, float acc) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return __fmaf_rn(a, b, acc);
#else
  return __builtin_fmaf(a, b, acc);
#endif
}

/// One work item computes a tile_m x tile_n register tile of C, each element one ascending-p chain
/// of the reference loop. Out-of-range rows/columns read zeros and are not stored.
template <gemm_op Op, class AV, class BV, class CV>
struct GemmTileFunctor {
  static constexpr int tile_m = 4;
  static constexpr int tile_n = 4;
  using access = GemmAccess<Op>;

  AV a_;
  BV b_;
  CV c_;
  int m_, n_, k_;
  const float* bias_;  ///< N floats added to each finished row, or null

  KOKKOS_INLINE_FUNCTION void operator()(const int ti, const int tj) const {
    const int i0 = ti * tile_m;
    const int j0 = tj * tile_n;
    float acc[tile_m][tile_n];
    for (int r = 0; r < tile_m; ++r)
      for (int c = 0; c < tile_n; ++c) acc[r][c] = 0.0f;
    for (int p = 0; p < k_; ++p) {
      float av[tile_m];
      float bv[tile_n];
      for (int r = 0; r < tile_m; ++r) av[r] = (i0 + r < m_) ? access::a(a_, i0 + r, p) : 0.0f;
      for (int c = 0; c < tile_n; ++c) bv[c] = (j0 + c < n_) ? access::b(b_, p, j0 + c) : 0.0f;
      for (int r = 0; r < tile_m; ++r)
        for (int c = 0; c < tile_n; ++c) acc[r][c] = fused_multiply_add(av[r], bv[c], acc[r][c]);
    }
    for (int r = 0; r < tile_m; ++r)
      for (int c = 0; c < tile_n; ++c)
        if (i0 + r < m_ && j0 + c < n_) c_(i0 + r, j0 + c) = bias_ ? acc[r][c] + bias_[j0 + c] : acc[r][c];
  }
};

/// C (m x n) = op(A) * op(B) with inner dimension k, on any execution space. Shapes are checked by
/// the caller. Asynchronous like any Kokkos kernel: fence the instance before reading C on the host.
template <gemm_op Op, class ExecSpace, class AV, class BV, class CV>
void gemm_generic(const ExecSpace& space, const AV& a, const BV& b, const CV& c, int m, int n, int k,
                  const float* bias = nullptr) {
  using functor = GemmTileFunctor<Op, AV, BV, CV>;
  if (m == 0 || n == 0) return;
  const int tiles_m = (m + functor::tile_m - 1) / functor::tile_m;
  const int tiles_n = (n + functor::tile_n - 1) / functor::tile_n;
  using policy = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<int>>;
  Kokkos::parallel_for("reprosgd::gemm(generic)", policy(space, {0, 0}, {tiles_m, tiles_n}),
                       functor{a, b, c, m, n, k, bias});
}

}  // namespace detail
REPROSGD_END_NAMESPACE
