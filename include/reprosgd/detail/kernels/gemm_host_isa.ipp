// SPDX-License-Identifier: BSD-3-Clause
// The host GEMM for one instruction set: its vector type and register blocking, the fused
// multiply-add, the packing (gemm_host_pack.ipp) and the micro-kernel, plan and tile
// (gemm_host_tile.ipp). No include guard: gemm_host.hpp includes this file once per instruction set,
// inside namespace detail::gemm_host::<isa>, with REPROSGD_IMPL_GEMM_ISA set to the Isa's value
// (0: the translation unit's own set, 1: AVX2 + FMA, 2: AVX-512F). Every function carries
// REPROSGD_IMPL_GEMM_TARGET, the target attribute that lets the compiler use that set's
// instructions in it (nothing for the translation unit's own set). Why every instruction set gives
// the bits of the scalar reference: gemm_host_arch.hpp.

#if !defined(REPROSGD_IMPL_GEMM_ISA)
#error "gemm_host_isa.ipp is included by gemm_host.hpp with REPROSGD_IMPL_GEMM_ISA set"
#endif

// Vector width and register blocking follow the instruction set. MR rows x NV vectors of
// accumulators, plus NV vectors of B, one broadcast of A and one product temporary, must fit the
// register file: 32 registers with AVX-512 (12x2: 24+2+1+1), 16 registers with AVX/AVX2 and SSE
// (6x2: 12+2+1+1). REPROSGD_IMPL_GEMM_FMA: 2 = _mm512_fmadd_ps, 1 = _mm256_fmadd_ps, 0 = fmaf per
// lane. REPROSGD_IMPL_GEMM_AVX: the packing may use 8x8 AVX transposes.
#if REPROSGD_IMPL_GEMM_ISA == 2
#define REPROSGD_IMPL_GEMM_TARGET __attribute__((target("avx512f,avx2,fma")))
#define REPROSGD_IMPL_GEMM_LANES 16
#define REPROSGD_IMPL_GEMM_FMA 2
#define REPROSGD_IMPL_GEMM_AVX 1
#define REPROSGD_IMPL_GEMM_NAME "avx512f"
#elif REPROSGD_IMPL_GEMM_ISA == 1
#define REPROSGD_IMPL_GEMM_TARGET __attribute__((target("avx2,fma")))
#define REPROSGD_IMPL_GEMM_LANES 8
#define REPROSGD_IMPL_GEMM_FMA 1
#define REPROSGD_IMPL_GEMM_AVX 1
#define REPROSGD_IMPL_GEMM_NAME "avx2"
#else
#define REPROSGD_IMPL_GEMM_TARGET
#if defined(__AVX512F__)
#define REPROSGD_IMPL_GEMM_LANES 16
#define REPROSGD_IMPL_GEMM_FMA 2
#define REPROSGD_IMPL_GEMM_AVX 1
#define REPROSGD_IMPL_GEMM_NAME "avx512f"
#elif defined(__AVX__)
#define REPROSGD_IMPL_GEMM_LANES 8
#if defined(__FMA__)
#define REPROSGD_IMPL_GEMM_FMA 1
#else
#define REPROSGD_IMPL_GEMM_FMA 0
#endif
#define REPROSGD_IMPL_GEMM_AVX 1
#if defined(__AVX2__)
#define REPROSGD_IMPL_GEMM_NAME "avx2"
#else
#define REPROSGD_IMPL_GEMM_NAME "avx"
#endif
#else
#define REPROSGD_IMPL_GEMM_LANES 4
#define REPROSGD_IMPL_GEMM_FMA 0
#define REPROSGD_IMPL_GEMM_AVX 0
#if defined(__SSE2__)
#define REPROSGD_IMPL_GEMM_NAME "sse2"
#else
#define REPROSGD_IMPL_GEMM_NAME "generic"
#endif
#endif
#endif

