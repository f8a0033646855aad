// SPDX-License-Identifier: BSD-3-Clause
/// @file The host GEMM's machine model: the vector type and register blocking of the instruction
/// set the translation unit is compiled for, the tiling constants, the Operand view, and the one
/// fused multiply-add every kernel variant is built from.
#pragma once

// Plain C++ on raw pointers (no Kokkos), like the rest of the host GEMM (gemm_host.hpp).
//
// Why every variant of the host GEMM gives the bits of the scalar reference loop
//     float acc = 0.0f; for (p = 0; p < K; ++p) acc = fmaf(a(i,p), b(p,j), acc);  C(i,j) = acc;
// - Each output element lives in one vector lane of one accumulator register and sees exactly
//   the reference's operations: one fused multiply-add (a single rounding of the exact
//   a(i,p)*b(p,j) + acc), p ascending. Lanes never interact (no horizontal sums), so the vector
//   width (SSE, AVX2, AVX-512) and the register blocking cannot change a result.
// - The FMA is explicit (an intrinsic, or fmaf per lane where the translation unit is compiled
//   without FMA instructions): IEEE fusedMultiplyAdd is correctly rounded, so hardware FMA, glibc's
//   fmaf and the device's __fmaf_rn give the same bits. Contraction by the compiler stays off
//   (-ffp-contract=off): only the operations written as an FMA are fused.
// - Blocking over K stores the float accumulator into C and reloads it for the next K block: the
//   stored value is the accumulator itself, so the chain continues with the same operations.
// - The first K block starts from +0.0f, as the reference does (fma(a, b, +0) of an exact -0
//   product is +0: starting from the first product instead would keep the -0).
// - Padding rows/columns of the packed panels are zeros whose results are discarded.

#include <reprosgd/version.hpp>

#include <cstddef>
#include <cstring>

#if defined(__AVX__)
#include <immintrin.h>
#endif

REPROSGD_BEGIN_NAMESPACE
namespace detail::gemm_host {

// Vector width and register blocking follow the instruction set the translation unit is compiled
// for. MR rows x NV vectors of accumulators, plus NV vectors of B, one broadcast of A and one
// product temporary, must fit the register file: 32 registers with AVX-512 (12x2: 24+2+1+1),
// 16 registers with AVX/AVX2 and SSE (6x2: 12+2+1+1).
#if defined(__AVX512F__)
inline constexpr int lanes = 16;
#ifndef REPROSGD_IMPL_GEMM_MR
#define REPROSGD_IMPL_GEMM_MR 12
#endif
#elif defined(__AVX__)
inline constexpr int lanes = 8;
#ifndef REPROSGD_IMPL_GEMM_MR
#define REPROSGD_IMPL_GEMM_MR 6
#endif
#else
inline constexpr int lanes = 4;
#ifndef REPROSGD_IMPL_GEMM_MR
#define REPROSGD_IMPL_GEMM_MR 6
#endif
#endif
#ifndef REPROSGD_IMPL_GEMM_NV
#define REPROSGD_IMPL_GEMM_NV 2
#endif

typedef float vfloat __attribute__((vector_size(lanes * sizeof(float))));

inline constexpr int mr = REPROSGD_IMPL_GEMM_MR;  ///< rows of the micro-tile
inline constexpr int nv = REPROSGD_IMPL_GEMM_NV;  ///< vectors across the micro-tile's columns
inline constexpr int nr = nv * lanes;             ///< columns of the micro-tile
/// Target depth of a K block: 32 KiB of packed B micro-panel (kc x nr floats, 512 deep with AVX2).
/// Deeper than L1 alone would suggest: the micro-panel streams from L2 well (it is packed just in
/// time), and every extra K block costs a store and reload of all of C. Measured on Zen 3 against
/// 16 KiB: +5-10% on 128x512x784 and 128x512x512.
#ifndef REPROSGD_IMPL_GEMM_KC
#define REPROSGD_IMPL_GEMM_KC ((32 * 1024) / (nr * static_cast<int>(sizeof(float))))
#endif
inline constexpr int kc_target = REPROSGD_IMPL_GEMM_KC;
/// Caps on a tile: at most mc_max rows (and see a_block_bytes) by nc_max columns. B is packed one
/// micro-panel at a time, so only the A block needs to stay in L2.
#ifndef REPROSGD_IMPL_GEMM_MC_STRIPS
#define REPROSGD_IMPL_GEMM_MC_STRIPS 64
#endif
#ifndef REPROSGD_IMPL_GEMM_NC
#define REPROSGD_IMPL_GEMM_NC 512
#endif
/// A (row-major or transposed) is packed when a tile has at least this many column strips (the copy is then
/// shared by that many micro-kernel calls per row strip); narrower tiles read A in place.
#ifndef REPROSGD_IMPL_GEMM_PACK_A_MIN_STRIPS
#define REPROSGD_IMPL_GEMM_PACK_A_MIN_STRIPS 4
#endif
inline constexpr int pack_a_min_strips = REPROSGD_IMPL_GEMM_PACK_A_MIN_STRIPS;
inline constexpr int mc_max = REPROSGD_IMPL_GEMM_MC_STRIPS * mr;
/// Bytes of packed A block (mc x kc) a tile aims for, so that it stays in L2 with the B micro-panel
/// and C: with K blocks of 512 that is about 192 rows, with K = 128 (the weight gradients) the cap
/// of mc_max rows. Fewer, taller tiles pack each B micro-panel fewer times (measured on 784x512x128:
/// 0.79-0.86 -> 0.99-1.03 of OpenBLAS with 384-row instead of 144-row tiles).
#ifndef REPROSGD_IMPL_GEMM_A_BLOCK_BYTES
#define REPROSGD_IMPL_GEMM_A_BLOCK_BYTES (384 * 1024)
#endif
inline constexpr int a_block_bytes = REPROSGD_IMPL_GEMM_A_BLOCK_BYTES;
inline constexpr int nc_max = REPROSGD_IMPL_GEMM_NC;
inline constexpr std::size_t alignment = 64;

/// A read-only matrix operand in logical (row, column) coordinates: element (r, c) is
/// data[r * rs + c * cs]. Transposition is a swap of the two strides.
struct Operand {
  const float* data;
  std::ptrdiff_t rs;
  std::ptrdiff_t cs;
};

inline vfloat load(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store(float* p, vfloat v) { std::memcpy(p, &v, sizeof(v)); }

/// acc + b * a in every lane with one rounding (IEEE fusedMultiplyAdd): the FMA instruction where
/// the translation unit may use it, else fmaf per lane (glibc's fmaf is correctly rounded, using
/// the CPU's FMA when it has one), so every build gives the same bits.
__attribute__((always_inline)) inline vfloat fused_multiply_add(vfloat b, float a, vfloat acc) {
#if defined(__AVX512F__)
  static_assert(lanes == 16);
  return _mm512_fmadd_ps(b, _mm512_set1_ps(a), acc);
#elif defined(__FMA__)
  static_assert(lanes == 8);
  return _mm256_fmadd_ps(b, _mm256_set1_ps(a), acc);
#else
  vfloat out;
  for (int l = 0; l < lanes; ++l) out[l] = __builtin_fmaf(b[l], a, acc[l]);
  return out;
#endif
}

}  // namespace detail::gemm_host
REPROSGD_END_NAMESPACE
