// SPDX-License-Identifier: BSD-3-Clause
/// @file Native: the usual float gradient sum (local rows in order, then the policy's float all-reduce), for comparison.
#pragma once

#include <reprosgd/concepts/reduction.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/math/elementary.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
/// 1 when x is a NaN or an Inf (biased exponent 255), by its bits: no <cmath>, and immune to
/// -ffinite-math-only assumptions.
KOKKOS_INLINE_FUNCTION int is_nonfinite_bits(float x) {
  const auto u = math::detail::bit_cast<std::uint32_t>(x);
  return ((u >> 23) & 0xFFu) == 0xFFu ? 1 : 0;
}
}  // namespace detail

/**
 * The conventional gradient sum, as most data-parallel frameworks do it: each rank adds its own
 * micro-batch rows in ascending row order in float, then the ranks add their partial sums with a
 * float all-reduce of the policy (DataParallel: MPI_Allreduce(MPI_SUM)). With one process (Serial)
 * it is the local sum.
 *
 * **What it gives up.** A float sum depends on the grouping of its terms. The grouping here
 * depends on the rank count P (which rows are summed locally), on the MPI library's reduction
 * algorithm (chosen by message size, P and the process placement, and changed between releases),
 * and MPI only *recommends* that a reduction give the same result each time. It is therefore
 * reproducible only for a fixed P, MPI library (version and tuning) and placement, and it is
 * `rank_independent = false`: a run on 3 ranks does not give the bits of a run on 4 (contract
 * level L3 does not hold). Use Exact for that; Native exists to measure what Exact costs.
 *
 * NaN/Inf: `finite` is false on every rank (agreed) when the summed gradient holds a NaN or an Inf,
 * which happens when any row holds one and also when a finite sum overflows.
 *
 * @collective @deterministic only for a fixed rank count and MPI library
 */
class Native {
 public:
  static constexpr const char* name() noexcept { return "native"; }
  static constexpr bool rank_independent = false;

  /**
   * Sum `rows` (this rank's micro-batch gradients, one per row, in micro-batch order) over all
   * ranks into `sum`.
   * @param par  the parallelism policy (Serial, or one with float_allreduce_sum(data, n): DataParallel)
   * @param rows k x n, this rank's rows
   * @param total_micro_batches M, the global number of rows (checked, otherwise unused)
   * @param sum  n elements, receives the same sum on every rank
   * @throws config_error on a size mismatch; what the policy's float_allreduce_sum throws
   */
  template <class Par, class Rows, class Sum>
    requires Parallelism<Par>
  ReductionResult reduce(Par& par, const Rows& rows, long total_micro_batches, const Sum& sum) const {
    using exec = typename Par::execution_space;
    const long n = static_cast<long>(rows.extent(1));
    const long k = static_cast<long>(rows.extent(0));
    if (static_cast<long>(sum.extent(0)) != n)
      throw config_error("reprosgd::Native::reduce: sum has " + std::to_string(sum.extent(0)) +
                         " elements, rows have " + std::to_string(n));
    if (total_micro_batches < k)
      throw config_error("reprosgd::Native::reduce: " + std::to_string(k) + " local rows but only " +
                         std::to_string(total_micro_batches) + " micro-batches in total");
    const exec& space = par.space();

    // 1. This rank's rows, each element added by one thread in ascending row order.
    Kokkos::parallel_for(
        "reprosgd::Native::local_sum", Kokkos::RangePolicy<exec>(space, 0, n), KOKKOS_LAMBDA(const long i) {
          float s = 0.0f;
          for (long u = 0; u < k; ++u) s = s + rows(u, i);
          sum(i) = s;
        });
    space.fence();

    // 2. Float sum across ranks: the grouping is the MPI library's choice (why this is not L3).
    if constexpr (requires(float* p) { par.float_allreduce_sum(p, n); }) {
      if (par.size() > 1) {
        auto host = Kokkos::create_mirror_view(sum);
        Kokkos::deep_copy(host, sum);
        if (!host.span_is_contiguous()) throw config_error("reprosgd::Native::reduce: sum is not contiguous");
        par.float_allreduce_sum(host.data(), n);
        Kokkos::deep_copy(sum, host);
      }
    } else {
      if (par.size() > 1)
        throw config_error(std::string("reprosgd::Native::reduce: the policy '") + Par::name() + "' has " +
                           std::to_string(par.size()) + " ranks but no float all-reduce (float_allreduce_sum)");
    }

    // 3. NaN/Inf: an integer count (exact in any order), then agreed, since MPI does not promise
    //    every rank the same float bits from an allreduce.
    int nonfinite = 0;
    Kokkos::parallel_reduce(
        "reprosgd::Native::nonfinite", Kokkos::RangePolicy<exec>(space, 0, n),
        KOKKOS_LAMBDA(const long i, int& count) { count += detail::is_nonfinite_bits(sum(i)); }, nonfinite);
    space.fence();
    return {par.agree(nonfinite == 0)};
  }
};

REPROSGD_END_NAMESPACE
