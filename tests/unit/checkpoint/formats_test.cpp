// SPDX-License-Identifier: BSD-3-Clause
// Formats: the CheckpointFormat concept, bit-exact float round trips in every format, exact float text.
#include "checkpoint_test_support.hpp"

#include <reprosgd/checkpoint/float_text.hpp>
#include <reprosgd/checkpoint/formats.hpp>

#include <cereal/types/array.hpp>
#include <cereal/types/map.hpp>
#include <cereal/types/optional.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/tuple.hpp>
#include <cereal/types/utility.hpp>
#include <cereal/types/vector.hpp>
#include <doctest/doctest.h>

#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

struct NotAFormat {
  using output_archive = std::ostream;  // not a cereal archive
  using input_archive = std::istream;
  static constexpr std::string_view name = "x";
  static constexpr std::uint32_t format_version = 1;
};
struct NoName {
  using output_archive = cereal::BinaryOutputArchive;
  using input_archive = cereal::BinaryInputArchive;
  static constexpr std::uint32_t format_version = 1;
};
struct ZeroVersion {
  using output_archive = cereal::BinaryOutputArchive;
  using input_archive = cereal::BinaryInputArchive;
  static constexpr std::string_view name = "z";
  static constexpr std::uint32_t format_version = 0;
};
struct SwappedArchives {
  using output_archive = cereal::BinaryInputArchive;
  using input_archive = cereal::BinaryOutputArchive;
  static constexpr std::string_view name = "s";
  static constexpr std::uint32_t format_version = 1;
};
static_assert(!reprosgd::CheckpointFormat<NotAFormat>);
static_assert(!reprosgd::CheckpointFormat<NoName>);
static_assert(!reprosgd::CheckpointFormat<ZeroVersion>);
static_assert(!reprosgd::CheckpointFormat<SwappedArchives>);
static_assert(!reprosgd::CheckpointFormat<int>);
static_assert(std::is_same_v<reprosgd::DefaultCheckpointFormat, reprosgd::PortableBinaryFormat>);

template <class F, class T>
T round_trip(const T& value) {
  std::stringstream ss;
  {
    typename F::output_archive ar(ss);
    ar(cereal::make_nvp("value", value));
  }
  T out{};
  {
    typename F::input_archive ar(ss);
    ar(cereal::make_nvp("value", out));
  }
  return out;
}

struct Nested {
  std::int8_t i8 = 0;
  std::uint8_t u8 = 0;
  std::int16_t i16 = 0;
  std::uint16_t u16 = 0;
  std::int32_t i32 = 0;
  std::uint32_t u32 = 0;
  std::int64_t i64 = 0;
  std::uint64_t u64 = 0;
  long long ll = 0;
  unsigned long long ull = 0;
  bool flag = false;
  char c = 0;
  std::string text;
  std::vector<double> values;
  std::map<std::string, float> by_name;
  std::array<std::uint32_t, 3> fixed{};
  std::pair<int, float> pair{};
  std::tuple<std::string, double> tuple{};
  std::optional<float> maybe;
  std::vector<std::vector<float>> ragged;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(CEREAL_NVP(i8), CEREAL_NVP(u8), CEREAL_NVP(i16), CEREAL_NVP(u16), CEREAL_NVP(i32), CEREAL_NVP(u32),
       CEREAL_NVP(i64), CEREAL_NVP(u64), CEREAL_NVP(ll), CEREAL_NVP(ull), CEREAL_NVP(flag), CEREAL_NVP(c),
       CEREAL_NVP(text), CEREAL_NVP(values), CEREAL_NVP(by_name), CEREAL_NVP(fixed), CEREAL_NVP(pair),
       CEREAL_NVP(tuple), CEREAL_NVP(maybe), CEREAL_NVP(ragged));
  }
  bool operator==(const Nested& o) const {
    // Compare the floating members by bits (a NaN is in there).
    auto bits = [](const auto& v) {
      std::vector<std::uint64_t> b;
      for (double d : v) b.push_back(std::bit_cast<std::uint64_t>(d));
      return b;
    };
    std::map<std::string, std::uint32_t> m1, m2;
    for (auto& [k, v] : by_name) m1[k] = std::bit_cast<std::uint32_t>(v);
    for (auto& [k, v] : o.by_name) m2[k] = std::bit_cast<std::uint32_t>(v);
    return i8 == o.i8 && u8 == o.u8 && i16 == o.i16 && u16 == o.u16 && i32 == o.i32 && u32 == o.u32 &&
           i64 == o.i64 && u64 == o.u64 && ll == o.ll && ull == o.ull && flag == o.flag && c == o.c &&
           text == o.text && bits(values) == bits(o.values) && m1 == m2 && fixed == o.fixed &&
           pair.first == o.pair.first && std::bit_cast<std::uint32_t>(pair.second) == std::bit_cast<std::uint32_t>(o.pair.second) &&
           std::get<0>(tuple) == std::get<0>(o.tuple) &&
           std::bit_cast<std::uint64_t>(std::get<1>(tuple)) == std::bit_cast<std::uint64_t>(std::get<1>(o.tuple)) &&
           maybe.has_value() == o.maybe.has_value() &&
           (!maybe || std::bit_cast<std::uint32_t>(*maybe) == std::bit_cast<std::uint32_t>(*o.maybe)) && ragged == o.ragged;
  }
};

