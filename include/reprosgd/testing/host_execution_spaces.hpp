// SPDX-License-Identifier: BSD-3-Clause
/// @file testing::HostExecutionSpaces: the host execution spaces this Kokkos build enables, as a type
/// list for doctest's TEST_CASE_TEMPLATE_APPLY, and a one-line description of a space instance.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>

#include <Kokkos_Core.hpp>

#include <string>
#include <tuple>

REPROSGD_BEGIN_NAMESPACE
namespace testing {
namespace detail {

template <class List, class Space>
struct Append;
template <class... Spaces, class Space>
struct Append<std::tuple<Spaces...>, Space> {
  using type = std::tuple<Spaces..., Space>;
};

using HostSpaces0 = std::tuple<>;
#if defined(KOKKOS_ENABLE_SERIAL)
using HostSpaces1 = Append<HostSpaces0, Kokkos::Serial>::type;
#else
using HostSpaces1 = HostSpaces0;
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
using HostSpaces2 = Append<HostSpaces1, Kokkos::OpenMP>::type;
#else
using HostSpaces2 = HostSpaces1;
#endif
#if defined(KOKKOS_ENABLE_THREADS)
using HostSpaces3 = Append<HostSpaces2, Kokkos::Threads>::type;
#else
using HostSpaces3 = HostSpaces2;
#endif

}  // namespace detail

/**
 * Every host execution space this Kokkos build enables, in the order Serial, OpenMP, Threads (those
 * whose `KOKKOS_ENABLE_*` macro is defined), as a `std::tuple` — the type list doctest's
 * `TEST_CASE_TEMPLATE_APPLY` takes. The determinism contract (L1) says a training gives the same
 * bits on each of them, so a test written once runs on all.
 *
 * The thread count of OpenMP and Threads is a property of the process (Kokkos's
 * `--kokkos-num-threads=N`, `--kokkos-threads=N` before Kokkos 3.7, or `OMP_NUM_THREADS`), not of
 * the type: inside one run, Serial is the one-thread case and OpenMP/Threads the threaded one; run
 * the test program with 1 and 2 threads to cover both counts on the threaded spaces.
 *
 * **Example**:
 * @code
 * TEST_CASE_TEMPLATE_DEFINE("my training gives the golden on every host backend", Space, backends_id) {
 *   INFO(reprosgd::testing::describe(Space()));
 *   REPROSGD_CHECK_FINGERPRINT(train(reprosgd::Serial<Space>()), golden);
 * }
 * TEST_CASE_TEMPLATE_APPLY(backends_id, reprosgd::testing::HostExecutionSpaces);
 * @endcode
 */
using HostExecutionSpaces = detail::HostSpaces3;

static_assert(std::tuple_size_v<HostExecutionSpaces> > 0,
              "reprosgd::testing::HostExecutionSpaces: this Kokkos build enables no host execution space "
              "(KOKKOS_ENABLE_SERIAL, KOKKOS_ENABLE_OPENMP or KOKKOS_ENABLE_THREADS)");

/**
 * A space instance in words, for a test's INFO: its name and thread count, e.g. "OpenMP, 2 threads"
 * or "Serial, 1 thread".
 */
template <class ExecSpace>
  requires Kokkos::is_execution_space<ExecSpace>::value
[[nodiscard]] std::string describe(const ExecSpace& space) {
  const int threads = reprosgd::detail::concurrency(space);
  return std::string(ExecSpace::name()) + ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

}  // namespace testing
REPROSGD_END_NAMESPACE
