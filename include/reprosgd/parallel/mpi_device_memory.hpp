// SPDX-License-Identifier: BSD-3-Clause
/// @file Whether the MPI library may be handed device memory (a CUDA- or ROCm-aware MPI), asked of
/// the library at run time; where it may not, the collectives stage through host buffers.
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_MPI
#error "reprosgd/parallel/mpi_device_memory.hpp needs MPI (REPROSGD_HAS_MPI=1)"
#endif

#include <Kokkos_Core.hpp>
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support (and the ROCm pair)
#endif

#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

/// What the MPI library says about device memory. Every field is false when the library has no
/// way to say (an MPI without Open MPI's extensions): the safe answer, since staging through host
/// memory is correct with any MPI and only slower.
struct MpiDeviceSupport {
  bool cuda_compiled = false;  ///< built with CUDA support (MPIX_CUDA_AWARE_SUPPORT in <mpi-ext.h>)
  bool cuda = false;           ///< ... and enabled in this process (MPIX_Query_cuda_support())
  bool rocm_compiled = false;  ///< built with ROCm support (MPIX_ROCM_AWARE_SUPPORT)
  bool rocm = false;           ///< ... and enabled (MPIX_Query_rocm_support())
  bool disabled_by_env = false;  ///< REPROSGD_MPI_DEVICE_MEMORY=0 forbids device buffers anyway
};

/**
 * Ask the MPI library whether it can read and write CUDA and ROCm memory. Open MPI answers at
 * compile time (whether it was built with that support) and at run time (whether it is enabled in
 * this process: a CUDA-aware build runs without it when no CUDA driver loads); both must be yes.
 * REPROSGD_MPI_DEVICE_MEMORY=0 in the environment makes the answer no whatever the library says
 * (to rule the library's device path out when a run misbehaves: staging gives the same bits).
 *
 * The answer changes only how buffers travel, never a result: the exact reduction sends the same
 * integers either way (docs/portability.md, "Where data and state live").
 * @deterministic @not_collective May be called before MPI_Init (Open MPI's queries allow it).
 */
inline MpiDeviceSupport mpi_device_support() noexcept {
  MpiDeviceSupport s;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  s.cuda_compiled = true;
  s.cuda = MPIX_Query_cuda_support() == 1;
#endif
#if defined(MPIX_ROCM_AWARE_SUPPORT) && MPIX_ROCM_AWARE_SUPPORT
  s.rocm_compiled = true;
  s.rocm = MPIX_Query_rocm_support() == 1;
#endif
  const char* env = std::getenv("REPROSGD_MPI_DEVICE_MEMORY");
  if (env != nullptr && std::strcmp(env, "0") == 0) {
    s.disabled_by_env = true;
    s.cuda = s.rocm = false;
  }
  return s;
}

/// One line for --version and logs: "CUDA-aware: no, ROCm-aware: no" (with why when compiled in
/// but off).
inline std::string describe(const MpiDeviceSupport& s) {
  auto one = [&](const char* what, bool compiled, bool on) {
    std::string t = std::string(what) + "-aware: ";
    if (on) return t + "yes";
    if (!compiled) return t + "no";
    return t + (s.disabled_by_env ? "no (REPROSGD_MPI_DEVICE_MEMORY=0)" : "no (built with it, not enabled at run time)");
  };
  return one("CUDA", s.cuda_compiled, s.cuda) + ", " + one("ROCm", s.rocm_compiled, s.rocm);
}

/**
 * Whether MPI may be handed memory of `MemorySpace` directly: always for memory the host can
 * access; for CUDA or HIP device memory only when the MPI library is aware of it (above);
 * never for any other space.
 */
template <class MemorySpace>
[[nodiscard]] bool mpi_reads_memory(const MpiDeviceSupport& s) noexcept {
  if constexpr (static_cast<bool>(Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible)) {
    (void)s;
    return true;
  }
#if defined(KOKKOS_ENABLE_CUDA)
  else if constexpr (std::is_same_v<MemorySpace, Kokkos::CudaSpace>) {
    return s.cuda;
  }
#endif
#if defined(KOKKOS_ENABLE_HIP)
  else if constexpr (std::is_same_v<MemorySpace, Kokkos::HIPSpace>) {
    return s.rocm;
  }
#endif
  else {
    (void)s;
    return false;
  }
}

REPROSGD_END_NAMESPACE