Nested make_nested() {
  Nested n;
  n.i8 = std::numeric_limits<std::int8_t>::min();
  n.u8 = 255;
  n.i16 = -32768;
  n.u16 = 65535;
  n.i32 = std::numeric_limits<std::int32_t>::min();
  n.u32 = 0xFFFFFFFFu;
  n.i64 = std::numeric_limits<std::int64_t>::min();
  n.u64 = std::numeric_limits<std::uint64_t>::max();
  n.ll = -1234567890123456789LL;
  n.ull = 18446744073709551615ULL;
  n.flag = true;
  n.c = 'x';
  n.text = "tab\there \"quoted\" \xc3\xa9";
  n.values = {0.1, -0.0, std::bit_cast<double>(0x7ff8000000000123ULL), 4.9e-324, 1e308};
  n.by_name = {{"lr", 0.001f}, {"inf", std::numeric_limits<float>::infinity()}};
  n.fixed = {1, 2, 3};
  n.pair = {-7, 2.5f};
  n.tuple = {"t", -1e-310};
  n.maybe = 3.25f;
  n.ragged = {{}, {1.f}, {2.f, 3.f}};
  return n;
}

// Float and double bit patterns that break naive encodings.
const std::vector<std::uint32_t> special_float_bits = {
    0x00000000, 0x80000000,  // ±0
    0x00000001, 0x80000001, 0x007fffff, 0x807fffff,  // subnormals: smallest and largest
    0x00800000, 0x7f7fffff, 0xff7fffff,  // smallest normal, ±largest finite
    0x7f800000, 0xff800000,  // ±inf
    0x7fc00000, 0xffc00000, 0x7fc00001, 0x7fffffff, 0xffffffff,  // quiet NaNs with payloads and sign
    0x7f800001, 0x7fa00000, 0xff800001,  // signalling NaNs
    0x3dcccccd, 0x3f800000, 0x3eaaaaab, 0x4b800001, 0x33800000};
const std::vector<std::uint64_t> special_double_bits = {
    0x0000000000000000, 0x8000000000000000, 0x0000000000000001, 0x800fffffffffffff, 0x0010000000000000,
    0x7fefffffffffffff, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000, 0xfff8000000000000,
    0x7ff8000000000001, 0x7ff0000000000001, 0x7fffffffffffffff, 0x3fb999999999999a, 0x3fd5555555555555};

}  // namespace

TEST_SUITE("checkpoint.formats") {
  TEST_CASE_TEMPLATE_DEFINE("every serialized type round-trips bit for bit", F, formats_round_trip) {
    const Nested n = make_nested();
    CHECK(round_trip<F>(n) == n);

    const ckpt_test::State s = ckpt_test::make_state(11);
    ckpt_test::State t = ckpt_test::shaped_like(s);
    {
      std::stringstream ss;
      {
        typename F::output_archive ar(ss);
        ar(cereal::make_nvp("state", s));
      }
      typename F::input_archive ar(ss);
      ar(cereal::make_nvp("state", t));
    }
    CHECK(ckpt_test::same_bits(s, t));
  }

  TEST_CASE_TEMPLATE_DEFINE("special floats round-trip bit for bit", F, formats_special_floats) {
    std::vector<float> f;
    for (auto b : special_float_bits) f.push_back(std::bit_cast<float>(b));
    std::vector<double> d;
    for (auto b : special_double_bits) d.push_back(std::bit_cast<double>(b));
    std::mt19937_64 gen(2024);
    for (int i = 0; i < 2000; ++i) {
      f.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(gen())));
      d.push_back(std::bit_cast<double>(gen()));
    }
    const auto f2 = round_trip<F>(f);
    const auto d2 = round_trip<F>(d);
    REQUIRE(f2.size() == f.size());
    REQUIRE(d2.size() == d.size());
    for (std::size_t i = 0; i < f.size(); ++i) {
      INFO("float #" << i << " bits " << std::hex << std::bit_cast<std::uint32_t>(f[i]));
      CHECK(std::bit_cast<std::uint32_t>(f2[i]) == std::bit_cast<std::uint32_t>(f[i]));
    }
    for (std::size_t i = 0; i < d.size(); ++i) {
      INFO("double #" << i << " bits " << std::hex << std::bit_cast<std::uint64_t>(d[i]));
      CHECK(std::bit_cast<std::uint64_t>(d2[i]) == std::bit_cast<std::uint64_t>(d[i]));
    }
    // Single scalars take a different path in the JSON archive (a named value, not an array item).
    for (auto b : special_float_bits) {
      CHECK(std::bit_cast<std::uint32_t>(round_trip<F>(std::bit_cast<float>(b))) == b);
    }
    for (auto b : special_double_bits) {
      CHECK(std::bit_cast<std::uint64_t>(round_trip<F>(std::bit_cast<double>(b))) == b);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(formats_round_trip, ckpt_test::all_formats);
  TEST_CASE_TEMPLATE_APPLY(formats_special_floats, ckpt_test::all_formats);

  TEST_CASE("JSON writes floats as exact text strings") {
    std::stringstream ss;
    {
      reprosgd::JsonOutputArchive ar(ss);
      ar(cereal::make_nvp("lr", 0.1f), cereal::make_nvp("nan", std::bit_cast<float>(0x7fc00001u)),
         cereal::make_nvp("neg_zero", -0.0), cereal::make_nvp("inf", -std::numeric_limits<double>::infinity()),
         cereal::make_nvp("n", 42));
    }
    const std::string json = ss.str();
    CHECK(json.find("\"lr\": \"0.1\"") != std::string::npos);
    CHECK(json.find("\"nan\": \"nan:7fc00001\"") != std::string::npos);
    CHECK(json.find("\"neg_zero\": \"-0\"") != std::string::npos);
    CHECK(json.find("\"inf\": \"-inf\"") != std::string::npos);
    CHECK(json.find("\"n\": 42") != std::string::npos);
  }

  TEST_CASE("JSON refuses integers that do not fit the destination") {
    std::stringstream ss;
    {
      reprosgd::JsonOutputArchive ar(ss);
      ar(cereal::make_nvp("v", std::int64_t{300}));
    }
    std::int8_t small = 0;
    reprosgd::JsonInputArchive ar(ss);
    CHECK_THROWS_WITH_AS(ar(cereal::make_nvp("v", small)),
                         "reprosgd::JsonInputArchive: integer 300 does not fit the destination type", cereal::Exception);
  }
}

