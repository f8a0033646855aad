// SPDX-License-Identifier: BSD-3-Clause
/// @file Start-up self-test of the floating-point environment: no FTZ/DAZ, no FMA contraction, no excess precision, round-to-nearest.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>

#include <bit>
#include <cfenv>
#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <string>

#if defined(__SSE__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 1)
#include <xmmintrin.h>
#define REPROSGD_IMPL_HAS_MXCSR 1
#else
#define REPROSGD_IMPL_HAS_MXCSR 0
#endif

REPROSGD_BEGIN_NAMESPACE

// These functions have internal linkage (static) on purpose: the contraction and excess-precision
// probes must be compiled with the flags of the translation unit that calls them. As ordinary
// inline functions the linker would keep one copy from an arbitrary translation unit, and a check
// compiled with -ffp-contract=off would vouch for code compiled with -ffp-contract=fast.

namespace detail::fpenv {

// Bits of MXCSR (x86 SSE control/status register).
inline constexpr unsigned mxcsr_daz = 0x0040u;  // denormals-are-zero: subnormal inputs read as 0
inline constexpr unsigned mxcsr_ftz = 0x8000u;  // flush-to-zero: subnormal results written as 0

inline const char* rounding_name(int mode) {
  switch (mode) {
#ifdef FE_TONEAREST
    case FE_TONEAREST: return "to nearest";
#endif
#ifdef FE_UPWARD
    case FE_UPWARD: return "upward";
#endif
#ifdef FE_DOWNWARD
    case FE_DOWNWARD: return "downward";
#endif
#ifdef FE_TOWARDZERO
    case FE_TOWARDZERO: return "toward zero";
#endif
    default: return "unknown";
  }
}

inline void add(std::string& out, const std::string& problem) {
  if (!out.empty()) out += '\n';
  out += problem;
}

}  // namespace detail::fpenv

/**
 * Describes what in the current floating-point environment breaks bitwise reproducibility, one
 * problem per line; "" when all is fine. Cheap (a few dozen floating-point operations).
 *
 * Checks: FTZ and DAZ (MXCSR on x86, and functionally on every target: a subnormal product and a
 * subnormal operand must survive), FMA contraction of a*b+c in the calling translation unit
 * (through volatile operands whose fused result differs from the unfused one), excess precision
 * (FLT_EVAL_METHOD and a volatile 1 + 2^-24 - 1 in float, 1 + 2^-53 - 1 in double), and the
 * rounding mode (must be round-to-nearest).
 * @returns "" or the problems, each saying what is wrong and what to do.
 * Host only; not collective (each rank checks itself).
 */
