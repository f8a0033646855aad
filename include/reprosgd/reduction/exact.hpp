// SPDX-License-Identifier: BSD-3-Clause
/// @file Exact: an order-free gradient sum on a shared-exponent int64 fixed-point grid (DESIGN §4).
#pragma once

#include <reprosgd/concepts/reduction.hpp>
#include <reprosgd/error.hpp>

#include <Kokkos_Core.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

namespace detail {

/// The biased exponent field of a float (0 for zero and subnormals, 255 for Inf and NaN).
KOKKOS_INLINE_FUNCTION std::int32_t biased_exponent(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return static_cast<std::int32_t>((u >> 23) & 0xFFu);
}

/// 2^s as a double, exactly, for -1022 <= s <= 1023 (no libm: the bits are built directly).
KOKKOS_INLINE_FUNCTION double pow2(int s) {
  const std::uint64_t bits = static_cast<std::uint64_t>(1023 + s) << 52;
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

/// Round a double with |d| < 2^62 to the nearest int64, ties to even, the same on every device
/// and independent of the current rounding mode.
KOKKOS_INLINE_FUNCTION std::int64_t round_half_even(double d) {
  const std::int64_t t = static_cast<std::int64_t>(d);  // truncation toward zero, exact
  const double frac = d - static_cast<double>(t);       // exact: t and d share their high bits
  if (frac > 0.5 || (frac == 0.5 && (t & 1))) return t + 1;
  if (frac < -0.5 || (frac == -0.5 && (t & 1))) return t - 1;
  return t;
}

}  // namespace detail

/**
 * Exact, order-free sum of micro-batch gradients.
 *
 * For each block of `block_size` parameters the ranks agree on the largest binary exponent E of
 * any value in any micro-batch row (an integer MAX all-reduce). Every value is then placed on the
 * fixed-point grid 2^(E-126-62+h) as an int64 (h = ceil(log2 M) bits of headroom, so the sum of
 * all M rows cannot overflow), the rows are added as integers (exact, so in any order and any
 * grouping), the ranks add their partial sums with an integer SUM all-reduce (exact again), and the
 * total is converted back to float once. The result is therefore the same bits for any number of
 * ranks, any owner map and any MPI reduction algorithm.
 *
 * Accuracy: every value keeps all bits down to 2^-(62-h) of its block's largest magnitude, so the
 * error of the sum is at most M * 2^-(63-h) * max|x| before the final rounding to float — far below a
 * float's own rounding for blocks whose values are of similar magnitude. Values more than 2^(38-h)
 * times smaller than the block's largest lose low bits (documented in docs/distributed.md).
 *
 * @collective @deterministic (rank-independent)
 */
class Exact {
 public:
  static constexpr const char* name() noexcept { return "exact"; }
  static constexpr bool rank_independent = true;
  static constexpr long block_size = 256;

