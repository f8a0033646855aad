// SPDX-License-Identifier: BSD-3-Clause
/// @file Host GEMM building blocks: panel packing, the register-blocked micro-kernel and the tile plan.
#pragma once

// This header is plain C++ on raw pointers (no Kokkos), so that the micro-kernel can be compiled and
// checked on its own; kernels/gemm.hpp drives it from a Kokkos TeamPolicy.
//
// Why every variant here gives the bits of the scalar reference loop
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

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

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

/// C[0:mr, 0:nr] (row stride ldc) = (first ? 0 : C) followed by kc steps of acc = fma(a, b, acc), where
/// step p reads A(r, p) = ap[r*ars + p*acs] and the packed B micro-panel row bp[p*nr + 0:nr].
/// Packed A micro-panels have ars = 1, acs = mr (compile-time when Packed, so the compiler can
/// use constant offsets); A read in place has its own strides.
// Rows < mr computes only the first Rows rows of the micro-tile (the last, partial row strip of C:
// 128 = 21 x 6 + 2 rows spends a third of a full call on 2 rows instead of a whole one).
// The body is inlined only into micro_kernel (and its FMA clone), never into a larger caller.
template <bool Packed, int Rows>
__attribute__((always_inline)) inline void micro_kernel_body(int kc, const float* __restrict ap, std::ptrdiff_t ars,
                                                             std::ptrdiff_t acs, const float* __restrict bp,
                                                             float* __restrict c, std::ptrdiff_t ldc, bool first,
                                                             const float* __restrict bias) {
  static_assert(Rows >= 1 && Rows <= mr);
  if constexpr (Packed) {
    ars = 1;
    acs = mr;
  }
  vfloat acc[Rows][nv];
  if (first) {
#pragma GCC unroll 32
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < nv; ++v) acc[r][v] = vfloat{};  // +0.0f in every lane
  } else {
#pragma GCC unroll 32
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < nv; ++v) acc[r][v] = load(c + r * ldc + v * lanes);
  }
  for (int p = 0; p < kc; ++p) {
    vfloat b[nv];
#pragma GCC unroll 4
    for (int v = 0; v < nv; ++v) b[v] = load(bp + v * lanes);
#pragma GCC unroll 32
    for (int r = 0; r < Rows; ++r) {
      const float a = ap[r * ars];
#pragma GCC unroll 4
      for (int v = 0; v < nv; ++v) {
        // The scalar a is broadcast to every lane; fma(b, a, acc) == fma(a, b, acc) exactly.
        acc[r][v] = fused_multiply_add(b[v], a, acc[r][v]);
      }
    }
    ap += acs;
    bp += nr;
  }
  if (bias) {
    // Epilogue of the last K block: the finished sum plus the bias, one rounded add, exactly as a
    // separate pass y(i,j) = y(i,j) + b(j) would do it.
    vfloat bv[nv];
#pragma GCC unroll 4
    for (int v = 0; v < nv; ++v) bv[v] = load(bias + v * lanes);
#pragma GCC unroll 32
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < nv; ++v) acc[r][v] = acc[r][v] + bv[v];
  }
#pragma GCC unroll 32
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < nv; ++v) store(c + r * ldc + v * lanes, acc[r][v]);
}

#if !defined(__FMA__) && (defined(__x86_64__) || defined(__i386__))
// Built without FMA instructions (no -march, or -march=x86-64): fused_multiply_add falls back to
// fmaf per lane, a library call per element. A clone of the kernel compiled for the FMA extension
// lets the compiler expand the same __builtin_fmaf into FMA instructions; it is taken when the CPU
// has them (every x86-64 since Haswell and Piledriver). Same operation, so the same bits.
#define REPROSGD_IMPL_GEMM_FMA_CLONE 1
template <bool Packed, int Rows>
__attribute__((noinline, target("fma"))) void micro_kernel_fma(int kc, const float* ap, std::ptrdiff_t ars,
                                                               std::ptrdiff_t acs, const float* bp, float* c,
                                                               std::ptrdiff_t ldc, bool first, const float* bias) {
  micro_kernel_body<Packed, Rows>(kc, ap, ars, acs, bp, c, ldc, first, bias);
}
inline bool cpu_has_fma() {
  // __builtin_cpu_init first: a GEMM called from a static initialiser may run before libgcc's own
  // CPU probe, and the flag is read only once.
  static const bool has = (__builtin_cpu_init(), __builtin_cpu_supports("fma"));
  return has;
}
#endif

