// SPDX-License-Identifier: BSD-3-Clause
/// @file Host GEMM: the register-blocked micro-kernel, the tile plan, and a tile computed from
/// packed panels. Plain C++ on raw pointers (no Kokkos), so that the micro-kernel can be compiled
/// and checked on its own; kernels/gemm.hpp drives it from a Kokkos TeamPolicy. Why every variant
/// gives the bits of the scalar reference loop: gemm_host_arch.hpp; the packing: gemm_host_pack.hpp.
#pragma once

#include <reprosgd/detail/kernels/gemm_host_arch.hpp>
#include <reprosgd/detail/kernels/gemm_host_pack.hpp>
#include <reprosgd/version.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

REPROSGD_BEGIN_NAMESPACE
namespace detail::gemm_host {

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
