// SPDX-License-Identifier: BSD-3-Clause
/// @file Compiled with -mfpmath=387 (x87, FLT_EVAL_METHOD 2): check_fp_environment must report excess precision.
#include <doctest/doctest.h>

#include <reprosgd/math/fp_environment.hpp>

#include <cfloat>
#include <string>

TEST_CASE("x87 excess precision is detected, at compile time and at run time") {
  REQUIRE_MESSAGE(FLT_EVAL_METHOD == 2, "this file is built with -mfpmath=387 and should have FLT_EVAL_METHOD 2");
  const std::string message =
      "FLT_EVAL_METHOD is 2, not 0: float and double expressions are evaluated in a wider format (x87); "
      "compile for SSE2 or newer (-mfpmath=sse, -msse2) or a 64-bit target\n"
      "intermediate results carry excess precision ((1 + 2^-24) - 1 in float or (1 + 2^-53) - 1 in double "
      "kept the exact 2^-24 or 2^-53): compile for SSE2 or newer (-mfpmath=sse) instead of x87";
  CHECK(reprosgd::fp_environment_problems() == message);
  CHECK_THROWS_AS(reprosgd::check_fp_environment(), reprosgd::reproducibility_error);
}