// Never inlined: inlined into a large caller (the Kokkos functor, with the packing loops) GCC 12
// spilled 8 of the 12 accumulators to the stack in the inner loop and the GEMM ran at half speed
// (40 against 77 GFLOP/s on 128x512x784); on its own it keeps all of them in registers.
template <bool Packed, int Rows = mr>
__attribute__((noinline)) void micro_kernel(int kc, const float* ap, std::ptrdiff_t ars, std::ptrdiff_t acs,
                                            const float* bp, float* c, std::ptrdiff_t ldc, bool first,
                                            const float* bias = nullptr) {
#if defined(REPROSGD_IMPL_GEMM_FMA_CLONE)
  if (cpu_has_fma()) return micro_kernel_fma<Packed, Rows>(kc, ap, ars, acs, bp, c, ldc, first, bias);
#endif
  micro_kernel_body<Packed, Rows>(kc, ap, ars, acs, bp, c, ldc, first, bias);
}

/// The micro-kernel this process runs, for `train_mlp --version`: the instruction set the
/// translation unit was compiled for (vector width and micro-tile) and how the FMA is done, which in
/// a build without FMA instructions is chosen at run time (the FMA clone when the CPU has FMA).
inline std::string kernel_name() {
#if defined(__AVX512F__)
  std::string s = "avx512f";
#elif defined(__AVX2__)
  std::string s = "avx2";
#elif defined(__AVX__)
  std::string s = "avx";
#elif defined(__SSE2__)
  std::string s = "sse2";
#else
  std::string s = "generic";
#endif
  s += ", " + std::to_string(lanes) + " lanes, " + std::to_string(mr) + "x" + std::to_string(nr) + " micro-tile, ";
#if defined(REPROSGD_IMPL_GEMM_FMA_CLONE)
  s += cpu_has_fma() ? "FMA clone (chosen at run time: the CPU has FMA)"
                     : "fmaf per lane (chosen at run time: the CPU has no FMA)";
#elif defined(__AVX512F__) || defined(__FMA__)
  s += "FMA instructions";
#else
  s += "fmaf per lane";
#endif
  return s;
}

/// The micro-kernel on the first `rows` (1 to mr) rows of a tile with all nr columns: one
/// instantiation per row count, picked from a table.
template <bool Packed, std::size_t... R>
constexpr auto micro_kernels_by_rows(std::index_sequence<R...>) {
  return std::array{&micro_kernel<Packed, static_cast<int>(R) + 1>...};
}
template <bool Packed>
inline void micro_kernel_rows(int rows, int kc, const float* ap, std::ptrdiff_t ars, std::ptrdiff_t acs,
                              const float* bp, float* c, std::ptrdiff_t ldc, bool first, const float* bias) {
  static constexpr auto table = micro_kernels_by_rows<Packed>(std::make_index_sequence<mr>{});
  table[static_cast<std::size_t>(rows - 1)](kc, ap, ars, acs, bp, c, ldc, first, bias);
}

