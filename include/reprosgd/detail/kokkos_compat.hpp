// SPDX-License-Identifier: BSD-3-Clause
/// @file The one place where differences between Kokkos 3.4 and Kokkos 4.x/5.x are absorbed.
#pragma once

#include <reprosgd/version.hpp>

#include <Kokkos_Core.hpp>

#include <string>

// Kokkos 3.x spells the version KOKKOS_VERSION (e.g. 30401); 4.x keeps it and adds
// KOKKOS_VERSION_MAJOR. Use only KOKKOS_VERSION here.
#ifndef KOKKOS_VERSION
#error "reprosgd: Kokkos did not define KOKKOS_VERSION; Kokkos 3.4 or newer is required"
#endif
#if KOKKOS_VERSION < 30400
#error "reprosgd: Kokkos 3.4 or newer is required"
#endif

/// Code of a KOKKOS_INLINE_FUNCTION that exists only on the host (Kokkos 4's KOKKOS_IF_ON_HOST,
/// which Kokkos 3.4 lacks): left out of the device passes of CUDA and HIP.
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define REPROSGD_HOST_ONLY(...)
#else
#define REPROSGD_HOST_ONLY(...) __VA_ARGS__
#endif

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// True when ExecSpace runs on the host and can read HostSpace memory directly.
template <class ExecSpace>
inline constexpr bool is_host_space_v =
    Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;

/// The number of threads an execution-space instance uses (Kokkos 4 renamed concurrency()).
template <class ExecSpace>
int concurrency(const ExecSpace& space) {
#if KOKKOS_VERSION >= 40000
  return space.concurrency();
#else
  (void)space;
  return ExecSpace::concurrency();
#endif
}

/// Kokkos's version as "major.minor.patch", e.g. "3.4.1" or "4.6.1" (from KOKKOS_VERSION).
inline std::string version_string() {
  return std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
         std::to_string(KOKKOS_VERSION % 100);
}

/// The execution spaces this Kokkos build enables, by their name(), e.g. "Serial OpenMP".
inline std::string enabled_backends() {
  std::string s;
  [[maybe_unused]] auto add = [&s](const char* name) {
    if (!s.empty()) s += ' ';
    s += name;
  };
#if defined(KOKKOS_ENABLE_SERIAL)
  add("Serial");
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  add("OpenMP");
#endif
#if defined(KOKKOS_ENABLE_THREADS)
  add("Threads");
#endif
#if defined(KOKKOS_ENABLE_HPX)
  add("HPX");
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  add("Cuda");
#endif
#if defined(KOKKOS_ENABLE_HIP)
  add("HIP");
#endif
#if defined(KOKKOS_ENABLE_SYCL)
  add("SYCL");
#endif
#if defined(KOKKOS_ENABLE_OPENMPTARGET)
  add("OpenMPTarget");
#endif
  return s;
}

/// The execution space's name, e.g. "OpenMP", "Threads", "Serial".
template <class ExecSpace>
std::string space_name() {
  return ExecSpace::name();
}

/// IEEE square root (correctly rounded on every backend); Kokkos 4 moved it out of Experimental.
KOKKOS_INLINE_FUNCTION float sqrt(float x) {
#if KOKKOS_VERSION >= 40000
  return Kokkos::sqrt(x);
#else
  return Kokkos::Experimental::sqrt(x);
#endif
}
/// IEEE square root of a double (correctly rounded on every backend).
KOKKOS_INLINE_FUNCTION double sqrt(double x) {
#if KOKKOS_VERSION >= 40000
  return Kokkos::sqrt(x);
#else
  return Kokkos::Experimental::sqrt(x);
#endif
}

/// Initialise Kokkos with `threads` host threads (0: Kokkos's default), optionally without its
/// start-up warnings (ranks other than 0 keep quiet). Kokkos 4 replaced InitArguments with
/// InitializationSettings.
inline void initialize(int threads, bool disable_warnings = false) {
#if KOKKOS_VERSION >= 40000
  Kokkos::InitializationSettings settings;
  if (threads > 0) settings.set_num_threads(threads);
  settings.set_disable_warnings(disable_warnings);
  Kokkos::initialize(settings);
#else
  Kokkos::InitArguments args;
  if (threads > 0) args.num_threads = threads;
  args.disable_warnings = disable_warnings;
  Kokkos::initialize(args);
#endif
}

/// Kokkos::ScopeGuard's constructor signature changed between 3.x and 4.x; both accept argc/argv.
using scope_guard = Kokkos::ScopeGuard;

}  // namespace detail
REPROSGD_END_NAMESPACE