[[nodiscard]] static inline std::string fp_environment_problems() {
  std::string out;
  bool ftz_reported = false;
  bool daz_reported = false;
#if REPROSGD_IMPL_HAS_MXCSR
  const unsigned csr = _mm_getcsr();
  // The control bits only: the low six bits are sticky exception flags that any earlier
  // computation may have raised, and would make the message vary from run to run.
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%04x", csr & ~0x3fu);
  if ((csr & detail::fpenv::mxcsr_ftz) != 0u) {
    detail::fpenv::add(out, std::string("flush-to-zero (FTZ) is on (MXCSR=") + hex +
                                ", bit 15): subnormal results become 0. It is set by code built with "
                                "-ffast-math/-Ofast (crtfastmath.o) or by a library; link without those "
                                "flags or clear it with _mm_setcsr(_mm_getcsr() & ~0x8040u)");
    ftz_reported = true;
  }
  if ((csr & detail::fpenv::mxcsr_daz) != 0u) {
    detail::fpenv::add(out, std::string("denormals-are-zero (DAZ) is on (MXCSR=") + hex +
                                ", bit 6): subnormal inputs are read as 0. It is set by code built with "
                                "-ffast-math/-Ofast (crtfastmath.o) or by a library; link without those "
                                "flags or clear it with _mm_setcsr(_mm_getcsr() & ~0x8040u)");
    daz_reported = true;
  }
#endif
  {
    // Functional checks: they also catch flush modes of other architectures (ARM FPCR.FZ, a GPU
    // runtime's host emulation) that have no MXCSR.
    volatile float tiny = 0x1p-126f;
    volatile float half = 0.5f;
    const float product = tiny * half;  // 2^-127, subnormal
    // Compared as bits: under DAZ a float comparison would read the subnormal product as zero.
    if (std::bit_cast<std::uint32_t>(product) != 0x00400000u && !ftz_reported) {
      detail::fpenv::add(out, "subnormal results are flushed to zero (2^-126f * 0.5f gave 0, expected 2^-127): "
                              "a flush-to-zero mode is on; link without -ffast-math/-Ofast and do not "
                              "enable flush-to-zero");
    }
    volatile float denorm = 0x1p-149f;
    volatile float scale = 0x1p23f;
    const float scaled = denorm * scale;  // 2^-126, normal
    if (std::bit_cast<std::uint32_t>(scaled) != 0x00800000u && !daz_reported) {
      detail::fpenv::add(out, "subnormal inputs are read as zero (2^-149f * 2^23f gave 0, expected 2^-126): "
                              "a denormals-are-zero mode is on; link without -ffast-math/-Ofast and do "
                              "not enable denormals-are-zero");
    }
  }
  // Excess precision first: an x87 evaluation also keeps the exact product of the contraction
  // probe, so a contraction report is only meaningful without it.
  bool excess = false;
  {
    volatile float one = 1.0f, tiny = 0x1p-24f;
    // In float, 1 + 2^-24 is a tie that rounds to 1 (or to 1 + 2^-23 upward), so the result is 0
    // (or 2^-23); only a wider intermediate keeps the exact 2^-24. The same in double with 2^-53.
    const float f = (one + tiny) - one;
    volatile double done = 1.0, dtiny = 0x1p-53;
    const double d = (done + dtiny) - done;
    excess = f == 0x1p-24f || d == 0x1p-53;
  }
  {
    // (1 + 2^-30)(1 - 2^-30) - 1 = -2^-60 exactly. Unfused, the product rounds to 1 (or to
    // 1 - 2^-53 when rounding down) and the result is 0 (or -2^-53); only a fused multiply-add
    // gives the exact -2^-60. In float: (1 + 2^-13)(1 - 2^-13) - 1 = -2^-26.
    // Comparing against the exact value keeps a directed rounding mode from looking like FMA.
    volatile double da = 0x1.00000004p0, db = 0x1.fffffff8p-1, dc = -1.0;
    const double dr = da * db + dc;
    volatile float fa = 0x1.0008p0f, fb = 0x1.fff8p-1f, fc = -1.0f;
    const float fr = fa * fb + fc;
    if (!excess && (dr == -0x1p-60 || fr == -0x1p-26f)) {
      detail::fpenv::add(out, "a*b+c is contracted into a fused multiply-add in the translation unit that "
                              "called this check ((1+2^-30)*(1-2^-30)-1 gave the exact -2^-60): compile "
                              "it with -ffp-contract=off (the ReproSGD::reprosgd CMake target adds it; "
                              "nvcc: --fmad=false) and without -ffp-contract=fast or -ffast-math");
    }
  }
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
  detail::fpenv::add(out, "FLT_EVAL_METHOD is " + std::to_string(FLT_EVAL_METHOD) +
                              ", not 0: float and double expressions are evaluated in a wider format "
                              "(x87); compile for SSE2 or newer (-mfpmath=sse, -msse2) or a 64-bit target");
#endif
  if (excess) {
    detail::fpenv::add(out, "intermediate results carry excess precision ((1 + 2^-24) - 1 in float or "
                            "(1 + 2^-53) - 1 in double kept the exact 2^-24 or 2^-53): compile for SSE2 or "
                            "newer (-mfpmath=sse) instead of x87");
  }
  const int mode = std::fegetround();
  if (mode != FE_TONEAREST) {
    detail::fpenv::add(out, std::string("the rounding mode is ") + detail::fpenv::rounding_name(mode) +
                                ", not to nearest: call std::fesetround(FE_TONEAREST) before training");
  }
  return out;
}

/**
 * Throws if the floating-point environment breaks bitwise reproducibility (see
 * fp_environment_problems() for the list of checks). Call it once at start-up, from a translation
 * unit compiled with the flags of the training code.
 * @throws reprosgd::reproducibility_error "reprosgd::check_fp_environment: the floating-point
 *         environment breaks bitwise reproducibility:\n" followed by the problems, one per line.
 * Host only; not collective.
 *
 * **Example**: `int main() { reprosgd::check_fp_environment(); ... }`
 */
static inline void check_fp_environment() {
  const std::string problems = fp_environment_problems();
  if (!problems.empty()) {
    throw reproducibility_error(
        "reprosgd::check_fp_environment: the floating-point environment breaks bitwise "
        "reproducibility:\n" +
        problems);
  }
}

REPROSGD_END_NAMESPACE