TEST_SUITE("checkpoint.float_text") {
  TEST_CASE("known texts") {
    CHECK(reprosgd::exact_float_text(0.1f) == "0.1");
    CHECK(reprosgd::exact_float_text(0.001f) == "0.001");
    CHECK(reprosgd::exact_float_text(0.1) == "0.1");
    CHECK(reprosgd::exact_float_text(-0.0f) == "-0");
    CHECK(reprosgd::exact_float_text(0.0) == "0");
    CHECK(reprosgd::exact_float_text(std::bit_cast<float>(1u)) == "1e-45");
    CHECK(reprosgd::exact_float_text(std::numeric_limits<float>::infinity()) == "inf");
    CHECK(reprosgd::exact_float_text(-std::numeric_limits<double>::infinity()) == "-inf");
    CHECK(reprosgd::exact_float_text(std::bit_cast<float>(0x7fc00001u)) == "nan:7fc00001");
    CHECK(reprosgd::exact_float_text(std::bit_cast<float>(0xff800001u)) == "nan:ff800001");
    CHECK(reprosgd::exact_float_text(std::bit_cast<double>(0x7ff8000000000000ULL)) == "nan:7ff8000000000000");
  }

  TEST_CASE("parse errors name the text") {
    using reprosgd::exact_float_from_text;
    CHECK_THROWS_WITH_AS(exact_float_from_text<float>("abc"), "reprosgd::exact_float_from_text: \"abc\" is not a float: not a number",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS(exact_float_from_text<float>("nan:7f80000"),
                         "reprosgd::exact_float_from_text: \"nan:7f80000\" is not a float: a NaN needs exactly all hex digits of its bit pattern",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS(exact_float_from_text<float>("nan:3f800000"),
                         "reprosgd::exact_float_from_text: \"nan:3f800000\" is not a float: the bit pattern after \"nan:\" is not a NaN",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS(exact_float_from_text<double>("1.5x"), "reprosgd::exact_float_from_text: \"1.5x\" is not a double: not a number",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS(exact_float_from_text<double>("nan"), "reprosgd::exact_float_from_text: \"nan\" is not a double: not a number",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS(exact_float_from_text<float>("1e39"), "reprosgd::exact_float_from_text: \"1e39\" is not a float: out of range",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS(exact_float_from_text<float>(""), "reprosgd::exact_float_from_text: \"\" is not a float: empty text",
                         reprosgd::data_error);
  }

  TEST_CASE("a wide sweep of float bit patterns round-trips through text") {
    // Every 4093rd pattern (about a million), which crosses every exponent and both signs.
    std::uint64_t bad = 0;
    for (std::uint64_t b = 0; b <= 0xFFFFFFFFull; b += 4093) {
      const float f = std::bit_cast<float>(static_cast<std::uint32_t>(b));
      const float g = reprosgd::exact_float_from_text<float>(reprosgd::exact_float_text(f));
      bad += std::bit_cast<std::uint32_t>(g) != static_cast<std::uint32_t>(b);
    }
    CHECK(bad == 0);
    std::mt19937_64 gen(7);
    for (int i = 0; i < 200000; ++i) {
      const std::uint64_t b = gen();
      const double d = std::bit_cast<double>(b);
      const double e = reprosgd::exact_float_from_text<double>(reprosgd::exact_float_text(d));
      bad += std::bit_cast<std::uint64_t>(e) != b;
    }
    CHECK(bad == 0);
  }
}
