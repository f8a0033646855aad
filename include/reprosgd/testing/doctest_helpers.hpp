// SPDX-License-Identifier: BSD-3-Clause
/// @file doctest helpers for users' own determinism tests: bitwise View equality that names the first difference.
#pragma once

#include <reprosgd/config.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

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
