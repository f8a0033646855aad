// SPDX-License-Identifier: BSD-3-Clause
/// @file The host execution spaces this Kokkos build enables, as a type list for doctest templates.
#pragma once

#include <Kokkos_Core.hpp>

#include <tuple>

namespace reprosgd_test {

template <class... T>
struct type_list {};

template <class L, class T>
struct append;
template <class... Ts, class T>
struct append<std::tuple<Ts...>, T> {
  using type = std::tuple<Ts..., T>;
};

using spaces0 = std::tuple<>;
#if defined(KOKKOS_ENABLE_SERIAL)
using spaces1 = append<spaces0, Kokkos::Serial>::type;
#else
using spaces1 = spaces0;
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
using spaces2 = append<spaces1, Kokkos::OpenMP>::type;
#else
using spaces2 = spaces1;
#endif
#if defined(KOKKOS_ENABLE_THREADS)
using spaces3 = append<spaces2, Kokkos::Threads>::type;
#else
using spaces3 = spaces2;
#endif

/// Every host execution space enabled in this Kokkos build (use with TEST_CASE_TEMPLATE_APPLY).
using host_spaces = spaces3;

}  // namespace reprosgd_test
