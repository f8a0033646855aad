// SPDX-License-Identifier: BSD-3-Clause
/// @file The execution spaces this Kokkos build enables (host, and device where there is one), as type
/// lists for doctest templates.
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

#if defined(KOKKOS_ENABLE_CUDA)
using device_spaces = std::tuple<Kokkos::Cuda>;
#elif defined(KOKKOS_ENABLE_HIP)
using device_spaces = std::tuple<Kokkos::HIP>;
#else
using device_spaces = std::tuple<>;
#endif

template <class A, class B>
struct concat;
template <class... A, class... B>
struct concat<std::tuple<A...>, std::tuple<B...>> {
  using type = std::tuple<A..., B...>;
};

/// The host spaces and the device space of the build (CUDA or HIP): the list of the tests whose
/// kernels must compile and give the same bits on a device. A CUDA build compiles them for the
/// device; running them needs a GPU (scripts/device_check.sh).
using spaces = concat<host_spaces, device_spaces>::type;

}  // namespace reprosgd_test
