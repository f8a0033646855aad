// SPDX-License-Identifier: BSD-3-Clause
/// @file Deterministic float GEMM (A*B, A^T*B, A*B^T), bit-identical to the scalar loop everywhere.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/detail/kernels/gemm_device.hpp>
#include <reprosgd/detail/kernels/gemm_generic.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/error.hpp>

#include <Kokkos_Core.hpp>

#include <climits>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>

// The packed, register-blocked host kernel needs GCC/Clang vector extensions; it is never part of
// a device compilation pass. Elsewhere host spaces use the portable kernel (same bits, slower).
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDA_ARCH__) && \
    !defined(__HIP_DEVICE_COMPILE__) && !defined(__SYCL_DEVICE_ONLY__)
#define REPROSGD_IMPL_GEMM_HOST_KERNEL 1
#include <reprosgd/detail/kernels/gemm_host.hpp>
#else
#define REPROSGD_IMPL_GEMM_HOST_KERNEL 0
#endif

REPROSGD_BEGIN_NAMESPACE

/**
 * A rank-2 row-major (Kokkos::LayoutRight) View of float or const float: a GEMM operand.
 * Unmanaged views and LayoutRight subviews (row ranges, or row and column ranges, whose rows keep
 * the parent's stride) qualify.
 */
template <class V>
concept RowMajorMatrix = Kokkos::is_view<V>::value && (static_cast<int>(V::rank) == 2) &&
                         std::same_as<typename V::array_layout, Kokkos::LayoutRight> &&
                         std::same_as<typename V::non_const_value_type, float>;

/// A RowMajorMatrix whose elements can be written: a GEMM result.
template <class V>
concept MutableRowMajorMatrix = RowMajorMatrix<V> && std::same_as<typename V::value_type, float>;

namespace detail {

inline std::string shape_string(std::size_t rows, std::size_t cols) {
  return std::to_string(rows) + "x" + std::to_string(cols);
}

/// One past the last element a rank-1 or row-major rank-2 View touches, in elements from data().
/// (Not span(): for a column block of a row-major matrix, Kokkos's span() counts a whole row
/// stride for the last row, reaching past the block's last element.)
template <class V>
std::size_t touched_extent(const V& v) {
  if constexpr (static_cast<int>(V::rank) == 2) {
    if (v.extent(0) == 0 || v.extent(1) == 0) return 0;
    return (v.extent(0) - 1) * v.stride(0) + v.extent(1);
  } else {
    return v.extent(0) == 0 ? 0 : (v.extent(0) - 1) * v.stride(0) + 1;
  }
}

template <class X, class Y>
bool views_overlap(const X& x, const Y& y) {
  const std::size_t nx = touched_extent(x), ny = touched_extent(y);
  if (nx == 0 || ny == 0) return false;
  const auto x0 = reinterpret_cast<std::uintptr_t>(x.data());
  const auto y0 = reinterpret_cast<std::uintptr_t>(y.data());
  const auto x1 = x0 + nx * sizeof(float);
  const auto y1 = y0 + ny * sizeof(float);
  return x0 < y1 && y0 < x1;
}

/// The host-side checks of every GEMM entry point, done before any dispatch: inner dimensions,
/// the shape of C, index range, and that C does not alias an input.
template <gemm_op Op, class AV, class BV, class CV>
void check_gemm(const char* name, const AV& a, const BV& b, const CV& c, std::size_t m, std::size_t n,
                std::size_t k) {
  const std::string fn = std::string("reprosgd::") + name + ": ";
  const std::string as = shape_string(a.extent(0), a.extent(1));
  const std::string bs = shape_string(b.extent(0), b.extent(1));
  std::size_t k_b = 0;
  std::string product;
  if constexpr (Op == gemm_op::nn) {
    k_b = b.extent(0);
    if (k != k_b) throw config_error(fn + "A is " + as + " but B is " + bs + " (inner dimensions differ)");
    product = "A*B";
  } else if constexpr (Op == gemm_op::tn) {
    k_b = b.extent(0);
    if (k != k_b)
      throw config_error(fn + "A is " + as + " (A^T is " + shape_string(a.extent(1), a.extent(0)) +
                         ") but B is " + bs + " (inner dimensions differ)");
    product = "A^T*B";
  } else {
    k_b = b.extent(1);
    if (k != k_b)
      throw config_error(fn + "A is " + as + " but B is " + bs + " (B^T is " +
                         shape_string(b.extent(1), b.extent(0)) + "; inner dimensions differ)");
    product = "A*B^T";
  }
  if (c.extent(0) != m || c.extent(1) != n)
    throw config_error(fn + "C is " + shape_string(c.extent(0), c.extent(1)) + " but " + product + " is " +
                       shape_string(m, n));
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
    throw config_error(fn + "the product " + shape_string(m, n) + " with inner dimension " + std::to_string(k) +
                       " exceeds the supported index range (2^31-1 per dimension)");
  if (views_overlap(c, a)) throw config_error(fn + "C overlaps A (the result must not alias an input)");
  if (views_overlap(c, b)) throw config_error(fn + "C overlaps B (the result must not alias an input)");
}

#if REPROSGD_IMPL_GEMM_HOST_KERNEL
/// One league member (team of one thread) computes one tile of the plan in its scratch buffer.
/// Level-1 team scratch is kept by the host backends between launches, so packing buffers are
/// not reallocated per call.
template <class ExecSpace>
struct GemmHostTileFunctor {
  using member_type = typename Kokkos::TeamPolicy<ExecSpace>::member_type;
  gemm_host::Plan plan_;
  gemm_host::Operand a_;
  gemm_host::Operand b_;
  float* c_;
  std::ptrdiff_t ldc_;
  std::size_t scratch_bytes_;
  const float* bias_;

