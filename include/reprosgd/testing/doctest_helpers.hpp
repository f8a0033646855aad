// SPDX-License-Identifier: BSD-3-Clause
/// @file doctest helpers for users' own determinism tests: bitwise View equality that names the first
/// difference, and a fingerprint checked against a pinned golden that says how to re-pin it.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/fingerprint.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

REPROSGD_BEGIN_NAMESPACE

/**
 * Compare two float Views bit for bit. Returns "" when equal, otherwise a description of the first
 * differing element: "element 1234: 0x3f800000 (1) vs 0x3f800001 (1.00000012)" or a size mismatch.
 */
template <class A, class B>
[[nodiscard]] std::string first_bitwise_difference(const A& a, const B& b) {
  if (a.size() != b.size())
    return "sizes differ: " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  auto ha = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a);
  auto hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b);
  const auto* pa = ha.data();
  const auto* pb = hb.data();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(pa + i, pb + i, sizeof *pa) != 0) {
      std::uint32_t ua = 0, ub = 0;
      std::memcpy(&ua, pa + i, sizeof(float) < sizeof ua ? sizeof(float) : sizeof ua);
      std::memcpy(&ub, pb + i, sizeof(float) < sizeof ub ? sizeof(float) : sizeof ub);
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %zu: 0x%08x (%.9g) vs 0x%08x (%.9g)", i, ua, static_cast<double>(pa[i]),
                    ub, static_cast<double>(pb[i]));
      return buf;
    }
  }
  return {};
}

namespace testing {

/// Whether `golden` is a fingerprint as Fingerprint::hex() writes it: 32 lowercase hex digits.
[[nodiscard]] inline bool is_fingerprint_hex(std::string_view golden) noexcept {
  if (golden.size() != 32) return false;
  for (const char c : golden)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

/// Whether `fp` is the pinned golden (32 lowercase hex digits, as Fingerprint::hex() writes it).
[[nodiscard]] inline bool fingerprint_matches(const Fingerprint& fp, std::string_view golden) {
  return fp.hex() == golden;
}

/**
 * Compare a fingerprint with a pinned golden. Returns "" when they are equal, otherwise a message
 * of one line with both values and, at its end, the text to paste to re-pin the golden (after a
 * deliberate change of the model, data, hyperparameters or the library's numerics):
 *
 *     fingerprint 3c0f…e1 is not the pinned golden 9a41…07; if the change is deliberate, re-pin: golden = "3c0f…e1"
 *
 * @param golden_name  how the golden is spelled in the source (REPROSGD_CHECK_FINGERPRINT passes
 *                     the expression's text): a name gives `name = "…"`, a string literal gives
 *                     `replace "old" by "new"`.
 */
[[nodiscard]] inline std::string fingerprint_mismatch(const Fingerprint& fp, std::string_view golden,
                                                      std::string_view golden_name = "golden") {
  const std::string got = fp.hex();
  if (got == golden) return {};
  std::string m = "fingerprint " + got + " is not the pinned golden " + std::string(golden);
  if (!is_fingerprint_hex(golden)) m += " (not 32 lowercase hex digits, as Fingerprint::hex() writes them)";
  m += "; if the change is deliberate, re-pin: ";
  if (!golden_name.empty() && golden_name.front() == '"')
    m += "replace " + std::string(golden_name) + " by \"" + got + "\"";
  else
    m += std::string(golden_name) + " = \"" + got + "\"";
  return m;
}

}  // namespace testing

REPROSGD_END_NAMESPACE

/// doctest assertion: two Views hold the same bits; on failure names the first differing element.
#define REPROSGD_CHECK_BITWISE_EQUAL(a, b)                                          \
  do {                                                                              \
    const std::string reprosgd_diff_ = ::reprosgd::first_bitwise_difference(a, b);  \
    INFO("first difference: " << reprosgd_diff_);                                   \
    CHECK(reprosgd_diff_.empty());                                                  \
  } while (0)
#define REPROSGD_REQUIRE_BITWISE_EQUAL(a, b)                                        \
  do {                                                                              \
    const std::string reprosgd_diff_ = ::reprosgd::first_bitwise_difference(a, b);  \
    INFO("first difference: " << reprosgd_diff_);                                   \
    REQUIRE(reprosgd_diff_.empty());                                                \
  } while (0)

/// doctest assertion: a Fingerprint equals the pinned golden (32 hex digits); on failure prints both
/// and the line that re-pins the golden (testing::fingerprint_mismatch).
#define REPROSGD_CHECK_FINGERPRINT(fp, golden)                                                          \
  do {                                                                                                  \
    const std::string reprosgd_mismatch_ = ::reprosgd::testing::fingerprint_mismatch(fp, golden, #golden); \
    INFO(reprosgd_mismatch_);                                                                           \
    CHECK(reprosgd_mismatch_.empty());                                                                  \
  } while (0)
#define REPROSGD_REQUIRE_FINGERPRINT(fp, golden)                                                        \
  do {                                                                                                  \
    const std::string reprosgd_mismatch_ = ::reprosgd::testing::fingerprint_mismatch(fp, golden, #golden); \
    INFO(reprosgd_mismatch_);                                                                           \
    REQUIRE(reprosgd_mismatch_.empty());                                                                \
  } while (0)
