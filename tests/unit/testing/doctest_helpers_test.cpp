// SPDX-License-Identifier: BSD-3-Clause
/// @file testing/doctest_helpers.hpp: a fingerprint against a pinned golden — the exact failure
/// message with the re-pin line, the golden's format, and REPROSGD_CHECK_FINGERPRINT on a match.
#include <doctest/doctest.h>

#include <reprosgd/fingerprint.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <Kokkos_Core.hpp>

#include <string>

namespace {

// The fingerprint of the 4 floats 1, 2, 3, 4: computed once by this test and pinned here, so
// that the test also shows a fingerprint is a fixed function of the bits.
reprosgd::Fingerprint four_floats() {
  Kokkos::View<float*, Kokkos::HostSpace> v("v", 4);
  for (int i = 0; i < 4; ++i) v(i) = static_cast<float>(i + 1);
  return reprosgd::fingerprint(v);
}

}  // namespace

TEST_SUITE("testing/doctest_helpers") {
  TEST_CASE("is_fingerprint_hex: 32 lowercase hex digits, as Fingerprint::hex() writes them") {
    using reprosgd::testing::is_fingerprint_hex;
    CHECK(is_fingerprint_hex(reprosgd::Fingerprint{}.hex()));
    CHECK(is_fingerprint_hex("0123456789abcdef0123456789abcdef"));
    CHECK_FALSE(is_fingerprint_hex("0123456789ABCDEF0123456789abcdef"));  // uppercase
    CHECK_FALSE(is_fingerprint_hex("0123456789abcdef0123456789abcde"));   // 31 digits
    CHECK_FALSE(is_fingerprint_hex("0123456789abcdef0123456789abcdef0"));  // 33 digits
    CHECK_FALSE(is_fingerprint_hex("0123456789abcdef0123456789abcdeg"));
    CHECK_FALSE(is_fingerprint_hex(""));
  }

  TEST_CASE("fingerprint_mismatch: empty on a match; both values and the re-pin line otherwise") {
    using reprosgd::testing::fingerprint_matches;
    using reprosgd::testing::fingerprint_mismatch;
    const reprosgd::Fingerprint fp{0x0123456789abcdefull, 0xfedcba9876543210ull};
    const std::string hex = "0123456789abcdeffedcba9876543210";
    REQUIRE(fp.hex() == hex);
    CHECK(fingerprint_matches(fp, hex));
    CHECK(fingerprint_mismatch(fp, hex) == "");
    CHECK(fingerprint_mismatch(fp, hex, "my_golden") == "");

    const std::string old = "00000000000000000000000000000001";
    CHECK_FALSE(fingerprint_matches(fp, old));
    CHECK(fingerprint_mismatch(fp, old, "my_golden") ==
          "fingerprint 0123456789abcdeffedcba9876543210 is not the pinned golden 00000000000000000000000000000001; "
          "if the change is deliberate, re-pin: my_golden = \"0123456789abcdeffedcba9876543210\"");
    CHECK(fingerprint_mismatch(fp, old) ==
          "fingerprint 0123456789abcdeffedcba9876543210 is not the pinned golden 00000000000000000000000000000001; "
          "if the change is deliberate, re-pin: golden = \"0123456789abcdeffedcba9876543210\"");
    // A literal in the assertion (REPROSGD_CHECK_FINGERPRINT(fp, "…") stringizes it with its quotes).
    CHECK(fingerprint_mismatch(fp, old, "\"00000000000000000000000000000001\"") ==
          "fingerprint 0123456789abcdeffedcba9876543210 is not the pinned golden 00000000000000000000000000000001; "
          "if the change is deliberate, re-pin: replace \"00000000000000000000000000000001\" by "
          "\"0123456789abcdeffedcba9876543210\"");
    // A golden that cannot be a fingerprint (uppercase, a copy that lost a digit) says so.
    CHECK(fingerprint_mismatch(fp, "0123456789ABCDEFFEDCBA9876543210", "g") ==
          "fingerprint 0123456789abcdeffedcba9876543210 is not the pinned golden 0123456789ABCDEFFEDCBA9876543210 "
          "(not 32 lowercase hex digits, as Fingerprint::hex() writes them); "
          "if the change is deliberate, re-pin: g = \"0123456789abcdeffedcba9876543210\"");
  }

  TEST_CASE("REPROSGD_CHECK_FINGERPRINT / REQUIRE pass on the pinned golden of a View's bits") {
    constexpr const char* four_floats_golden = "2babafcad3709c7ce3b3073547aa9dc3";
    const reprosgd::Fingerprint fp = four_floats();
    INFO("four_floats() = " << fp.hex());
    REPROSGD_CHECK_FINGERPRINT(fp, four_floats_golden);
    REPROSGD_REQUIRE_FINGERPRINT(fp, four_floats_golden);
    CHECK_FALSE(reprosgd::testing::fingerprint_matches(reprosgd::Fingerprint{}, four_floats_golden));
  }
}
