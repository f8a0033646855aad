// SPDX-License-Identifier: BSD-3-Clause
/// @file cereal JSON archives whose floats round-trip bit-exactly (NaN payloads, ±inf, -0, subnormals).
#pragma once

#include <reprosgd/checkpoint/float_text.hpp>

#include <cereal/archives/json.hpp>
#include <cereal/cereal.hpp>

#include <cstdint>
#include <istream>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

// Why not cereal's own JSON archives: they print doubles through rapidjson, which writes NaN and
// Inf as the non-JSON tokens NaN/Infinity and loses the NaN's sign and payload, and they print a
// float as the shortest *double*, "0.10000000149011612" for 0.1f. A checkpoint promises the bits.
// These archives are cereal archives in their own right (user types serialise into them with the
// usual save/load/serialize functions) that keep every structural decision of cereal's JSON
// (objects, arrays for SizeTag'd containers, name-value pairs) by forwarding to a wrapped
// cereal::JSON*Archive, and replace only how arithmetic values are written: every float and double
// is a JSON string in exact_float_text form ("0.1", "-0", "inf", "nan:7fc00001"). Strings keep the
// JSON standard-conforming and readable, and the exactness does not depend on the JSON library.

/// A cereal output archive writing JSON with exact float text. See exact_float_text.
class JsonOutputArchive : public cereal::OutputArchive<JsonOutputArchive>, public cereal::traits::TextArchive {
 public:
  /// Writes to `stream`; the JSON document is complete when the archive is destroyed.
  explicit JsonOutputArchive(std::ostream& stream,
                             cereal::JSONOutputArchive::Options options = cereal::JSONOutputArchive::Options::Default())
      : cereal::OutputArchive<JsonOutputArchive>(this), inner_(stream, options) {}

  /// The wrapped cereal archive, which holds the node structure.
  [[nodiscard]] cereal::JSONOutputArchive& inner() noexcept { return inner_; }

 private:
  cereal::JSONOutputArchive inner_;
};

/// A cereal input archive reading what JsonOutputArchive wrote.
class JsonInputArchive : public cereal::InputArchive<JsonInputArchive>, public cereal::traits::TextArchive {
 public:
  /// Parses the whole document from `stream` (throws cereal::Exception if it is not JSON).
  explicit JsonInputArchive(std::istream& stream) : cereal::InputArchive<JsonInputArchive>(this), inner_(stream) {}

  /// The wrapped cereal archive, which holds the node structure.
  [[nodiscard]] cereal::JSONInputArchive& inner() noexcept { return inner_; }

 private:
  cereal::JSONInputArchive inner_;
};

// The free functions below mirror those of <cereal/archives/json.hpp> for the archives above; cereal
// finds them by argument-dependent lookup on the archive type.

template <class T>
void prologue(JsonOutputArchive&, const cereal::NameValuePair<T>&) {}
template <class T>
void prologue(JsonInputArchive&, const cereal::NameValuePair<T>&) {}
template <class T>
void epilogue(JsonOutputArchive&, const cereal::NameValuePair<T>&) {}
template <class T>
void epilogue(JsonInputArchive&, const cereal::NameValuePair<T>&) {}

template <class T>
void prologue(JsonOutputArchive&, const cereal::DeferredData<T>&) {}
template <class T>
void prologue(JsonInputArchive&, const cereal::DeferredData<T>&) {}
template <class T>
void epilogue(JsonOutputArchive&, const cereal::DeferredData<T>&) {}
template <class T>
void epilogue(JsonInputArchive&, const cereal::DeferredData<T>&) {}

template <class T>
void prologue(JsonOutputArchive& ar, const cereal::SizeTag<T>&) {
  ar.inner().makeArray();
}
template <class T>
void prologue(JsonInputArchive&, const cereal::SizeTag<T>&) {}
template <class T>
void epilogue(JsonOutputArchive&, const cereal::SizeTag<T>&) {}
template <class T>
void epilogue(JsonInputArchive&, const cereal::SizeTag<T>&) {}

