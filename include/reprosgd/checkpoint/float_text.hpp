// SPDX-License-Identifier: BSD-3-Clause
/// @file Exact text for float and double: shortest round-trip decimals, "inf", "-inf", "nan:<bits>".
#pragma once

#include <reprosgd/error.hpp>

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
template <class T>
using float_bits_t = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

template <class T>
inline constexpr bool is_exact_text_float_v = std::is_same_v<T, float> || std::is_same_v<T, double>;
}  // namespace detail

/**
 * The exact text of a float or double: it reads back to the same bits with exact_float_from_text.
 *
 * - finite values: the shortest decimal that round-trips (std::to_chars), e.g. "0.1", "-0", "1e-45";
 * - infinities: "inf" and "-inf";
 * - NaN: "nan:" followed by the whole bit pattern in lower-case hex (8 digits for float, 16 for
 *   double), sign and payload included, e.g. "nan:7fc00000", "nan:ffa00001".
 *
 * Used for JSON checkpoints and for configuration values (a learning rate written with this
 * function compares equal, as text, exactly when the floats are bitwise equal).
 *
 * @deterministic pure function of the bits.
 *
 * **Example**: `exact_float_text(0.001f) == "0.001"`.
 */
template <class T>
  requires detail::is_exact_text_float_v<T>
[[nodiscard]] std::string exact_float_text(T value) {
  using bits_t = detail::float_bits_t<T>;
  const bits_t bits = std::bit_cast<bits_t>(value);
  if (value != value) {  // NaN: keep sign and payload
    constexpr int digits = static_cast<int>(sizeof(T) * 2);
    char buf[4 + digits];
    std::memcpy(buf, "nan:", 4);
    for (int i = 0; i < digits; ++i) {
      buf[4 + i] = "0123456789abcdef"[(bits >> (4 * (digits - 1 - i))) & 0xF];
    }
    return std::string(buf, sizeof(buf));
  }
  constexpr bits_t sign_mask = bits_t{1} << (sizeof(T) * 8 - 1);
  if (value == std::numeric_limits<T>::infinity()) return "inf";
  if (value == -std::numeric_limits<T>::infinity()) return "-inf";
  if (value == T(0)) return (bits & sign_mask) != 0 ? "-0" : "0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), value);  // shortest round-trip form
  return std::string(buf, res.ptr);
}

/**
 * Parses text written by exact_float_text back to the same bits.
 *
 * Also accepts any decimal or scientific number std::from_chars accepts (a hand-edited "1e-3");
 * it is rounded to nearest.
 *
 * @throws reprosgd::data_error naming the text when it is not a number of this form, or when a
 *         finite decimal is out of the type's range.
 */
template <class T>
  requires detail::is_exact_text_float_v<T>
[[nodiscard]] T exact_float_from_text(std::string_view text) {
  using bits_t = detail::float_bits_t<T>;
  const auto fail = [&](const char* why) -> T {
    throw data_error("reprosgd::exact_float_from_text: \"" + std::string(text) + "\" is not a " +
                     (sizeof(T) == 4 ? "float" : "double") + ": " + why);
  };
  if (text == "inf") return std::numeric_limits<T>::infinity();
  if (text == "-inf") return -std::numeric_limits<T>::infinity();
  if (text.starts_with("nan:")) {
    const std::string_view hex = text.substr(4);
    if (hex.size() != sizeof(T) * 2) return fail("a NaN needs exactly all hex digits of its bit pattern");
    bits_t bits = 0;
    for (const char c : hex) {
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) return fail("bad hex digit in NaN bit pattern");
      bits = static_cast<bits_t>((bits << 4) | static_cast<bits_t>(d));
    }
    const T v = std::bit_cast<T>(bits);
    if (v == v) return fail("the bit pattern after \"nan:\" is not a NaN");
    return v;
  }
  if (text.empty()) return fail("empty text");
  // from_chars would also take "nan"/"infinity"; only the forms above are allowed for those.
  const char first = text.front() == '-' ? (text.size() > 1 ? text[1] : '\0') : text.front();
  if (!((first >= '0' && first <= '9') || first == '.')) return fail("not a number");
  T v{};
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec == std::errc::result_out_of_range) return fail("out of range");
  if (res.ec != std::errc{} || res.ptr != text.data() + text.size()) return fail("not a number");
  return v;
}

REPROSGD_END_NAMESPACE
