// SPDX-License-Identifier: BSD-3-Clause
/// @file LocalExactSum: the Exact sum of rows that one process holds, with no parallelism policy.
///
/// nn/ sums chunk partials of a layer's input gradient this way (a layer must not depend on the
/// parallelism policies above it). The arithmetic is Exact's own one-rank path, run on the
/// one-process group below, so the bits are those of `Exact::reduce` with a `Serial` policy by
/// construction, not by a second copy of the code (tests/unit/reduction/local_sum_test.cpp).
#pragma once

#include <reprosgd/concepts/reduction.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/reduction/exact.hpp>

#include <Kokkos_Core.hpp>

#include <string>
#include <utility>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
/// The group of one process: what the Exact reduction asks of a group, each operation trivial
/// (rank 0 of 1; a reduction over one rank leaves its values as they are).
template <class ExecSpace>
class OneProcessGroup {
 public:
  using execution_space = ExecSpace;
  explicit OneProcessGroup(const ExecSpace& space) : space_(space) {}
  [[nodiscard]] const execution_space& space() const noexcept { return space_; }
  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return 1; }
  template <class View>
  void allreduce_max(const View&) const noexcept {}
  template <class View>
  void allreduce_sum(const View&) const noexcept {}

 private:
  ExecSpace space_;
};
}  // namespace detail

/**
 * The exact, order-free sum of the first `n_rows` rows of a matrix, in one process: the bits
 * `Exact::reduce(Serial<ExecSpace>(space), rows(0:n_rows, :), n_rows, out)` gives (the headroom
 * follows from n_rows). Owns the reduction's workspace, which is kept between calls (a training
 * step sums the same shapes every time), so reuse one object.
 *
 * Not collective; not thread-safe (one object per thread of control).
 *
 * @tparam ExecSpace the Kokkos execution space the kernels run on.
 */
template <class ExecSpace = Kokkos::DefaultExecutionSpace>
class LocalExactSum {
  static_assert(Kokkos::is_execution_space<ExecSpace>::value,
                "reprosgd::LocalExactSum<ExecSpace>: ExecSpace must be a Kokkos execution space");

 public:
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  using rows_type = Kokkos::View<float**, Kokkos::LayoutRight, memory_space>;
  using out_type = Kokkos::View<float*, memory_space>;

  /**
   * out(i) = the exact sum over rows u < n_rows of rows(u, i), rounded once to float. A NaN or
   * Inf in those rows, or a sum too large for a float, gives finite == false (out then holds
   * unspecified values, as with Exact::reduce). MatrixRef and BufferRef (unmanaged Views of the
   * same memory space) convert to these parameters.
   * @throws config_error when n_rows is not in [1, min(rows.extent(0), 2^20)] or out's length is
   *         not rows.extent(1)
   * @deterministic the same bits for any thread count and any ExecSpace of the same memory space
   */
  ReductionResult sum(const ExecSpace& space, const rows_type& rows, long n_rows, const out_type& out) {
    if (n_rows < 1 || n_rows > static_cast<long>(rows.extent(0)))
      throw config_error("reprosgd::LocalExactSum::sum: " + std::to_string(n_rows) + " rows asked of a matrix of " +
                         std::to_string(rows.extent(0)));
    const auto first_rows = Kokkos::subview(rows, std::make_pair(0L, n_rows), Kokkos::ALL());
    detail::OneProcessGroup<ExecSpace> one(space);
    return exact_.reduce(one, first_rows, n_rows, out);
  }

 private:
  Exact exact_;
};

REPROSGD_END_NAMESPACE