template <class T,
          cereal::traits::EnableIf<!std::is_arithmetic<T>::value,
                                   !cereal::traits::has_minimal_base_class_serialization<
                                       T, cereal::traits::has_minimal_output_serialization, JsonOutputArchive>::value,
                                   !cereal::traits::has_minimal_output_serialization<T, JsonOutputArchive>::value> =
              cereal::traits::sfinae>
void prologue(JsonOutputArchive& ar, const T&) {
  ar.inner().startNode();
}
template <class T,
          cereal::traits::EnableIf<!std::is_arithmetic<T>::value,
                                   !cereal::traits::has_minimal_base_class_serialization<
                                       T, cereal::traits::has_minimal_input_serialization, JsonInputArchive>::value,
                                   !cereal::traits::has_minimal_input_serialization<T, JsonInputArchive>::value> =
              cereal::traits::sfinae>
void prologue(JsonInputArchive& ar, const T&) {
  ar.inner().startNode();
}
template <class T,
          cereal::traits::EnableIf<!std::is_arithmetic<T>::value,
                                   !cereal::traits::has_minimal_base_class_serialization<
                                       T, cereal::traits::has_minimal_output_serialization, JsonOutputArchive>::value,
                                   !cereal::traits::has_minimal_output_serialization<T, JsonOutputArchive>::value> =
              cereal::traits::sfinae>
void epilogue(JsonOutputArchive& ar, const T&) {
  ar.inner().finishNode();
}
template <class T,
          cereal::traits::EnableIf<!std::is_arithmetic<T>::value,
                                   !cereal::traits::has_minimal_base_class_serialization<
                                       T, cereal::traits::has_minimal_input_serialization, JsonInputArchive>::value,
                                   !cereal::traits::has_minimal_input_serialization<T, JsonInputArchive>::value> =
              cereal::traits::sfinae>
void epilogue(JsonInputArchive& ar, const T&) {
  ar.inner().finishNode();
}

inline void prologue(JsonOutputArchive& ar, const std::nullptr_t&) { ar.inner().writeName(); }
inline void prologue(JsonInputArchive&, const std::nullptr_t&) {}
inline void epilogue(JsonOutputArchive&, const std::nullptr_t&) {}
inline void epilogue(JsonInputArchive&, const std::nullptr_t&) {}

template <class T, cereal::traits::EnableIf<std::is_arithmetic<T>::value> = cereal::traits::sfinae>
void prologue(JsonOutputArchive& ar, const T&) {
  ar.inner().writeName();
}
template <class T, cereal::traits::EnableIf<std::is_arithmetic<T>::value> = cereal::traits::sfinae>
void prologue(JsonInputArchive&, const T&) {}
template <class T, cereal::traits::EnableIf<std::is_arithmetic<T>::value> = cereal::traits::sfinae>
void epilogue(JsonOutputArchive&, const T&) {}
template <class T, cereal::traits::EnableIf<std::is_arithmetic<T>::value> = cereal::traits::sfinae>
void epilogue(JsonInputArchive&, const T&) {}

template <class CharT, class Traits, class Alloc>
void prologue(JsonOutputArchive& ar, const std::basic_string<CharT, Traits, Alloc>&) {
  ar.inner().writeName();
}
template <class CharT, class Traits, class Alloc>
void prologue(JsonInputArchive&, const std::basic_string<CharT, Traits, Alloc>&) {}
template <class CharT, class Traits, class Alloc>
void epilogue(JsonOutputArchive&, const std::basic_string<CharT, Traits, Alloc>&) {}
template <class CharT, class Traits, class Alloc>
void epilogue(JsonInputArchive&, const std::basic_string<CharT, Traits, Alloc>&) {}

template <class T>
void CEREAL_SAVE_FUNCTION_NAME(JsonOutputArchive& ar, const cereal::NameValuePair<T>& t) {
  ar.inner().setNextName(t.name);
  ar(t.value);
}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(JsonInputArchive& ar, cereal::NameValuePair<T>& t) {
  ar.inner().setNextName(t.name);
  ar(t.value);
}

