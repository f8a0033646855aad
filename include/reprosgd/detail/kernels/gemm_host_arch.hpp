// SPDX-License-Identifier: BSD-3-Clause
/// @file The host GEMM's machine model, the part shared by every instruction set: the Operand view,
/// the tile plan, the tiling constants, the instruction sets a kernel exists for (Isa) and which of
/// them this CPU runs. The per-instruction-set part (vector width, register blocking, the fused
/// multiply-add, packing, the micro-kernel) is gemm_host_isa.ipp, compiled once per Isa.
#pragma once

// Plain C++ on raw pointers (no Kokkos), like the rest of the host GEMM (gemm_host.hpp).
//
// Why every variant of the host GEMM gives the bits of the scalar reference loop
//     float acc = 0.0f; for (p = 0; p < K; ++p) acc = fmaf(a(i,p), b(p,j), acc);  C(i,j) = acc;
// - Each output element lives in one vector lane of one accumulator register and sees exactly
//   the reference's operations: one fused multiply-add (a single rounding of the exact
//   a(i,p)*b(p,j) + acc), p ascending. Lanes never interact (no horizontal sums), so the vector
//   width (SSE, AVX2, AVX-512) and the register blocking cannot change a result, and neither can
//   which of the compiled kernels the CPU runs.
// - The FMA is explicit (an intrinsic, or fmaf per lane where the kernel is compiled without FMA
//   instructions): IEEE fusedMultiplyAdd is correctly rounded, so hardware FMA, glibc's fmaf and
//   the device's __fmaf_rn give the same bits. Contraction by the compiler stays off
//   (-ffp-contract=off): only the operations written as an FMA are fused.
// - Blocking over K stores the float accumulator into C and reloads it for the next K block: the
//   stored value is the accumulator itself, so the chain continues with the same operations.
// - The first K block starts from +0.0f, as the reference does (fma(a, b, +0) of an exact -0
//   product is +0: starting from the first product instead would keep the -0).
// - Padding rows/columns of the packed panels are zeros whose results are discarded.

#include <reprosgd/detail/vector_alignment.hpp>
#include <reprosgd/version.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#if __has_include(<unistd.h>)
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

// Kernels for instruction sets above the translation unit's own, chosen at run time (one binary
// fast on an AVX2 CPU and on an AVX-512 one): on x86 with GCC or Clang, whose target attribute
// compiles a function for an extension the rest of the program does not assume. Not in CUDA's or
// HIP's host pass (their host GEMM is not what they are for, and each kernel costs compile time).
// Define REPROSGD_GEMM_NO_RUNTIME_DISPATCH to keep only the translation unit's own kernel.
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__CUDACC__) && !defined(__HIPCC__) && !defined(REPROSGD_GEMM_NO_RUNTIME_DISPATCH)
#if !(defined(__AVX2__) && defined(__FMA__))
#define REPROSGD_IMPL_GEMM_AVX2_KERNEL 1
#endif
#if !defined(__AVX512F__)
#define REPROSGD_IMPL_GEMM_AVX512_KERNEL 1
#endif
#endif

