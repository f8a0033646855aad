// SPDX-License-Identifier: BSD-3-Clause
/// @file testing/host_execution_spaces.hpp: the type list holds exactly the enabled host spaces, in
/// order, it drives TEST_CASE_TEMPLATE_APPLY, and describe() names a space and its thread count.
#include <doctest/doctest.h>

#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/testing/host_execution_spaces.hpp>

#include <Kokkos_Core.hpp>

#include <string>
#include <tuple>
#include <type_traits>

namespace {

template <class Tuple>
std::string names() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    std::string s;
    ((s += (s.empty() ? "" : " ") + std::string(std::tuple_element_t<I, Tuple>::name())), ...);
    return s;
  }(std::make_index_sequence<std::tuple_size_v<Tuple>>{});
}

}  // namespace

TEST_SUITE("testing/host_execution_spaces") {
  TEST_CASE("HostExecutionSpaces: the enabled host backends, Serial, OpenMP, Threads, in that order") {
    using reprosgd::testing::HostExecutionSpaces;
    std::string expected;
#if defined(KOKKOS_ENABLE_SERIAL)
    expected += "Serial";
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
    expected += std::string(expected.empty() ? "" : " ") + "OpenMP";
#endif
#if defined(KOKKOS_ENABLE_THREADS)
    expected += std::string(expected.empty() ? "" : " ") + "Threads";
#endif
    CHECK(names<HostExecutionSpaces>() == expected);
    // The library's own list of enabled backends starts with the host ones (device ones follow).
    CHECK(reprosgd::detail::enabled_backends().rfind(expected, 0) == 0);
  }

  TEST_CASE_TEMPLATE_DEFINE("TEST_CASE_TEMPLATE_APPLY runs once per host space, on the host", Space, apply_id) {
    static_assert(Kokkos::is_execution_space<Space>::value);
    static_assert(reprosgd::detail::is_host_space_v<Space>);
    const std::string d = reprosgd::testing::describe(Space());
    const int threads = reprosgd::detail::concurrency(Space());
    CHECK(d == std::string(Space::name()) + ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads"));
    if (std::string(Space::name()) == "Serial") CHECK(d == "Serial, 1 thread");
  }
  TEST_CASE_TEMPLATE_APPLY(apply_id, reprosgd::testing::HostExecutionSpaces);

}
