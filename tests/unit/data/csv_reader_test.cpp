// SPDX-License-Identifier: BSD-3-Clause
/// @file Tests of reprosgd/data/csv_reader.hpp: parsing, options and every error message exactly.
#include <reprosgd/data/csv_reader.hpp>

#include "data_test_support.hpp"

#include <doctest/doctest.h>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

using reprosgd::CsvHeader;
using reprosgd::CsvOptions;
using reprosgd::parse_csv_dataset;
using reprosgd_test::TempDir;
using reprosgd_test::write_file;

namespace {
std::uint32_t bits(float x) {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
}  // namespace

TEST_SUITE("data/csv_reader") {
  TEST_CASE("features and the last-column label, header detected, CRLF and blank lines") {
    const auto d = parse_csv_dataset("a,b,label\r\n0.5, -1e-3 ,2\r\n\r\n+3,4.25,0\n7,8,1", {}, "t.csv");
    REQUIRE(d.size() == 3);
    REQUIRE(d.feature_count() == 2);
    CHECK(d.num_classes == 3);  // inferred: largest label + 1
    CHECK(d.features(0, 0) == 0.5f);
    CHECK(d.features(0, 1) == -1e-3f);
    CHECK(d.features(1, 0) == 3.0f);
    CHECK(d.features(1, 1) == 4.25f);
    CHECK(d.features(2, 0) == 7.0f);
    CHECK(d.features(2, 1) == 8.0f);
    CHECK(d.labels(0) == 2);
    CHECK(d.labels(1) == 0);
    CHECK(d.labels(2) == 1);
  }

  TEST_CASE("label column, delimiter, explicit header modes, num_classes") {
    const auto d = parse_csv_dataset("1;0.25;0.5\n0;1;2\n", {.label_column = 0, .header = CsvHeader::absent, .delimiter = ';', .num_classes = 4});
    REQUIRE(d.size() == 2);
    REQUIRE(d.feature_count() == 2);
    CHECK(d.num_classes == 4);
    CHECK(d.labels(0) == 1);
    CHECK(d.labels(1) == 0);
    CHECK(d.features(0, 0) == 0.25f);
    CHECK(d.features(1, 1) == 2.0f);
    // A numeric first line is data under detect, skipped under present.
    CHECK(parse_csv_dataset("1,2,0\n3,4,1\n").size() == 2);
    const auto h = parse_csv_dataset("1,2,0\n3,4,1\n", {.header = CsvHeader::present});
    REQUIRE(h.size() == 1);
    CHECK(h.features(0, 0) == 3.0f);
    // A middle label column.
    const auto m = parse_csv_dataset("0.5,1,0.75\n", {.label_column = 1});
    CHECK(m.labels(0) == 1);
    CHECK(m.features(0, 1) == 0.75f);
  }

  TEST_CASE("floats are parsed exactly (std::from_chars round trip)") {
    // Shortest round-trip representations of awkward floats must give back the same bits.
    const float values[] = {0.1f, 1.0f / 3.0f, 3.4028235e38f, 1.17549435e-38f, 1e-45f, -0.0f, 16777217.0f};
    std::string text;
    for (float v : values) {
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof buf, v);
      text += std::string(buf, r.ptr) + ",0\n";
    }
    const auto d = parse_csv_dataset(text, {.header = CsvHeader::absent});
    REQUIRE(d.size() == std::size(values));
    for (std::size_t i = 0; i < std::size(values); ++i) CHECK(bits(d.features(i, 0)) == bits(values[i]));
  }

