// SPDX-License-Identifier: BSD-3-Clause
/// @file Hyperparameter checks and exact, locale-free descriptions shared by the optimizers.
#pragma once

#include <reprosgd/error.hpp>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// Hex float text: exact and locale-independent, so a configuration hash sees every bit.
inline std::string exact_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

inline std::string describe_fields(const char* name, std::initializer_list<std::pair<const char*, float>> fields) {
  std::string s = std::string(name) + "(";
  bool first = true;
  for (const auto& [k, v] : fields) {
    s += (first ? "" : ",") + std::string(k) + "=" + exact_text(v);
    first = false;
  }
  return s + ")";
}

inline std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

inline void check_positive(const char* who, const char* what, float v) {
  if (!(v > 0.0f) || v != v || v > 3.4e38f)
    throw config_error(std::string(who) + ": " + what + " must be a finite number > 0, got " + number_text(v));
}
inline void check_non_negative(const char* who, const char* what, float v) {
  if (!(v >= 0.0f) || v > 3.4e38f)
    throw config_error(std::string(who) + ": " + what + " must be a finite number >= 0, got " + number_text(v));
}
inline void check_in_range(const char* who, const char* what, float v, float lo, float hi, bool hi_inclusive) {
  if (!(v >= lo) || (hi_inclusive ? !(v <= hi) : !(v < hi)))
    throw config_error(std::string(who) + ": " + what + " must be in [" + number_text(lo) + ", " + number_text(hi) +
                       (hi_inclusive ? "]" : ")") + ", got " + number_text(v));
}

}  // namespace detail
REPROSGD_END_NAMESPACE