  void operator()(const member_type& member) const {
    auto* buffer = static_cast<float*>(member.team_scratch(1).get_shmem(scratch_bytes_));
    gemm_host::compute_tile(plan_, member.league_rank(), a_, b_, c_, ldc_, buffer, bias_);
  }
};

template <class ExecSpace>
void gemm_host_run(const ExecSpace& space, const gemm_host::Operand& a, const gemm_host::Operand& b, float* c,
                   std::ptrdiff_t ldc, int m, int n, int k, int plan_threads = 0, const float* bias = nullptr,
                   gemm_host::Isa isa = gemm_host::best_isa(),
                   long stream_min = gemm_host::stream_c_threshold()) {
  if (m == 0 || n == 0) return;
  // plan_threads, isa and stream_min (tests and benchmarks) plan the tiles for another thread count
  // than the instance's, for another kernel than the fastest this CPU runs, and streaming C
  // from another size than this CPU's threshold.
  const gemm_host::Plan plan =
      gemm_host::make_plan(isa, m, n, k, plan_threads > 0 ? plan_threads : concurrency(space), stream_min);
  const std::size_t bytes = plan.buffer_floats() * sizeof(float);
  using policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for("reprosgd::gemm(host)",
                       policy(space, plan.tiles(), 1).set_scratch_size(1, Kokkos::PerTeam(bytes)),
                       GemmHostTileFunctor<ExecSpace>{plan, a, b, c, ldc, bytes, bias});
}
#endif

template <gemm_op Op, class ExecSpace, class AV, class BV, class CV>
void gemm_dispatch(const char* name, const ExecSpace& space, const AV& a, const BV& b, const CV& c,
                   const float* bias = nullptr) {
  static_assert(Kokkos::SpaceAccessibility<ExecSpace, typename AV::memory_space>::accessible,
                "reprosgd::gemm: A's memory space is not accessible from the execution space");
  static_assert(Kokkos::SpaceAccessibility<ExecSpace, typename BV::memory_space>::accessible,
                "reprosgd::gemm: B's memory space is not accessible from the execution space");
  static_assert(Kokkos::SpaceAccessibility<ExecSpace, typename CV::memory_space>::accessible,
                "reprosgd::gemm: C's memory space is not accessible from the execution space");
  const std::size_t m = Op == gemm_op::tn ? a.extent(1) : a.extent(0);
  const std::size_t k = Op == gemm_op::tn ? a.extent(0) : a.extent(1);
  const std::size_t n = Op == gemm_op::nt ? b.extent(0) : b.extent(1);
  check_gemm<Op>(name, a, b, c, m, n, k);
#if REPROSGD_IMPL_GEMM_HOST_KERNEL
  if constexpr (is_host_space_v<ExecSpace>) {
    // Logical operands: op(A)(i, p) = data[i*rs + p*cs]; transposition swaps the strides. A
    // LayoutRight view (or subview) has unit column stride and row stride stride(0).
    const auto lda = static_cast<std::ptrdiff_t>(a.stride(0));
    const auto ldb = static_cast<std::ptrdiff_t>(b.stride(0));
    const gemm_host::Operand ao =
        Op == gemm_op::tn ? gemm_host::Operand{a.data(), 1, lda} : gemm_host::Operand{a.data(), lda, 1};
    const gemm_host::Operand bo =
        Op == gemm_op::nt ? gemm_host::Operand{b.data(), 1, ldb} : gemm_host::Operand{b.data(), ldb, 1};
    gemm_host_run(space, ao, bo, c.data(), static_cast<std::ptrdiff_t>(c.stride(0)), static_cast<int>(m),
                  static_cast<int>(n), static_cast<int>(k), 0, bias);
    return;
  }
#endif
  if constexpr (!is_host_space_v<ExecSpace>) {
    gemm_device<Op>(space, a, b, c, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), bias);
  } else {
    gemm_generic<Op>(space, a, b, c, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), bias);
  }
}

}  // namespace detail