REPROSGD_BEGIN_NAMESPACE
namespace detail::gemm_host {

/// The instruction sets a host GEMM kernel is compiled for. `native` is the translation unit's own
/// (whatever -march says); `avx2` (AVX2 + FMA) and `avx512` (AVX-512F) exist where the translation
/// unit's own set lacks them (REPROSGD_IMPL_GEMM_AVX2_KERNEL, ..._AVX512_KERNEL) and run only on a
/// CPU that has them. Every one gives the same bits.
enum class Isa : int { native = 0, avx2 = 1, avx512 = 2 };

/// Whether this build has a kernel for `isa` and this CPU can run it.
inline bool runs_here(Isa isa) {
  switch (isa) {
    case Isa::native:
      return true;
#if defined(REPROSGD_IMPL_GEMM_AVX2_KERNEL)
    case Isa::avx2: {
      // __builtin_cpu_init first: a GEMM called from a static initialiser may run before libgcc's
      // own CPU probe. __builtin_cpu_supports also checks that the OS saves the registers (XCR0).
      static const bool has = (__builtin_cpu_init(), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
      return has;
    }
#endif
#if defined(REPROSGD_IMPL_GEMM_AVX512_KERNEL)
    case Isa::avx512: {
      static const bool has = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") &&
                                                         __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
      return has;
    }
#endif
    default:
      return false;
  }
}

/// The fastest kernel this CPU runs: the widest instruction set compiled in that it has.
inline Isa best_isa() {
  static const Isa best = runs_here(Isa::avx512) ? Isa::avx512 : runs_here(Isa::avx2) ? Isa::avx2 : Isa::native;
  return best;
}

/// Caps on a tile: at most mc_strips micro-tile rows (and see a_block_bytes) by nc_max columns. B
/// is packed one micro-panel at a time, so only the A block needs to stay in L2.
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
/// Bytes of packed A block (mc x kc) a tile aims for, so that it stays in L2 with the B micro-panel
/// and C: with K blocks of 512 that is about 192 rows, with K = 128 (the weight gradients) the cap
/// of mc_strips rows. Fewer, taller tiles pack each B micro-panel fewer times (measured on 784x512x128:
/// 0.79-0.86 -> 0.99-1.03 of OpenBLAS with 384-row instead of 144-row tiles).
/// A row-major B is read in place (not packed) when a tile has at most this many row strips: each
/// micro-panel is then read by so few micro-kernel calls that copying it costs more than reading it
/// at its row stride (the first call brings it into L1/L2, the next ones find it there).
#ifndef REPROSGD_IMPL_GEMM_DIRECT_B_MAX_STRIPS
#define REPROSGD_IMPL_GEMM_DIRECT_B_MAX_STRIPS 3
#endif
/// A C of at least this many bytes computed in one K block (every element finished by one
/// micro-kernel call) is written with non-temporal stores where the kernel has them (AVX, AVX-512):
/// C is then too large to be read back from L2 (a weight gradient, 784x512 or 512x512 floats), and
/// an ordinary store first reads each line it writes. In training the rows of the micro-batch
/// gradients are cold when the next step writes them: tn 784x512x32 ran at 65% of its speed on a
/// C in cache, and at 98% with these stores (gemm_bench with 16 C buffers in turn, Zen 4).
#ifndef REPROSGD_IMPL_GEMM_STREAM_C_MIN_BYTES
#define REPROSGD_IMPL_GEMM_STREAM_C_MIN_BYTES (512 * 1024)
#endif
#ifndef REPROSGD_IMPL_GEMM_A_BLOCK_BYTES
#define REPROSGD_IMPL_GEMM_A_BLOCK_BYTES (384 * 1024)
#endif
inline constexpr int mc_strips = REPROSGD_IMPL_GEMM_MC_STRIPS;
inline constexpr int direct_b_max_strips = REPROSGD_IMPL_GEMM_DIRECT_B_MAX_STRIPS;
inline constexpr int nc_max = REPROSGD_IMPL_GEMM_NC;
inline constexpr int pack_a_min_strips = REPROSGD_IMPL_GEMM_PACK_A_MIN_STRIPS;
inline constexpr int a_block_bytes = REPROSGD_IMPL_GEMM_A_BLOCK_BYTES;
inline constexpr long stream_c_min_bytes = REPROSGD_IMPL_GEMM_STREAM_C_MIN_BYTES;

/// On a CPU whose last-level cache holds a C of this size at least llc_share times over (the
/// 260 MiB L3 of an Intel Xeon family 6 model 207 VM: a C of 1.6 MB 170 times), a weight gradient
/// written with ordinary stores is still in L3 when the Exact sum reads it, and streaming it past
/// the caches sends that read to memory: there the micro-batch-32 training step ran 6.5% slower
/// with the stores (bench/README.md, "C written past the caches"), where the 32 MiB L3 of a Zen 4
/// CCD gained from them. 0 turns the cache-size rule off.
#ifndef REPROSGD_IMPL_GEMM_STREAM_C_LLC_SHARE
#define REPROSGD_IMPL_GEMM_STREAM_C_LLC_SHARE 64
#endif
inline constexpr long stream_c_llc_share = REPROSGD_IMPL_GEMM_STREAM_C_LLC_SHARE;

/// The last-level cache's size in bytes as the C library reports it (glibc reads CPUID), 0 when
/// unknown.
inline long last_level_cache_bytes() noexcept {
  long bytes = 0;
#if defined(_SC_LEVEL3_CACHE_SIZE)
  bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
#if defined(_SC_LEVEL2_CACHE_SIZE)
  if (bytes <= 0) bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return bytes > 0 ? bytes : 0;
}

/// The smallest C that make_plan streams on this CPU: stream_c_min_bytes, or the last-level
/// cache's llc_share-th part when that is larger. Pure data movement: the bits never depend on it.
inline long stream_c_threshold() noexcept {
  static const long bytes = [] {
    const long share = stream_c_llc_share > 0 ? last_level_cache_bytes() / stream_c_llc_share : 0;
    return share > stream_c_min_bytes ? share : stream_c_min_bytes;
  }();
  return bytes;
}
inline constexpr std::size_t alignment = vector_alignment;

/// A read-only matrix operand in logical (row, column) coordinates: element (r, c) is
/// data[r * rs + c * cs]. Transposition is a swap of the two strides.
struct Operand {
  const float* data;
  std::ptrdiff_t rs;
  std::ptrdiff_t cs;
};

/// How C is cut into tiles (the unit of parallel work) and K into blocks, for the kernel of one
/// instruction set (its micro-tile is mr x nr). Any plan gives the same bits; the plan only decides
/// speed.
struct Plan {
  Isa isa;
  int mr, nr;              ///< the kernel's micro-tile
  bool transposed;         ///< computes C^T = op(B)^T op(A)^T (m, n and the strips are C^T's)
  int m, n, k;
  int strips_m, strips_n;  ///< micro-tile rows / columns of C
  int tiles_m, tiles_n;    ///< tiles along M and N; tile t is (t / tiles_n, t % tiles_n)
  int kc;                  ///< K block depth
  int max_strips_m, max_strips_n;
  bool stream_c;           ///< whole micro-tiles of C are written with non-temporal stores (see stream_c_min_bytes)

  [[nodiscard]] int tiles() const { return tiles_m * tiles_n; }
  /// Floats of packing buffer one tile needs (plus alignment slack).
  [[nodiscard]] std::size_t packing_floats() const {
    return static_cast<std::size_t>(max_strips_m * mr + nr) * static_cast<std::size_t>(kc) +
           2 * alignment / sizeof(float);
  }
  /// Floats of buffer one tile needs: the packing, and a transposed plan's tile of C^T.
  [[nodiscard]] std::size_t buffer_floats() const {
    return packing_floats() + (transposed ? static_cast<std::size_t>(max_strips_m * mr) * (max_strips_n * nr) +
                                                alignment / sizeof(float)
                                          : 0);
  }
  [[nodiscard]] int strip_begin_m(int tm) const {
    return static_cast<int>(static_cast<long long>(tm) * strips_m / tiles_m);
  }
  [[nodiscard]] int strip_begin_n(int tn) const {
    return static_cast<int>(static_cast<long long>(tn) * strips_n / tiles_n);
  }
};

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

inline float* align_up(void* p) {
  const auto u = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<float*>((u + alignment - 1) & ~static_cast<std::uintptr_t>(alignment - 1));
}

}  // namespace detail::gemm_host
REPROSGD_END_NAMESPACE
