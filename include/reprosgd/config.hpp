// SPDX-License-Identifier: BSD-3-Clause
/// @file Feature macros (0/1, tested with #if) and the compile-time floating-point guards.
#pragma once

#include <reprosgd/version.hpp>

// MPI support: the CMake target defines REPROSGD_HAS_MPI=1 when it links MPI. Without it the
// library is serial-only and needs nothing but Kokkos and cereal.
#ifndef REPROSGD_HAS_MPI
#define REPROSGD_HAS_MPI 0
#endif

// ULFM (MPIX_Comm_shrink, MPIX_Comm_revoke, MPIX_Comm_agree in <mpi-ext.h>), detected at configure
// time.
#ifndef REPROSGD_HAS_ULFM
#define REPROSGD_HAS_ULFM 0
#endif

// The determinism contract (levels L2 and L5) forbids value-changing floating-point optimisations.
// -ffast-math implies -ffinite-math-only, -fassociative-math and FTZ at start-up; there is no way
// to keep bitwise reproducibility under it, so refuse to compile rather than drift silently.
#if defined(__FAST_MATH__)
#error "reprosgd: -ffast-math (or -Ofast) breaks the bitwise determinism contract. Remove it for translation units that include reprosgd; the ReproSGD::reprosgd target already sets the flags it needs (-ffp-contract=off)."
#endif
#if defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "reprosgd: -ffinite-math-only breaks NaN/Inf detection and the determinism contract. Remove it."
#endif
#if defined(__NVCC__) && defined(__USE_FAST_MATH__)
#error "reprosgd: nvcc --use_fast_math breaks the determinism contract. Remove it."
#endif
