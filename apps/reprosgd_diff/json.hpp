// SPDX-License-Identifier: BSD-3-Clause
/// @file A small strict JSON reader for one line of a trace: objects (keys kept in order), arrays,
/// strings, numbers (kept as their text, so bits are compared, not re-rounded values), true,
/// false, null. Anything else, or trailing text, is an error naming the column.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace reprosgd_diff {

/// A JSON value. Numbers keep their text; objects keep their keys in order.
struct Json {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  std::string text;  // number: its text; string: its value
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  [[nodiscard]] bool is(Kind k) const noexcept { return kind == k; }
  /// The member `key` of an object, or nullptr.
  [[nodiscard]] const Json* find(std::string_view key) const {
    if (kind != Kind::object) return nullptr;
    for (const auto& [k, v] : members)
      if (k == key) return &v;
    return nullptr;
  }
};

/// Thrown on text that is not one JSON value; what() names the column.
struct json_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  Json document() {
    Json v = value(0);
    space();
    if (at_ != s_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw json_error(what + " at column " + std::to_string(at_ + 1));
  }
  void space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\r' || s_[at_] == '\n')) ++at_;
  }
  bool eat(char c) {
    space();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(at_ >= s_.size() ? std::string("the line ends early (expected '") + c + "')"
                                       : std::string("expected '") + c + "'");
  }
  Json value(int depth) {
    if (depth > 64) fail("nesting too deep");
    space();
    if (at_ >= s_.size()) fail("the line ends early (expected a value)");
    Json v;
    const char c = s_[at_];
    if (c == '{') {
      ++at_;
      v.kind = Json::Kind::object;
      if (eat('}')) return v;
      do {
        space();
        if (at_ >= s_.size() || s_[at_] != '"') fail(at_ >= s_.size() ? "the line ends early (expected a key)" : "expected a key");
        std::string key = string();
        expect(':');
        v.members.emplace_back(std::move(key), value(depth + 1));
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++at_;
      v.kind = Json::Kind::array;
      if (eat(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::Kind::string;
      v.text = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Json::Kind::number;
      const std::size_t start = at_;
      if (s_[at_] == '-') ++at_;
      auto digits = [&] {
        const std::size_t from = at_;
        while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_;
        if (at_ == from) fail("a number without digits");
      };
      digits();
      if (at_ < s_.size() && s_[at_] == '.') ++at_, digits();
      if (at_ < s_.size() && (s_[at_] == 'e' || s_[at_] == 'E')) {
        ++at_;
        if (at_ < s_.size() && (s_[at_] == '+' || s_[at_] == '-')) ++at_;
        digits();
      }
      v.text = std::string(s_.substr(start, at_ - start));
    } else if (word("true")) {
      v.kind = Json::Kind::boolean;
      v.boolean = true;
    } else if (word("false")) {
      v.kind = Json::Kind::boolean;
    } else if (word("null")) {
      v.kind = Json::Kind::null;
    } else {
      fail("not a JSON value");
    }
    return v;
  }
  bool word(std::string_view w) {
    if (s_.substr(at_, w.size()) != w) return false;
    at_ += w.size();
    return true;
  }
  std::string string() {
    ++at_;  // the opening quote
    std::string out;
    for (;;) {
      if (at_ >= s_.size()) fail("the line ends inside a string");
      const char c = s_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= s_.size()) fail("the line ends inside a string");
      const char e = s_[at_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (at_ + 4 > s_.size()) fail("the line ends inside a string");
          unsigned code = 0;
          for (int i = 0; i < 4; ++i) {
            const char h = s_[at_++];
            code = code * 16 + static_cast<unsigned>(h >= '0' && h <= '9'   ? h - '0'
                                                     : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                                     : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                                            : (fail("a bad \\u escape"), 0));
          }
          // Traces escape control characters only; keep other code points as UTF-8.
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default: fail("a bad escape in a string");
      }
    }
  }

  std::string_view s_;
  std::size_t at_ = 0;
};

}  // namespace detail

/// Parse one JSON value (the whole of `text`). @throws json_error
inline Json parse_json(std::string_view text) { return detail::Reader(text).document(); }

}  // namespace reprosgd_diff
