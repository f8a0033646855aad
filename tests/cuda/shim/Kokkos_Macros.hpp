// SPDX-License-Identifier: BSD-3-Clause
/// @file Stand-in for Kokkos_Macros.hpp in the standalone CUDA check (tests/cuda/l5_check.cu), which has no Kokkos.
///
/// reprosgd's device-callable headers need only KOKKOS_INLINE_FUNCTION / KOKKOS_FUNCTION from Kokkos.
/// Put this folder on the include path (-I tests/cuda/shim) to compile them with plain nvcc.
#pragma once

#ifndef KOKKOS_INLINE_FUNCTION
#define KOKKOS_INLINE_FUNCTION __host__ __device__ inline
#endif
#ifndef KOKKOS_FUNCTION
#define KOKKOS_FUNCTION __host__ __device__
#endif
#ifndef KOKKOS_FORCEINLINE_FUNCTION
#define KOKKOS_FORCEINLINE_FUNCTION __host__ __device__ inline
#endif