/**
 * C = A * B for row-major float matrices: A is M x K, B is K x N, C is M x N (overwritten).
 *
 * @deterministic Every element is computed as `float acc = 0.0f; for p = 0..K-1 (ascending):
 * acc = fma(A(i,p), B(p,j), acc)` (an explicit fused multiply-add: one rounding per step) and stored
 * as is.
 * The bits do not depend on the thread count, the backend, the compiler or its flags. Not
 * collective. Asynchronous like a Kokkos kernel: fence `space` before reading C on the host.
 *
 * @tparam ExecSpace a Kokkos execution space that can access the Views' memory. Host spaces use a
 *         packed, register-blocked, vectorised kernel; device spaces a kernel of 64x64 blocks staged
 *         in shared memory, 4x4 outputs per thread (detail/kernels/gemm_device.hpp).
 * @param space the execution-space instance to run on
 * @param a M x K, @param b K x N, @param c M x N; C must not overlap A or B.
 * @throws reprosgd::config_error on mismatched shapes or aliasing, before any work is launched.
 *
 * **Example**:
 * @code
 * Kokkos::View<float**, Kokkos::LayoutRight> x("x", 128, 784), w("w", 784, 512), y("y", 128, 512);
 * reprosgd::gemm_nn(Kokkos::DefaultExecutionSpace(), x, w, y);   // y = x * w
 * @endcode
 */
template <class ExecSpace, RowMajorMatrix AV, RowMajorMatrix BV, MutableRowMajorMatrix CV>
  requires Kokkos::is_execution_space<ExecSpace>::value
void gemm_nn(const ExecSpace& space, const AV& a, const BV& b, const CV& c) {
  detail::gemm_dispatch<detail::gemm_op::nn>("gemm_nn", space, a, b, c);
}

/**
 * C = A * B + bias: gemm_nn followed by C(i,j) = C(i,j) + bias(j), in one pass (the forward step
 * of a Dense layer). A is M x K, B is K x N, bias has N elements, C is M x N (overwritten).
 *
 * @deterministic Every element is the gemm_nn sum `acc` (K ascending from +0.0f, one fused
 * multiply-add per step), then one rounded add `acc + bias(j)`: the bits of gemm_nn followed
 * by a separate bias pass, on every backend, thread count and compiler. Not collective.
 * Asynchronous: fence `space` before reading C on the host.
 * @throws reprosgd::config_error on mismatched shapes (bias must have N elements) or aliasing.
 */
template <class ExecSpace, RowMajorMatrix AV, RowMajorMatrix BV, class BiasV, MutableRowMajorMatrix CV>
  requires Kokkos::is_execution_space<ExecSpace>::value && Kokkos::is_view<BiasV>::value &&
           (static_cast<int>(BiasV::rank) == 1) && std::same_as<typename BiasV::non_const_value_type, float>
