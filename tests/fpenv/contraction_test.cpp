// SPDX-License-Identifier: BSD-3-Clause
/// @file Compiled with -O2 -ffp-contract=fast -mfma: check_fp_environment must report the contraction.
#include <doctest/doctest.h>

#include <reprosgd/math/fp_environment.hpp>

#include <string>

TEST_CASE("FMA contraction in the calling translation unit is detected") {
  // First show that this file really is contracted; otherwise a passing detection test would
  // prove nothing. (1 + 2^-30)(1 - 2^-30) - 1 is -2^-60 only when fused.
  volatile double a = 0x1.00000004p0, b = 0x1.fffffff8p-1, c = -1.0;
  const double r = a * b + c;
  REQUIRE_MESSAGE(r == -0x1p-60,
                  "this file is built with -O2 -ffp-contract=fast (-mfma on x86) but the compiler did "
                  "not contract a*b+c, so the detection cannot be shown; check the compile flags");

  const std::string message =
      "a*b+c is contracted into a fused multiply-add in the translation unit that called this check "
      "((1+2^-30)*(1-2^-30)-1 gave the exact -2^-60): compile it with -ffp-contract=off (the "
      "ReproSGD::reprosgd CMake target adds it; nvcc: --fmad=false) and without -ffp-contract=fast or "
      "-ffast-math";
  CHECK(reprosgd::fp_environment_problems() == message);
  std::string thrown;
  try {
    reprosgd::check_fp_environment();
  } catch (const reprosgd::reproducibility_error& e) {
    thrown = e.what();
    CHECK(e.code() == reprosgd::errc::reproducibility_violation);
  }
  CHECK(thrown ==
        "reprosgd::check_fp_environment: the floating-point environment breaks bitwise reproducibility:\n" +
            message);
}