inline void CEREAL_SAVE_FUNCTION_NAME(JsonOutputArchive& ar, const std::nullptr_t& t) { ar.inner().saveValue(t); }
inline void CEREAL_LOAD_FUNCTION_NAME(JsonInputArchive& ar, std::nullptr_t& t) { ar.inner().loadValue(t); }

/// Arithmetic values: floats as exact text strings, integers and bools as JSON numbers/booleans.
template <class T, cereal::traits::EnableIf<std::is_arithmetic<T>::value> = cereal::traits::sfinae>
void CEREAL_SAVE_FUNCTION_NAME(JsonOutputArchive& ar, const T& t) {
  static_assert(!std::is_floating_point_v<T> || detail::is_exact_text_float_v<T>,
                "reprosgd::JsonOutputArchive: long double has no portable bit layout; store a double");
  if constexpr (std::is_floating_point_v<T>) {
    ar.inner().saveValue(exact_float_text(t));
  } else if constexpr (std::is_same_v<T, bool>) {
    ar.inner().saveValue(t);
  } else if constexpr (std::is_signed_v<T>) {
    ar.inner().saveValue(static_cast<std::int64_t>(t));
  } else {
    ar.inner().saveValue(static_cast<std::uint64_t>(t));
  }
}

template <class T, cereal::traits::EnableIf<std::is_arithmetic<T>::value> = cereal::traits::sfinae>
void CEREAL_LOAD_FUNCTION_NAME(JsonInputArchive& ar, T& t) {
  static_assert(!std::is_floating_point_v<T> || detail::is_exact_text_float_v<T>,
                "reprosgd::JsonInputArchive: long double has no portable bit layout; store a double");
  if constexpr (std::is_floating_point_v<T>) {
    std::string text;
    ar.inner().loadValue(text);
    t = exact_float_from_text<T>(text);
  } else if constexpr (std::is_same_v<T, bool>) {
    ar.inner().loadValue(t);
  } else if constexpr (std::is_signed_v<T>) {
    std::int64_t v = 0;
    ar.inner().loadValue(v);
    if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
        v > static_cast<std::int64_t>(std::numeric_limits<T>::max())) {
      throw cereal::Exception("reprosgd::JsonInputArchive: integer " + std::to_string(v) +
                              " does not fit the destination type");
    }
    t = static_cast<T>(v);
  } else {
    std::uint64_t v = 0;
    ar.inner().loadValue(v);
    if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
      throw cereal::Exception("reprosgd::JsonInputArchive: integer " + std::to_string(v) +
                              " does not fit the destination type");
    }
    t = static_cast<T>(v);
  }
}

template <class CharT, class Traits, class Alloc>
void CEREAL_SAVE_FUNCTION_NAME(JsonOutputArchive& ar, const std::basic_string<CharT, Traits, Alloc>& str) {
  ar.inner().saveValue(str);
}
template <class CharT, class Traits, class Alloc>
void CEREAL_LOAD_FUNCTION_NAME(JsonInputArchive& ar, std::basic_string<CharT, Traits, Alloc>& str) {
  ar.inner().loadValue(str);
}

template <class T>
void CEREAL_SAVE_FUNCTION_NAME(JsonOutputArchive&, const cereal::SizeTag<T>&) {}
template <class T>
void CEREAL_LOAD_FUNCTION_NAME(JsonInputArchive& ar, cereal::SizeTag<T>& st) {
  ar.inner().loadSize(st.size);
}

REPROSGD_END_NAMESPACE

CEREAL_REGISTER_ARCHIVE(reprosgd::JsonOutputArchive)
CEREAL_REGISTER_ARCHIVE(reprosgd::JsonInputArchive)
CEREAL_SETUP_ARCHIVE_TRAITS(reprosgd::JsonInputArchive, reprosgd::JsonOutputArchive)