void gemm_nn_bias(const ExecSpace& space, const AV& a, const BV& b, const BiasV& bias, const CV& c) {
  static_assert(Kokkos::SpaceAccessibility<ExecSpace, typename BiasV::memory_space>::accessible,
                "reprosgd::gemm_nn_bias: the bias's memory space is not accessible from the execution space");
  if (bias.extent(0) != b.extent(1))
    throw config_error("reprosgd::gemm_nn_bias: B is " + detail::shape_string(b.extent(0), b.extent(1)) +
                       " but the bias has " + std::to_string(bias.extent(0)) + " elements");
  if (bias.extent(0) > 0 && bias.span() != bias.extent(0))
    throw config_error("reprosgd::gemm_nn_bias: the bias must be contiguous");
  if (detail::views_overlap(c, bias))
    throw config_error("reprosgd::gemm_nn_bias: C overlaps the bias (the result must not alias an input)");
  detail::gemm_dispatch<detail::gemm_op::nn>("gemm_nn_bias", space, a, b, c, bias.data());
}

/**
 * C = A^T * B: A is stored K x M, B is K x N, C is M x N (overwritten). The weight gradient
 * X^T * dY of a Dense layer. Same contract as gemm_nn: C(i,j) accumulates A(p,i) * B(p,j) for
 * p ascending from +0.0f, one rounded multiply and one rounded add per step.
 */
template <class ExecSpace, RowMajorMatrix AV, RowMajorMatrix BV, MutableRowMajorMatrix CV>
  requires Kokkos::is_execution_space<ExecSpace>::value
void gemm_tn(const ExecSpace& space, const AV& a, const BV& b, const CV& c) {
  detail::gemm_dispatch<detail::gemm_op::tn>("gemm_tn", space, a, b, c);
}

/**
 * C = A * B^T: A is M x K, B is stored N x K, C is M x N (overwritten). The input gradient
 * dY * W^T of a Dense layer whose weights are stored out x in. Same contract as gemm_nn: C(i,j)
 * accumulates A(i,p) * B(j,p) for p ascending from +0.0f.
 */
template <class ExecSpace, RowMajorMatrix AV, RowMajorMatrix BV, MutableRowMajorMatrix CV>
  requires Kokkos::is_execution_space<ExecSpace>::value
void gemm_nt(const ExecSpace& space, const AV& a, const BV& b, const CV& c) {
  detail::gemm_dispatch<detail::gemm_op::nt>("gemm_nt", space, a, b, c);
}

/// gemm_nn on a default-constructed instance of C's execution space.
template <RowMajorMatrix AV, RowMajorMatrix BV, MutableRowMajorMatrix CV>
void gemm_nn(const AV& a, const BV& b, const CV& c) {
  gemm_nn(typename CV::execution_space(), a, b, c);
}
/// gemm_tn on a default-constructed instance of C's execution space.
template <RowMajorMatrix AV, RowMajorMatrix BV, MutableRowMajorMatrix CV>
void gemm_tn(const AV& a, const BV& b, const CV& c) {
  gemm_tn(typename CV::execution_space(), a, b, c);
}
/// gemm_nt on a default-constructed instance of C's execution space.
template <RowMajorMatrix AV, RowMajorMatrix BV, MutableRowMajorMatrix CV>
void gemm_nt(const AV& a, const BV& b, const CV& c) {
  gemm_nt(typename CV::execution_space(), a, b, c);
}

/// The GEMM kernel host execution spaces run in this process, e.g. "avx2, 8 lanes, 6x16 micro-tile,
/// FMA instructions" (the packed, register-blocked kernel), followed by " (chosen at run time; the
/// build's own: sse2, ...)" when the CPU runs a wider kernel than the build's flags assume, or
/// "portable loop" (compilers without GCC/Clang vector extensions). Every kernel gives the same
/// bits; this says which one is fast here.
inline std::string host_gemm_kernel_name() {
#if REPROSGD_IMPL_GEMM_HOST_KERNEL
  return detail::gemm_host::kernel_name();
#else
  return "portable loop";
#endif
}

REPROSGD_END_NAMESPACE
