// SPDX-License-Identifier: BSD-3-Clause
/// @file One line of a trace as a JSON value, parsed by rapidjson (Debian's rapidjson-dev, which
/// cereal depends on): objects (keys kept in order), arrays, strings, numbers (kept as their text,
/// so bits are compared, not re-rounded values), true, false, null. Anything else, or trailing
/// text, is an error naming rapidjson's reason and the column.
#pragma once

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace reprosgd_diff {

/// A JSON value. Numbers keep their text; objects keep their keys in order.
struct Json {
  enum class Kind { null, boolean, number, string, array, object };
  struct Member;  // {key, value}: complete below, after Json (std::vector allows that; std::pair would not)
  Kind kind = Kind::null;
  bool boolean = false;
  std::string text;  // number: its text; string: its value
  std::vector<Json> items;
  std::vector<Member> members;

  [[nodiscard]] bool is(Kind k) const noexcept { return kind == k; }
  /// The member `key` of an object, or nullptr.
  [[nodiscard]] const Json* find(std::string_view key) const;
};

struct Json::Member {
  std::string key;
  Json value;
};

inline const Json* Json::find(std::string_view key) const {
  if (kind != Kind::object) return nullptr;
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

/// Thrown on text that is not one JSON value; what() names the column.
struct json_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {

/// rapidjson SAX handler that builds a Json. With kParseNumbersAsStringsFlag every number
/// reaches RawNumber as its text, so no value is converted (and re-rounded) on the way.
class Builder : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Builder> {
 public:
  bool Null() { return add(Json{}); }
  bool Bool(bool b) {
    Json v;
    v.kind = Json::Kind::boolean;
    v.boolean = b;
    return add(std::move(v));
  }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) { return add(text(Json::Kind::number, s, n)); }
  bool String(const char* s, rapidjson::SizeType n, bool) { return add(text(Json::Kind::string, s, n)); }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    key_.assign(s, n);
    return true;
  }
  bool StartObject() { return open(Json::Kind::object); }
  bool EndObject(rapidjson::SizeType) { return close(); }
  bool StartArray() { return open(Json::Kind::array); }
  bool EndArray(rapidjson::SizeType) { return close(); }

  Json result() { return std::move(root_); }

 private:
  static Json text(Json::Kind kind, const char* s, rapidjson::SizeType n) {
    Json v;
    v.kind = kind;
    v.text.assign(s, n);
    return v;
  }
  // Put `v` into the innermost open container (under the last key for an object), or make it the
  // document.
  bool add(Json v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return true;
    }
    Json& parent = *open_.back();
    if (parent.kind == Json::Kind::object) parent.members.push_back(Json::Member{std::move(key_), std::move(v)});
    else parent.items.push_back(std::move(v));
    return true;
  }
  bool open(Json::Kind kind) {
    Json v;
    v.kind = kind;
    add(std::move(v));
    Json* placed = open_.empty() ? &root_ : nullptr;
    if (!placed) {
      Json& parent = *open_.back();
      placed = parent.kind == Json::Kind::object ? &parent.members.back().value : &parent.items.back();
    }
    // Its address stays valid while it is open: until it closes, values go into it, never into
    // the vector that holds it.
    open_.push_back(placed);
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  Json root_;
  std::vector<Json*> open_;
  std::string key_;
};

}  // namespace detail

/// Parse one JSON value (the whole of `text`) with rapidjson, strictly (RFC 8259; trailing text
/// is an error). @throws json_error with rapidjson's reason and the column
inline Json parse_json(std::string_view text) {
  rapidjson::MemoryStream ms(text.data(), text.size());
  rapidjson::Reader reader;
  detail::Builder builder;
  const rapidjson::ParseResult ok =
      reader.Parse<rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseValidateEncodingFlag>(ms, builder);
  if (!ok)
    throw json_error(std::string(rapidjson::GetParseError_En(ok.Code())) + " at column " + std::to_string(ok.Offset() + 1));
  return builder.result();
}

}  // namespace reprosgd_diff