/// The micro-kernel on a tile with fewer than nr columns (and any rows): runs on a full-size
/// buffer and copies only the valid part in and out.
template <bool Packed>
inline void micro_kernel_edge(int kc, const float* ap, std::ptrdiff_t ars, std::ptrdiff_t acs, const float* bp,
                              float* c, std::ptrdiff_t ldc, bool first, int rows, int cols,
                              const float* bias = nullptr) {
  alignas(alignment) float tile[mr * nr];
  alignas(alignment) float bias_tile[nr];
  if (!first) {
    std::fill(tile, tile + mr * nr, 0.0f);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < cols; ++j) tile[r * nr + j] = c[r * ldc + j];
  }
  if (bias) {
    std::fill(bias_tile, bias_tile + nr, 0.0f);
    for (int j = 0; j < cols; ++j) bias_tile[j] = bias[j];
  }
  micro_kernel<Packed>(kc, ap, ars, acs, bp, tile, nr, first, bias ? bias_tile : nullptr);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < cols; ++j) c[r * ldc + j] = tile[r * nr + j];
}

#if defined(__AVX__)
/// Transposes an 8x8 block: out[c][r] = rows[r][c] for r, c < 8 (pure data movement, used by the
/// packing routines when an operand's contiguous direction is the other one).
inline void transpose8(const float* const rows[8], __m256 out[8]) {
  const __m256 r0 = _mm256_loadu_ps(rows[0]), r1 = _mm256_loadu_ps(rows[1]);
  const __m256 r2 = _mm256_loadu_ps(rows[2]), r3 = _mm256_loadu_ps(rows[3]);
  const __m256 r4 = _mm256_loadu_ps(rows[4]), r5 = _mm256_loadu_ps(rows[5]);
  const __m256 r6 = _mm256_loadu_ps(rows[6]), r7 = _mm256_loadu_ps(rows[7]);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  out[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  out[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  out[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  out[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  out[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  out[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  out[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  out[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}
#endif

/// Packs rows [i0, i0+strips*mr) x columns [p0, p0+kc) of the logical M x K matrix A into
/// strips of mr rows: out[s*mr*kc + p*mr + r] = A(i0 + s*mr + r, p0 + p), zero beyond row M.
inline void pack_a(const Operand& a, int m, int i0, int strips, int p0, int kc, float* out) {
  for (int s = 0; s < strips; ++s) {
    float* dst = out + static_cast<std::ptrdiff_t>(s) * mr * kc;
    const int row0 = i0 + s * mr;
    const int rows = std::min(mr, m - row0);
    if (rows == mr && a.cs == 1) {  // A row-major: mr sequential read streams, sequential writes
      const float* src[mr];
      for (int r = 0; r < mr; ++r) src[r] = a.data + (row0 + r) * a.rs + p0;
      int p = 0;
#if defined(__AVX__)
      if constexpr (mr == 6) {
        // 8 columns at a time: transpose 6 rows (plus 2 ignored) and store 6 floats per column.
        for (; p + 8 <= kc; p += 8) {
          const float* rows8[8] = {src[0] + p, src[1] + p, src[2] + p, src[3] + p,
                                   src[4] + p, src[5] + p, src[5] + p, src[5] + p};
          __m256 t[8];
          transpose8(rows8, t);
#pragma GCC unroll 8
          for (int q = 0; q < 8; ++q) {
            float* d = dst + (p + q) * mr;
            _mm_storeu_ps(d, _mm256_castps256_ps128(t[q]));
            _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), _mm256_extractf128_ps(t[q], 1));
          }
        }
      }
#endif
      for (; p < kc; ++p)
#pragma GCC unroll 32
        for (int r = 0; r < mr; ++r) dst[p * mr + r] = src[r][p];
    } else if (rows == mr && a.rs == 1) {  // A stored transposed (K x M): mr consecutive values per p
      for (int p = 0; p < kc; ++p) std::memcpy(dst + p * mr, a.data + (p0 + p) * a.cs + row0, sizeof(float) * mr);
    } else {
      for (int p = 0; p < kc; ++p)
        for (int r = 0; r < mr; ++r)
          dst[p * mr + r] = r < rows ? a.data[(row0 + r) * a.rs + (p0 + p) * a.cs] : 0.0f;
    }
  }
}

/// Packs rows [p0, p0+kc) x columns [j0, j0+strips*nr) of the logical K x N matrix B into strips
/// of nr columns: out[s*nr*kc + p*nr + c] = B(p0 + p, j0 + s*nr + c), zero beyond column N.
inline void pack_b(const Operand& b, int n, int j0, int strips, int p0, int kc, float* out) {
  const int full = std::min(strips, (n - j0) / nr);  // strips with nr valid columns
  if (b.cs == 1) {
    // B row-major: read each row segment sequentially and deal it out to the strips (reading a
    // strip at a time would walk B with the row stride, which defeats the caches).
    for (int p = 0; p < kc; ++p) {
      const float* src = b.data + (p0 + p) * b.rs + j0;
      float* dst = out + p * nr;
      for (int s = 0; s < full; ++s)
        std::memcpy(dst + static_cast<std::ptrdiff_t>(s) * nr * kc, src + s * nr, sizeof(float) * nr);
    }
  } else if (b.rs == 1) {
    // B stored transposed (N x K): each stored row is one column of a strip, contiguous in p.
    for (int s = 0; s < full; ++s) {
      float* dst = out + static_cast<std::ptrdiff_t>(s) * nr * kc;
      int p_done = 0;
#if defined(__AVX__)
      if constexpr (nr % 8 == 0) {
        // 8 x 8 blocks: 8 stored rows (columns of the strip) by 8 values of p, transposed.
        const int p_end = kc - kc % 8;
        for (int jb = 0; jb < nr; jb += 8) {
          const float* rows8[8];
          for (int r = 0; r < 8; ++r) rows8[r] = b.data + (j0 + s * nr + jb + r) * b.cs + p0;
          for (int p = 0; p < p_end; p += 8) {
            const float* at[8];
#pragma GCC unroll 8
            for (int r = 0; r < 8; ++r) at[r] = rows8[r] + p;
            __m256 t[8];
            transpose8(at, t);
#pragma GCC unroll 8
            for (int q = 0; q < 8; ++q) _mm256_storeu_ps(dst + (p + q) * nr + jb, t[q]);
          }
        }
        p_done = p_end;
      }
#endif
      for (int j = 0; j < nr; ++j) {
        const float* src = b.data + (j0 + s * nr + j) * b.cs + p0;
        for (int p = p_done; p < kc; ++p) dst[p * nr + j] = src[p];
      }
    }
  }
  // The remaining strips (the partial one, zero-padded, or all of them for other strides).
  for (int s = (b.cs == 1 || b.rs == 1) ? full : 0; s < strips; ++s) {
    float* dst = out + static_cast<std::ptrdiff_t>(s) * nr * kc;
    const int col0 = j0 + s * nr;
    const int cols = std::min(nr, n - col0);
    for (int p = 0; p < kc; ++p)
      for (int j = 0; j < nr; ++j) dst[p * nr + j] = j < cols ? b.data[(p0 + p) * b.rs + (col0 + j) * b.cs] : 0.0f;
  }
}

/// How C is cut into tiles (the unit of parallel work) and K into blocks. Any plan gives the same
/// bits; the plan only decides speed.
struct Plan {
  int m, n, k;
  int strips_m, strips_n;  ///< micro-tile rows / columns of C
  int tiles_m, tiles_n;    ///< tiles along M and N; tile t is (t / tiles_n, t % tiles_n)
  int kc;                  ///< K block depth
  int max_strips_m, max_strips_n;

  [[nodiscard]] int tiles() const { return tiles_m * tiles_n; }
  /// Floats of packing buffer one tile needs (plus alignment slack).
  [[nodiscard]] std::size_t buffer_floats() const {
    return static_cast<std::size_t>(max_strips_m * mr + nr) * static_cast<std::size_t>(kc) +
           2 * alignment / sizeof(float);
  }
  [[nodiscard]] int strip_begin_m(int tm) const {
    return static_cast<int>(static_cast<long long>(tm) * strips_m / tiles_m);
  }
  [[nodiscard]] int strip_begin_n(int tn) const {
    return static_cast<int>(static_cast<long long>(tn) * strips_n / tiles_n);
  }
};

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

/// A plan for an M x N x K product on `threads` threads: tiles no larger than nc_max columns and
/// mc_max rows (fewer when the A block mc x kc would exceed a_block_bytes),
/// at least `threads` of them when C is large enough, and a multiple of `threads` when cheap, so
/// the threads get equal work; strips are spread evenly over the tiles.
inline Plan make_plan(int m, int n, int k, int threads) {
  Plan pl{};
  pl.m = m;
  pl.n = n;
  pl.k = k;
  pl.strips_m = std::max(1, ceil_div(m, mr));
  pl.strips_n = std::max(1, ceil_div(n, nr));
  const int kblocks = std::max(1, ceil_div(k, kc_target));
  pl.kc = std::max(1, ceil_div(k, kblocks));
  const int mc_strips = std::clamp(a_block_bytes / (pl.kc * mr * static_cast<int>(sizeof(float))), 1, mc_max / mr);
  pl.tiles_m = ceil_div(pl.strips_m, mc_strips);
  pl.tiles_n = ceil_div(pl.strips_n, std::max(1, nc_max / nr));
  threads = std::max(1, threads);
  // Enough tiles for every thread: split the dimension with more strips per tile.
  while (pl.tiles_m * pl.tiles_n < threads) {
    const bool can_m = pl.tiles_m < pl.strips_m;
    const bool can_n = pl.tiles_n < pl.strips_n;
    if (!can_m && !can_n) break;
    if (can_n && (!can_m || pl.strips_n * pl.tiles_m >= pl.strips_m * pl.tiles_n))
      ++pl.tiles_n;
    else
      ++pl.tiles_m;
  }
  // Balance: make the tile count a multiple of the thread count if a few more splits allow it.
  if (threads > 1 && pl.tiles() % threads != 0) {
    for (int extra = 1; extra < threads; ++extra) {
      if (pl.tiles_n + extra <= pl.strips_n && (pl.tiles_m * (pl.tiles_n + extra)) % threads == 0) {
        pl.tiles_n += extra;
        break;
      }
      if (pl.tiles_m + extra <= pl.strips_m && ((pl.tiles_m + extra) * pl.tiles_n) % threads == 0) {
        pl.tiles_m += extra;
        break;
      }
    }
  }
  pl.max_strips_m = ceil_div(pl.strips_m, pl.tiles_m);
  pl.max_strips_n = ceil_div(pl.strips_n, pl.tiles_n);
  return pl;
}

inline float* align_up(void* p) {
  const auto u = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<float*>((u + alignment - 1) & ~static_cast<std::uintptr_t>(alignment - 1));
}

/// Computes tile `t` of C = A * B (logical shapes M x K and K x N) completely, all K blocks in
/// ascending order; with `bias` (N floats) the last K block adds bias[j] to each finished element.
/// `buffer` holds at least plan.buffer_floats() floats.
inline void compute_tile(const Plan& pl, int t, const Operand& a, const Operand& b, float* c,
                         std::ptrdiff_t ldc, float* buffer, const float* bias = nullptr) {
  const int tm = t / pl.tiles_n;
  const int tn = t % pl.tiles_n;
  const int sm0 = pl.strip_begin_m(tm), sm1 = pl.strip_begin_m(tm + 1);
  const int sn0 = pl.strip_begin_n(tn), sn1 = pl.strip_begin_n(tn + 1);
  const int i0 = sm0 * mr, j0 = sn0 * nr;
  const int i1 = std::min(pl.m, sm1 * mr), j1 = std::min(pl.n, sn1 * nr);
  if (i0 >= i1 || j0 >= j1) return;
  if (pl.k == 0) {  // empty sum: the reference leaves acc = +0.0f (then the bias is added)
    for (int i = i0; i < i1; ++i)
      for (int j = j0; j < j1; ++j) c[i * ldc + j] = bias ? 0.0f + bias[j] : 0.0f;
    return;
  }
  // A is packed once per K block into MR-row strips that every column strip of the tile reuses. In
  // a narrow tile (few column strips, e.g. N = 10) A is read in place instead, where the copy
  // would not pay for itself: row-major (gemm_nn, gemm_nt) or transposed (gemm_tn: the MR values
  // of a step are adjacent, the steps a row apart); then only a partial last row strip
  // (rows < MR) is packed, zero-padded.
  const bool direct_a = (a.cs == 1 || a.rs == 1) && sn1 - sn0 < pack_a_min_strips;
  float* abuf = align_up(buffer);
  float* bbuf = align_up(abuf + static_cast<std::ptrdiff_t>(direct_a ? 1 : pl.max_strips_m) * mr * pl.kc);
  const int last_sm = pl.m / mr;  // strips from here on are partial
  for (int p0 = 0; p0 < pl.k; p0 += pl.kc) {
    const int kc = std::min(pl.kc, pl.k - p0);
    const bool first = p0 == 0;
    const bool last = p0 + kc == pl.k;
    if (!direct_a)
      pack_a(a, pl.m, i0, sm1 - sm0, p0, kc, abuf);
    else if (sm1 > last_sm)
      pack_a(a, pl.m, last_sm * mr, 1, p0, kc, abuf);
    for (int sn = sn0; sn < sn1; ++sn) {
      const int j = sn * nr;
      const int cols = std::min(nr, pl.n - j);
      // The B micro-panel is packed just before the row strips use it, so it is hot in L1.
      pack_b(b, pl.n, j, 1, p0, kc, bbuf);
      const float* bp = bbuf;
      const float* bias_j = last && bias ? bias + j : nullptr;
      // While the row strips run, prefetch the rows of the next B micro-panel: a row-major B is
      // read NR floats per row at the row stride, a pattern the hardware prefetcher follows poorly
      // (without this, packing B was ~6% of a training step, stalled on L3).
      const bool prefetch_b = b.cs == 1 && sn + 1 < sn1;
      const int prefetch_rows = ceil_div(kc, sm1 - sm0);
      const float* next_b = b.data + static_cast<std::ptrdiff_t>(p0) * b.rs + j + nr;
      for (int sm = sm0; sm < sm1; ++sm) {
        const int i = sm * mr;
        const int rows = std::min(mr, pl.m - i);
        float* cp = c + i * ldc + j;
        if (prefetch_b) {
          const int q0 = (sm - sm0) * prefetch_rows, q1 = std::min(kc, q0 + prefetch_rows);
          for (int q = q0; q < q1; ++q) {
            __builtin_prefetch(next_b + static_cast<std::ptrdiff_t>(q) * b.rs, 0, 3);
            __builtin_prefetch(next_b + static_cast<std::ptrdiff_t>(q) * b.rs + nr - 1, 0, 3);
          }
        }
        if (direct_a && rows == mr) {
          const float* ap = a.data + i * a.rs + p0 * a.cs;
          if (cols == nr)
            micro_kernel<false>(kc, ap, a.rs, a.cs, bp, cp, ldc, first, bias_j);
          else
            micro_kernel_edge<false>(kc, ap, a.rs, a.cs, bp, cp, ldc, first, rows, cols, bias_j);
        } else {
          const float* ap = abuf + (direct_a ? 0 : static_cast<std::ptrdiff_t>(sm - sm0) * mr * kc);
          if (rows == mr && cols == nr)
            micro_kernel<true>(kc, ap, 1, mr, bp, cp, ldc, first, bias_j);
          else if (cols == nr)
            micro_kernel_rows<true>(rows, kc, ap, 1, mr, bp, cp, ldc, first, bias_j);
          else
            micro_kernel_edge<true>(kc, ap, 1, mr, bp, cp, ldc, first, rows, cols, bias_j);
        }
      }
    }
  }
}

}  // namespace detail::gemm_host
REPROSGD_END_NAMESPACE
