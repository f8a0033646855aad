// SPDX-License-Identifier: BSD-3-Clause
/// @file reprosgd::check_fp_environment in the normal build, and with FTZ/DAZ or a directed rounding mode switched on.
#include <doctest/doctest.h>

#include <reprosgd/math/fp_environment.hpp>

#include <cfenv>
#include <cstdio>
#include <string>

namespace {

const std::string prefix =
    "reprosgd::check_fp_environment: the floating-point environment breaks bitwise reproducibility:\n";

// The message of check_fp_environment(), or "" when it does not throw.
std::string thrown_message() {
  try {
    reprosgd::check_fp_environment();
  } catch (const reprosgd::reproducibility_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("math.fp_environment") {
  TEST_CASE("the normal build (-ffp-contract=off, SSE, default MXCSR) reports nothing") {
    CHECK(reprosgd::fp_environment_problems() == "");
    CHECK_NOTHROW(reprosgd::check_fp_environment());
  }

#if REPROSGD_IMPL_HAS_MXCSR
  TEST_CASE("FTZ and DAZ set through MXCSR are reported with exact messages") {
    const unsigned saved = _mm_getcsr();
    auto hex = [](unsigned v) {
      char b[16];
      std::snprintf(b, sizeof b, "0x%04x", v & ~0x3fu);
      return std::string(b);
    };
    const std::string ftz = "flush-to-zero (FTZ) is on (MXCSR=" + hex(saved | 0x8000u) +
                            ", bit 15): subnormal results become 0. It is set by code built with "
                            "-ffast-math/-Ofast (crtfastmath.o) or by a library; link without those flags "
                            "or clear it with _mm_setcsr(_mm_getcsr() & ~0x8040u)";
    const std::string daz = "denormals-are-zero (DAZ) is on (MXCSR=" + hex(saved | 0x0040u) +
                            ", bit 6): subnormal inputs are read as 0. It is set by code built with "
                            "-ffast-math/-Ofast (crtfastmath.o) or by a library; link without those flags "
                            "or clear it with _mm_setcsr(_mm_getcsr() & ~0x8040u)";
    const std::string both_ftz = "flush-to-zero (FTZ) is on (MXCSR=" + hex(saved | 0x8040u) +
                                 ", bit 15): subnormal results become 0. It is set by code built with "
                                 "-ffast-math/-Ofast (crtfastmath.o) or by a library; link without those "
                                 "flags or clear it with _mm_setcsr(_mm_getcsr() & ~0x8040u)";
    const std::string both_daz = "denormals-are-zero (DAZ) is on (MXCSR=" + hex(saved | 0x8040u) +
                                 ", bit 6): subnormal inputs are read as 0. It is set by code built with "
                                 "-ffast-math/-Ofast (crtfastmath.o) or by a library; link without those "
                                 "flags or clear it with _mm_setcsr(_mm_getcsr() & ~0x8040u)";

    // The environment is restored before any assertion, so doctest itself runs in the normal mode.
    _mm_setcsr(saved | 0x8000u);
    volatile float tiny = 0x1p-126f;
    const float flushed = tiny * 0.5f;  // proves the mode took effect
    const std::string p_ftz = reprosgd::fp_environment_problems();
    const std::string t_ftz = thrown_message();
    _mm_setcsr(saved | 0x0040u);
    volatile float denorm = 0x1p-149f;
    const float read_as_zero = denorm * 0x1p23f;
    const std::string p_daz = reprosgd::fp_environment_problems();
    _mm_setcsr(saved | 0x8040u);
    const std::string p_both = reprosgd::fp_environment_problems();
    const std::string t_both = thrown_message();
    _mm_setcsr(saved);

    CHECK(flushed == 0.0f);
    CHECK(read_as_zero == 0.0f);
    CHECK(p_ftz == ftz);
    CHECK(t_ftz == prefix + ftz);
    CHECK(p_daz == daz);
    CHECK(p_both == both_ftz + "\n" + both_daz);
    CHECK(t_both == prefix + both_ftz + "\n" + both_daz);
    CHECK(reprosgd::fp_environment_problems() == "");  // restored
  }
#endif

  TEST_CASE("a directed rounding mode is reported, and only that") {
    const int saved = std::fegetround();
    REQUIRE(std::fesetround(FE_UPWARD) == 0);
    const std::string up = reprosgd::fp_environment_problems();
    REQUIRE(std::fesetround(FE_DOWNWARD) == 0);
    const std::string down = reprosgd::fp_environment_problems();
    REQUIRE(std::fesetround(FE_TOWARDZERO) == 0);
    const std::string zero = thrown_message();
    std::fesetround(saved);
    CHECK(up == "the rounding mode is upward, not to nearest: call std::fesetround(FE_TONEAREST) before training");
    CHECK(down == "the rounding mode is downward, not to nearest: call std::fesetround(FE_TONEAREST) before training");
    CHECK(zero == prefix + "the rounding mode is toward zero, not to nearest: call std::fesetround(FE_TONEAREST) before training");
  }
}