  /// Sum `rows` (this rank's micro-batch gradients, one per row) over all ranks into `sum`.
  template <class Par, class Rows, class Sum>
  ReductionResult reduce(Par& par, const Rows& rows, long total_micro_batches, const Sum& sum) {
    using exec = typename Par::execution_space;
    using mem = typename exec::memory_space;
    const long n = static_cast<long>(rows.extent(1));
    const long k = static_cast<long>(rows.extent(0));
    if (static_cast<long>(sum.extent(0)) != n)
      throw config_error("reprosgd::Exact::reduce: sum has " + std::to_string(sum.extent(0)) +
                         " elements, rows have " + std::to_string(n));
    if (total_micro_batches < 1 || total_micro_batches > (1L << 20))
      throw config_error("reprosgd::Exact::reduce: " + std::to_string(total_micro_batches) +
                         " micro-batches (supported: 1 to 2^20)");
    const long nblocks = (n + block_size - 1) / block_size;
    // Workspace is kept between calls (a training step calls reduce once with the same sizes).
    Workspace<mem>& ws = workspace<mem>();
    ws.ensure(n, nblocks);
    const exec& space = par.space();

    // 1. Largest biased exponent per block over this rank's rows (255 flags Inf/NaN).
    auto exps = ws.exps;
    auto exps_host = ws.exps_host;
    Kokkos::parallel_for(
        "reprosgd::Exact::block_exponents", Kokkos::RangePolicy<exec>(space, 0, nblocks),
        KOKKOS_LAMBDA(const long b) {
          std::int32_t e = 0;
          const long lo = b * block_size;
          const long hi = lo + block_size < n ? lo + block_size : n;
          for (long u = 0; u < k; ++u)
            for (long i = lo; i < hi; ++i) {
              const std::int32_t ei = detail::biased_exponent(rows(u, i));
              e = ei > e ? ei : e;
            }
          exps(b) = e;
        });
    space.fence();
    const auto blocks = Kokkos::make_pair(0L, nblocks);
    const auto elems = Kokkos::make_pair(0L, n);
    Kokkos::deep_copy(Kokkos::subview(exps_host, blocks), Kokkos::subview(exps, blocks));
    // 2. Agree on it across ranks (integer max: exact in any order).
    par.allreduce_max(Kokkos::subview(exps_host, blocks));
    bool finite = true;
    for (long b = 0; b < nblocks; ++b) finite = finite && exps_host(b) != 255;
    if (!finite) return {false};
    Kokkos::deep_copy(Kokkos::subview(exps, blocks), Kokkos::subview(exps_host, blocks));

    // 3. Quantise onto the block's grid and add this rank's rows as integers.
    const int headroom = static_cast<int>(std::bit_width(static_cast<unsigned long>(total_micro_batches - 1)));
    auto acc = ws.acc;
    Kokkos::parallel_for(
        "reprosgd::Exact::quantise", Kokkos::RangePolicy<exec>(space, 0, n), KOKKOS_LAMBDA(const long i) {
          const std::int32_t e = exps(i / block_size);
          const int shift = 188 - headroom - (e > 0 ? e : 1);  // |x| * 2^shift <= 2^(62-h)
          const double scale = detail::pow2(shift);
          std::int64_t s = 0;
          for (long u = 0; u < k; ++u) s += detail::round_half_even(static_cast<double>(rows(u, i)) * scale);
          acc(i) = s;
        });
    space.fence();
    // 4. Integer sum across ranks: exact, so independent of the MPI algorithm.
    if (par.size() > 1) {
      if constexpr (std::is_same_v<mem, Kokkos::HostSpace>) {
        par.allreduce_sum(Kokkos::subview(acc, elems));
      } else {
        Kokkos::deep_copy(Kokkos::subview(ws.acc_host, elems), Kokkos::subview(acc, elems));
        par.allreduce_sum(Kokkos::subview(ws.acc_host, elems));
        Kokkos::deep_copy(Kokkos::subview(acc, elems), Kokkos::subview(ws.acc_host, elems));
      }
    }
    // 5. Back to float, once. A finite sum too large for a float (every rank holds the same integer
    //    total, so every rank sees it) is reported like a NaN, never converted (that is UB).
    long overflowed = 0;
    Kokkos::parallel_reduce(
        "reprosgd::Exact::dequantise", Kokkos::RangePolicy<exec>(space, 0, n),
        KOKKOS_LAMBDA(const long i, long& bad) {
          const std::int32_t e = exps(i / block_size);
          const int shift = 188 - headroom - (e > 0 ? e : 1);
          const double v = static_cast<double>(acc(i)) * detail::pow2(-shift);
          constexpr double limit = 3.4028235677973366e38;  // FLT_MAX rounded up: larger rounds to inf
          if (v >= limit || v <= -limit) {
            ++bad;
            sum(i) = 0.0f;
          } else {
            sum(i) = static_cast<float>(v);
          }
        },
        overflowed);  // an integer count: exact in any order
    space.fence();
    return {overflowed == 0};
  }

 private:
  template <class Mem>
  struct Workspace {
    Kokkos::View<std::int64_t*, Mem> acc;
    Kokkos::View<std::int64_t*, Kokkos::HostSpace> acc_host;
    Kokkos::View<std::int32_t*, Mem> exps;
    Kokkos::View<std::int32_t*, Kokkos::HostSpace> exps_host;
    void ensure(long n, long nblocks) {
      if (static_cast<long>(acc.extent(0)) < n) {
        acc = {};
        acc_host = {};
        acc = Kokkos::View<std::int64_t*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Exact::acc"), n);
        acc_host = Kokkos::View<std::int64_t*, Kokkos::HostSpace>(
            Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Exact::acc_host"), n);
      }
      if (static_cast<long>(exps.extent(0)) < nblocks) {
        exps = Kokkos::View<std::int32_t*, Mem>("reprosgd::Exact::exps", nblocks);
        exps_host = Kokkos::View<std::int32_t*, Kokkos::HostSpace>("reprosgd::Exact::exps_host", nblocks);
      }
    }
  };
  // One workspace per memory space the reduction is used with; host builds have one.
  template <class Mem>
  Workspace<Mem>& workspace() {
    if constexpr (std::is_same_v<Mem, Kokkos::HostSpace>) {
      return host_ws_;
    } else {
      static_assert(std::is_same_v<Mem, typename Kokkos::DefaultExecutionSpace::memory_space>,
                    "reprosgd::Exact: the execution space's memory space must be HostSpace or the default one");
      return device_ws_;
    }
  }

  Workspace<Kokkos::HostSpace> host_ws_;
  Workspace<typename Kokkos::DefaultExecutionSpace::memory_space> device_ws_;
};

REPROSGD_END_NAMESPACE
