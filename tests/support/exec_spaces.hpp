// SPDX-License-Identifier: BSD-3-Clause
/// @file The execution spaces this Kokkos build enables (host, and device where there is one), as type
/// lists for doctest templates.
#pragma once

#include <reprosgd/testing/host_execution_spaces.hpp>

#include <Kokkos_Core.hpp>

#include <tuple>

namespace reprosgd_test {

/// Every host execution space enabled in this Kokkos build (use with TEST_CASE_TEMPLATE_APPLY).
using host_spaces = reprosgd::testing::HostExecutionSpaces;  // the library's public list

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