inline constexpr Isa isa = static_cast<Isa>(REPROSGD_IMPL_GEMM_ISA);
inline constexpr int lanes = REPROSGD_IMPL_GEMM_LANES;
#if defined(REPROSGD_IMPL_GEMM_MR)  // tuning experiments: one micro-tile height for every set
inline constexpr int mr = REPROSGD_IMPL_GEMM_MR;
#else
inline constexpr int mr = lanes == 16 ? 12 : 6;  ///< rows of the micro-tile
#endif
#if defined(REPROSGD_IMPL_GEMM_NV)
inline constexpr int nv = REPROSGD_IMPL_GEMM_NV;
#else
inline constexpr int nv = 2;  ///< vectors across the micro-tile's columns
#endif
inline constexpr int nr = nv * lanes;  ///< columns of the micro-tile
/// Target depth of a K block: 32 KiB of packed B micro-panel (kc x nr floats, 512 deep with AVX2).
/// Deeper than L1 alone would suggest: the micro-panel streams from L2 well (it is packed just in
/// time), and every extra K block costs a store and reload of all of C. Measured on Zen 3 against
/// 16 KiB: +5-10% on 128x512x784 and 128x512x512.
#if defined(REPROSGD_IMPL_GEMM_KC)
inline constexpr int kc_target = REPROSGD_IMPL_GEMM_KC;
#else
inline constexpr int kc_target = (32 * 1024) / (nr * static_cast<int>(sizeof(float)));
#endif
inline constexpr int mc_max = mc_strips * mr;

/// The kernel's name, e.g. "avx512f, 16 lanes, 12x32 micro-tile, FMA instructions".
inline std::string kernel_name() {
  return std::string(REPROSGD_IMPL_GEMM_NAME) + ", " + std::to_string(lanes) + " lanes, " + std::to_string(mr) +
         "x" + std::to_string(nr) + " micro-tile, " + (REPROSGD_IMPL_GEMM_FMA ? "FMA instructions" : "fmaf per lane");
}

typedef float vfloat __attribute__((vector_size(lanes * sizeof(float))));

REPROSGD_IMPL_GEMM_TARGET inline vfloat load(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
REPROSGD_IMPL_GEMM_TARGET inline void store(float* p, vfloat v) { std::memcpy(p, &v, sizeof(v)); }
#if REPROSGD_IMPL_GEMM_AVX
/// A non-temporal store of one vector to a vector-aligned p: written past the caches, without
/// first reading the line.
REPROSGD_IMPL_GEMM_TARGET inline void stream_store(float* p, vfloat v) {
#if REPROSGD_IMPL_GEMM_LANES == 16
  _mm512_stream_ps(p, v);
#else
  _mm256_stream_ps(p, v);
#endif
}
#endif

/// acc + b * a in every lane with one rounding (IEEE fusedMultiplyAdd): the FMA instruction where
/// the kernel may use it, else fmaf per lane (glibc's fmaf is correctly rounded, using the CPU's
/// FMA when it has one), so every kernel gives the same bits.
REPROSGD_IMPL_GEMM_TARGET __attribute__((always_inline)) inline vfloat fused_multiply_add(vfloat b, float a,
                                                                                          vfloat acc) {
#if REPROSGD_IMPL_GEMM_FMA == 2
  static_assert(lanes == 16);
  return _mm512_fmadd_ps(b, _mm512_set1_ps(a), acc);
#elif REPROSGD_IMPL_GEMM_FMA == 1
  static_assert(lanes == 8);
  return _mm256_fmadd_ps(b, _mm256_set1_ps(a), acc);
#else
  vfloat out;
  for (int l = 0; l < lanes; ++l) out[l] = __builtin_fmaf(b[l], a, acc[l]);
  return out;
#endif
}

#include <reprosgd/detail/kernels/gemm_host_pack.ipp>
#include <reprosgd/detail/kernels/gemm_host_tile.ipp>

#undef REPROSGD_IMPL_GEMM_TARGET
#undef REPROSGD_IMPL_GEMM_LANES
#undef REPROSGD_IMPL_GEMM_FMA
#undef REPROSGD_IMPL_GEMM_AVX
#undef REPROSGD_IMPL_GEMM_NAME