  TEST_CASE("non-finite values: rejected by default with line and column, accepted on request") {
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,0\n3,nan,1\n", {}, "f.csv"),
                         "reprosgd::read_csv_dataset: f.csv, line 2, column 2: non-finite value 'nan' (set allow_non_finite to accept it)",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("-inf,2,0\n", {}, "f.csv"),
                         "reprosgd::read_csv_dataset: f.csv, line 1, column 1: non-finite value '-inf' (set allow_non_finite to accept it)",
                         reprosgd::data_error);
    const auto d = parse_csv_dataset("1,2,0\n3,NaN,1\n-Infinity,inf,0\n", {.allow_non_finite = true});
    CHECK(d.features(1, 1) != d.features(1, 1));
    CHECK(d.features(2, 0) == -std::numeric_limits<float>::infinity());
    CHECK(d.features(2, 1) == std::numeric_limits<float>::infinity());
  }

  TEST_CASE("error messages name the source, line and column") {
    const CsvOptions opt{.num_classes = 3};
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("x,y,l\n1,2,0\n1,abc,2\n", opt, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv, line 3, column 2: not a number: 'abc'", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,0\n1,,2\n", opt, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv, line 2, column 2: empty field", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,0\n1,2,0\n1,2\n", opt, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv, line 3: expected 3 fields, found 2", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,0\n1,2,0,4\n", opt, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv, line 2: expected 3 fields, found 4", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,0\n1,2,3\n", opt, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv, line 2, column 3: label 3 is outside [0, 3)", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,-1\n", opt, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv, line 1, column 3: label -1 is outside [0, 3)", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,0\n1,2,2.5\n", opt, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv, line 2, column 3: label '2.5' is not an integer", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,0\n1e999,2,0\n", opt, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv, line 2, column 1: value '1e999' is out of the range of float",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,0\n1 2,2,0\n", opt, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv, line 2, column 1: not a number: '1 2'", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,0\n0x10,2,0\n", opt, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv, line 2, column 1: not a number: '0x10'", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("\n\n", opt, "d.csv"), "reprosgd::read_csv_dataset: d.csv: empty file",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("", opt, "d.csv"), "reprosgd::read_csv_dataset: d.csv: empty file",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("a,b,label\n", opt, "d.csv"), "reprosgd::read_csv_dataset: d.csv: no data rows",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("3\n4\n", opt, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv, line 1: expected a label and at least one feature, found 1 field",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,0\n", {.label_column = 3}, "d.csv"),
                         "reprosgd::read_csv_dataset: d.csv: label_column 3 but line 1 has 3 fields", reprosgd::config_error);
  }

  TEST_CASE("regression: the last `targets` columns are float targets, no label column") {
    const auto d = parse_csv_dataset("x1,x2,t1,t2\n1,2,0.5,-0.25\n3,4,1e-3,7\n", {.targets = 2}, "r.csv");
    REQUIRE(d.size() == 2);
    CHECK(d.is_regression());
    CHECK(d.feature_count() == 2);
    CHECK(d.target_count() == 2);
    CHECK(d.labels.extent(0) == 0);
    CHECK(d.num_classes == 0);
    CHECK(d.features(1, 0) == 3.0f);
    CHECK(d.features(1, 1) == 4.0f);
    CHECK(d.targets(0, 1) == -0.25f);
    CHECK(d.targets(1, 0) == 1e-3f);
    const auto one = parse_csv_dataset("1,2,3.5\n", {.targets = 1}, "r.csv");
    CHECK(one.feature_count() == 2);
    CHECK(one.targets(0, 0) == 3.5f);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,3\n", {.targets = 3}, "r.csv"),
                         "reprosgd::read_csv_dataset: r.csv, line 1: expected at least one feature and 3 target(s), found 3 field(s)",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,x\n", {.header = CsvHeader::absent, .targets = 1}, "r.csv"),
                         "reprosgd::read_csv_dataset: r.csv, line 1, column 3: not a number: 'x'", reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,3\n", {.label_column = 0, .targets = 1}, "r.csv"),
                         "reprosgd::read_csv_dataset: targets 1 (regression) has no label column: leave label_column and "
                         "num_classes at their defaults",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)parse_csv_dataset("1,2,3\n", {.targets = -1}, "r.csv"),
                         "reprosgd::read_csv_dataset: targets must be 0 (a label column) or positive, got -1",
                         reprosgd::config_error);
  }

  TEST_CASE("read_csv_dataset reads files; io errors name the path") {
    TempDir dir;
    const std::string p = dir.file("data.csv");
    write_file(p, std::string("f1,f2,y\n0.5,0.25,1\n1,2,0\n"));
    const auto d = reprosgd::read_csv_dataset(p);
    REQUIRE(d.size() == 2);
    CHECK(d.features(0, 1) == 0.25f);
    CHECK(d.labels(0) == 1);
    const std::string missing = dir.file("missing.csv");
    CHECK_THROWS_WITH_AS((void)reprosgd::read_csv_dataset(missing),
                         ("reprosgd::read_csv_dataset: cannot open " + missing + ": No such file or directory").c_str(),
                         reprosgd::io_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_csv_dataset(dir.path()),
                         ("reprosgd::read_csv_dataset: cannot open " + dir.path() + ": Is a directory").c_str(),
                         reprosgd::io_error);
    const std::string empty = dir.file("empty.csv");
    write_file(empty, std::string());
    CHECK_THROWS_WITH_AS((void)reprosgd::read_csv_dataset(empty), ("reprosgd::read_csv_dataset: " + empty + ": empty file").c_str(),
                         reprosgd::data_error);
    write_file(p, std::string("1,2,0\n1,zz,0\n"));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_csv_dataset(p),
                         ("reprosgd::read_csv_dataset: " + p + ", line 2, column 2: not a number: 'zz'").c_str(),
                         reprosgd::data_error);
  }
}
