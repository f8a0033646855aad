// SPDX-License-Identifier: BSD-3-Clause
/// @file Tests of reprosgd/data/idx_reader.hpp: contents of plain and gzip files, and every error
/// message exactly (missing file, directory, empty, bad magic, truncation, forged sizes, corrupt gzip).
#include <reprosgd/data/idx_reader.hpp>

#include "data_test_support.hpp"

#include <doctest/doctest.h>

#include <sys/resource.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using reprosgd_test::idx_bytes;
using reprosgd_test::TempDir;
using reprosgd_test::write_file;
using reprosgd_test::write_gzip;

namespace {

// 3 images of 2 x 2 pixels and their labels.
const std::vector<std::uint8_t> pixels = {0, 255, 51, 102, 1, 2, 3, 4, 254, 128, 127, 0};
const std::vector<std::uint8_t> image_file = idx_bytes(0x00000803, {3, 2, 2}, pixels);
const std::vector<std::uint8_t> label_file = idx_bytes(0x00000801, {3}, {7, 0, 9});

// The big-endian bytes of floats, as an IDX file of type 0x0D stores them.
std::vector<std::uint8_t> float_bytes(const std::vector<float>& values) {
  std::vector<std::uint8_t> out;
  for (const float v : values) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(bits >> shift));
  }
  return out;
}

std::vector<std::uint8_t> prefix(const std::vector<std::uint8_t>& bytes, std::size_t n) {
  return {bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)};
}

long peak_rss_kib() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

}  // namespace

TEST_SUITE("data/idx_reader") {
  TEST_CASE("read_idx reads plain and gzip files alike, detecting gzip by its magic bytes") {
    TempDir dir;
    write_file(dir.file("images.idx"), image_file);
    write_gzip(dir.file("images.gz"), image_file);
    write_gzip(dir.file("gzip-without-suffix"), image_file);
    write_file(dir.file("plain-with-gz-suffix.gz"), image_file);
    for (const char* name : {"images.idx", "images.gz", "gzip-without-suffix", "plain-with-gz-suffix.gz"}) {
      CAPTURE(name);
      const reprosgd::IdxArray a = reprosgd::read_idx(dir.file(name));
      CHECK(a.type_code == 0x08);
      CHECK(a.dims == std::vector<std::size_t>{3, 2, 2});
      CHECK(a.element_count() == 12);
      CHECK(a.data == pixels);
    }
    write_gzip(dir.file("labels.gz"), label_file);
    const auto l = reprosgd::read_idx(dir.file("labels.gz"));
    CHECK(l.dims == std::vector<std::size_t>{3});
    CHECK(l.data == std::vector<std::uint8_t>{7, 0, 9});
  }

  TEST_CASE("read_idx_dataset: features are pixel / 255.0f, labels as stored") {
    TempDir dir;
    write_gzip(dir.file("x.gz"), image_file);
    write_file(dir.file("y"), label_file);
    const auto d = reprosgd::read_idx_dataset(dir.file("x.gz"), dir.file("y"), 10);
    REQUIRE(d.size() == 3);
    REQUIRE(d.feature_count() == 4);
    CHECK(d.num_classes == 10);
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 4; ++j) {
        const float expected = static_cast<float>(pixels[i * 4 + j]) / 255.0f;
        CHECK(std::memcmp(&d.features(i, j), &expected, sizeof(float)) == 0);
      }
    CHECK(d.features(0, 0) == 0.0f);
    CHECK(d.features(0, 1) == 1.0f);
    CHECK(d.features(0, 2) == 0.2f);  // 51 / 255 = 0.2 exactly rounds to the float nearest 0.2
    CHECK(d.labels(0) == 7);
    CHECK(d.labels(1) == 0);
    CHECK(d.labels(2) == 9);
  }

  TEST_CASE("a missing file, a directory and a non-regular file are io_errors naming the path") {
    TempDir dir;
    const std::string missing = dir.file("nope.idx");
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(missing),
                         ("reprosgd::read_idx: cannot open " + missing + ": No such file or directory").c_str(),
                         reprosgd::io_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(dir.path()),
                         ("reprosgd::read_idx: cannot open " + dir.path() + ": Is a directory").c_str(), reprosgd::io_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx("/dev/null"),
                         "reprosgd::read_idx: cannot open /dev/null: not a regular file", reprosgd::io_error);
    write_file(dir.file("y"), label_file);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_dataset(missing, dir.file("y")),
                         ("reprosgd::read_idx_dataset: cannot open " + missing + ": No such file or directory").c_str(),
                         reprosgd::io_error);
  }

  TEST_CASE("empty files, plain and gzip") {
    TempDir dir;
    write_file(dir.file("empty"), std::vector<std::uint8_t>{});
    write_gzip(dir.file("empty.gz"), {});
    for (const char* name : {"empty", "empty.gz"}) {
      const std::string p = dir.file(name);
      CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p), ("reprosgd::read_idx: " + p + ": empty file").c_str(),
                           reprosgd::data_error);
    }
  }

  TEST_CASE("bad magic and unsupported element types") {
    TempDir dir;
    const std::string p = dir.file("bad");
    const std::string expected = " (expected 0x0000TTDD: type TT 0x08 or 0x0D, DD 1 to 8 dimensions)";
    write_file(p, idx_bytes(0x12345678, {3}, {1, 2, 3}));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p), ("reprosgd::read_idx: " + p + ": bad magic 0x12345678" + expected).c_str(),
                         reprosgd::data_error);
    write_gzip(p, idx_bytes(0x00000800, {}, {}));  // ubyte, but no dimension
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p), ("reprosgd::read_idx: " + p + ": bad magic 0x00000800" + expected).c_str(),
                         reprosgd::data_error);
    write_file(p, idx_bytes(0x00000809, {1, 1, 1, 1, 1, 1, 1, 1, 1}, {7}));  // 9 dimensions
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p), ("reprosgd::read_idx: " + p + ": bad magic 0x00000809" + expected).c_str(),
                         reprosgd::data_error);
    write_file(p, idx_bytes(0x00000B01, {2}, {0, 1, 0, 2}));  // big-endian shorts
    CHECK_THROWS_WITH_AS(
        (void)reprosgd::read_idx(p),
        ("reprosgd::read_idx: " + p + ": unsupported IDX type 0x0B (0x08, unsigned byte, and 0x0D, float, are supported)").c_str(),
        reprosgd::data_error);
    write_file(p, idx_bytes(0x00000E01, {1}, {0, 0, 0, 0, 0, 0, 0, 0}));  // double
    CHECK_THROWS_WITH_AS(
        (void)reprosgd::read_idx(p),
        ("reprosgd::read_idx: " + p + ": unsupported IDX type 0x0E (0x08, unsigned byte, and 0x0D, float, are supported)").c_str(),
        reprosgd::data_error);
    // "PK\3\4" (a zip archive, not gzip) is just a bad magic.
    write_file(p, std::vector<std::uint8_t>{0x50, 0x4b, 0x03, 0x04, 0, 0, 0, 0});
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p), ("reprosgd::read_idx: " + p + ": bad magic 0x504B0304" + expected).c_str(),
                         reprosgd::data_error);
  }

  TEST_CASE("float files (type 0x0D) of any dimension: the exact bits, big-endian in the file") {
    TempDir dir;
    const std::vector<float> values = {0.1f, -2.5f, 1e-38f, 3.4e38f, -0.0f, 7.0f};
    const auto file = idx_bytes(0x00000D02, {3, 2}, float_bytes(values));
    write_file(dir.file("f.idx"), file);
    write_gzip(dir.file("f.idx.gz"), file);
    for (const char* name : {"f.idx", "f.idx.gz"}) {
      CAPTURE(name);
      const reprosgd::IdxArray a = reprosgd::read_idx(dir.file(name));
      CHECK(a.type() == reprosgd::IdxType::float32);
      CHECK(a.element_size() == 4);
      CHECK(a.dims == std::vector<std::size_t>{3, 2});
      CHECK(a.element_count() == 6);
      CHECK(a.row_width() == 2);
      for (std::size_t i = 0; i < values.size(); ++i) {
        const float v = a.value(i);
        CHECK(std::memcmp(&v, &values[i], sizeof v) == 0);
      }
    }
    // 2-D unsigned bytes are read too; value() is the byte's value.
    write_file(dir.file("b.idx"), idx_bytes(0x00000802, {1, 3}, {1, 2, 255}));
    const auto b = reprosgd::read_idx(dir.file("b.idx"));
    CHECK(b.dims == std::vector<std::size_t>{1, 3});
    CHECK(b.value(2) == 255.0f);
    // Sizes count 4 bytes per float: a truncated data section and the size limit.
    const std::string p = dir.file("cut");
    write_file(p, prefix(file, file.size() - 1));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p), ("reprosgd::read_idx: " + p + ": truncated: expected 36 bytes, found 35").c_str(),
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS(
        (void)reprosgd::read_idx(dir.file("f.idx"), {.max_data_bytes = 23}),
        ("reprosgd::read_idx: " + dir.file("f.idx") + ": header claims 3 x 2 elements of 4 bytes, more than the limit of 23 data bytes")
            .c_str(),
        reprosgd::data_error);
    CHECK(reprosgd::read_idx(dir.file("f.idx"), {.max_data_bytes = 24}).element_count() == 6);
  }

  TEST_CASE("read_idx_regression_dataset: float or byte features of any shape, float targets of any width") {
    TempDir dir;
    // 3 samples of 2 x 2 float features and 2 targets; the same as bytes; one target per sample.
    const std::vector<float> x = {0.5f, -1.0f, 0.25f, 3.0f, 1e-3f, 2.0f, -7.5f, 0.0f, 9.0f, 8.0f, -6.0f, 1.0f / 3.0f};
    const std::vector<float> t = {1.0f, -1.0f, 0.125f, 2.0f, 4.0f, -0.5f};
    write_gzip(dir.file("x.gz"), idx_bytes(0x00000D03, {3, 2, 2}, float_bytes(x)));
    write_file(dir.file("t"), idx_bytes(0x00000D02, {3, 2}, float_bytes(t)));
    write_file(dir.file("t1"), idx_bytes(0x00000D01, {3}, float_bytes({5.0f, 6.0f, 7.0f})));
    write_file(dir.file("xb"), image_file);
    write_file(dir.file("x1"), idx_bytes(0x00000D01, {3}, float_bytes({1.0f, 2.0f, 3.0f})));

    const auto d = reprosgd::read_idx_regression_dataset(dir.file("x.gz"), dir.file("t"));
    REQUIRE(d.size() == 3);
    REQUIRE(d.feature_count() == 4);
    REQUIRE(d.is_regression());
    REQUIRE(d.target_count() == 2);
    CHECK(d.num_classes == 0);
    CHECK(std::memcmp(d.features.data(), x.data(), x.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(d.targets.data(), t.data(), t.size() * sizeof(float)) == 0);

    const auto b = reprosgd::read_idx_regression_dataset(dir.file("xb"), dir.file("t1"));
    REQUIRE(b.feature_count() == 4);
    REQUIRE(b.target_count() == 1);
    for (std::size_t k = 0; k < pixels.size(); ++k) {
      const float expected = static_cast<float>(pixels[k]) / 255.0f;  // as read_idx_dataset's pixels
      CHECK(std::memcmp(b.features.data() + k, &expected, sizeof(float)) == 0);
    }
    CHECK(b.targets(2, 0) == 7.0f);
    CHECK(reprosgd::read_idx_regression_dataset(dir.file("x1"), dir.file("t")).feature_count() == 1);
    const auto f = reprosgd::read_idx_features(dir.file("x.gz"));
    REQUIRE(f.extent(0) == 3);
    REQUIRE(f.extent(1) == 4);
    CHECK(std::memcmp(f.data(), x.data(), x.size() * sizeof(float)) == 0);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_features(dir.file("none")),
                         ("reprosgd::read_idx_features: cannot open " + dir.file("none") + ": No such file or directory").c_str(),
                         reprosgd::io_error);

    const char* who = "reprosgd::read_idx_regression_dataset: ";
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_regression_dataset(dir.file("x.gz"), dir.file("xb")),
                         (who + dir.file("xb") + ": expected floats (IDX type 0x0D), found 0x08 (unsigned byte)").c_str(),
                         reprosgd::data_error);
    write_file(dir.file("t4"), idx_bytes(0x00000D01, {4}, float_bytes({1, 2, 3, 4})));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_regression_dataset(dir.file("x.gz"), dir.file("t4")),
                         (who + std::string("3 samples in ") + dir.file("x.gz") + " but 4 in " + dir.file("t4")).c_str(),
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_regression_dataset(dir.file("none"), dir.file("t")),
                         (who + std::string("cannot open ") + dir.file("none") + ": No such file or directory").c_str(),
                         reprosgd::io_error);
    // Float files are no images or labels.
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_dataset(dir.file("x.gz"), dir.file("t1")),
                         ("reprosgd::read_idx_dataset: " + dir.file("x.gz") + ": expected unsigned bytes (IDX type 0x08), found 0x0D (float)").c_str(),
                         reprosgd::data_error);
  }

  TEST_CASE("truncation at every kind of offset, plain and gzip") {
    TempDir dir;
    const std::string p = dir.file("cut");
    const std::string g = dir.file("cut.gz");
    // image_file: 16-byte header + 12 data bytes = 28 bytes.
    struct Case {
      std::size_t keep;
      std::string what;
    };
    const Case cases[] = {
        {1, "truncated header: expected 4 bytes, found 1"},
        {3, "truncated header: expected 4 bytes, found 3"},
        {4, "truncated header: expected 16 bytes, found 4"},
        {9, "truncated header: expected 16 bytes, found 9"},
        {15, "truncated header: expected 16 bytes, found 15"},
        {16, "truncated: expected 28 bytes, found 16"},
        {17, "truncated: expected 28 bytes, found 17"},
        {27, "truncated: expected 28 bytes, found 27"},
    };
    for (const auto& c : cases) {
      CAPTURE(c.keep);
      write_file(p, prefix(image_file, c.keep));
      CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p), ("reprosgd::read_idx: " + p + ": " + c.what).c_str(),
                           reprosgd::data_error);
      // The same bytes, gzip-compressed: the sizes count uncompressed bytes.
      std::string gz_what = c.what;
      gz_what.replace(gz_what.find(" bytes"), 6, " uncompressed bytes");
      write_gzip(g, prefix(image_file, c.keep));
      CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(g), ("reprosgd::read_idx: " + g + ": " + gz_what).c_str(),
                           reprosgd::data_error);
    }
  }

  TEST_CASE("trailing bytes after the data are an error") {
    TempDir dir;
    auto longer = image_file;
    longer.push_back(0);
    longer.push_back(0);
    const std::string p = dir.file("long");
    write_file(p, longer);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p),
                         ("reprosgd::read_idx: " + p + ": trailing data: expected 28 bytes, found 30").c_str(),
                         reprosgd::data_error);
    write_gzip(p, longer);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p),
                         ("reprosgd::read_idx: " + p + ": trailing data: expected 28 uncompressed bytes, found 30").c_str(),
                         reprosgd::data_error);
  }

  TEST_CASE("zero-sized dimensions") {
    TempDir dir;
    const std::string p = dir.file("zero");
    write_file(p, idx_bytes(0x00000803, {5, 0, 28}, {}));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p), ("reprosgd::read_idx: " + p + ": dimension 1 of 3 is zero").c_str(),
                         reprosgd::data_error);
    write_gzip(p, idx_bytes(0x00000801, {0}, {}));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p), ("reprosgd::read_idx: " + p + ": dimension 0 of 1 is zero").c_str(),
                         reprosgd::data_error);
  }

  TEST_CASE("forged headers claiming huge sizes fail before allocating") {
    TempDir dir;
    const std::string p = dir.file("forged");
    const long rss_before = peak_rss_kib();
    // Over the 4 GiB limit (and over 2^64 as a product): rejected from the header alone.
    write_file(p, idx_bytes(0x00000803, {0xffffffffu, 0xffffffffu, 0xffffffffu}, {1, 2, 3}));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p),
                         ("reprosgd::read_idx: " + p +
                          ": header claims 4294967295 x 4294967295 x 4294967295 elements, more than the limit of "
                          "4294967296 data bytes")
                             .c_str(),
                         reprosgd::data_error);
    write_gzip(p, idx_bytes(0x00000803, {60000, 1000, 1000}, {1, 2, 3}));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p),
                         ("reprosgd::read_idx: " + p +
                          ": header claims 60000 x 1000 x 1000 elements, more than the limit of 4294967296 data bytes")
                             .c_str(),
                         reprosgd::data_error);
    // Under the limit (3.9 GB) but far beyond the data: a plain file is checked against its size,
    // a gzip stream grows its buffer only with the bytes inflated.
    write_file(p, idx_bytes(0x00000803, {3900, 1000, 1000}, {1, 2, 3}));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p),
                         ("reprosgd::read_idx: " + p + ": truncated: expected 3900000016 bytes, found 19").c_str(),
                         reprosgd::data_error);
    write_gzip(p, idx_bytes(0x00000803, {3900, 1000, 1000}, {1, 2, 3}));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p),
                         ("reprosgd::read_idx: " + p + ": truncated: expected 3900000016 uncompressed bytes, found 19").c_str(),
                         reprosgd::data_error);
    // Had either allocated the claimed 3.9 GB (zero-filled by resize), the peak RSS would show it.
    CHECK(peak_rss_kib() - rss_before < 1024 * 1024);
    // A lower limit from the options.
    write_file(p, image_file);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(p, {.max_data_bytes = 11}),
                         ("reprosgd::read_idx: " + p + ": header claims 3 x 2 x 2 elements, more than the limit of 11 data bytes").c_str(),
                         reprosgd::data_error);
    CHECK(reprosgd::read_idx(p, {.max_data_bytes = 12}).data == pixels);
  }

  TEST_CASE("corrupt gzip streams") {
    TempDir dir;
    // Enough incompressible-ish data that the deflate stream spans many bytes.
    std::vector<std::uint8_t> data(4000);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>((i * 2654435761u) >> 13);
    const auto file = idx_bytes(0x00000801, {4000}, data);
    const std::string good = dir.file("good.gz");
    write_gzip(good, file);
    REQUIRE(reprosgd::read_idx(good).data == data);
    const auto gz = reprosgd_test::read_file(good);
    REQUIRE(gz.size() > 100);

    const std::string cut = dir.file("cut.gz");
    write_file(cut, prefix(gz, gz.size() / 2));  // the compressed stream ends mid-way
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(cut),
                         ("reprosgd::read_idx: " + cut + ": corrupt gzip stream: unexpected end of file").c_str(),
                         reprosgd::data_error);

    const std::string crc = dir.file("crc.gz");
    auto bad_crc = gz;
    bad_crc[bad_crc.size() - 8] ^= 0x01;  // the CRC-32 in the gzip trailer
    write_file(crc, bad_crc);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(crc),
                         ("reprosgd::read_idx: " + crc + ": corrupt gzip stream: incorrect data check").c_str(),
                         reprosgd::data_error);

    const std::string garbage = dir.file("garbage.gz");
    auto bad_block = gz;
    bad_block[10] = 0xff;  // first byte of the deflate data: block type 3 does not exist
    write_file(garbage, bad_block);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx(garbage),
                         ("reprosgd::read_idx: " + garbage + ": corrupt gzip stream: invalid block type").c_str(),
                         reprosgd::data_error);
  }

  TEST_CASE("read_idx_dataset: wrong kinds of file, count mismatch, label out of range") {
    TempDir dir;
    const std::string x = dir.file("x");
    const std::string y = dir.file("y");
    write_file(x, image_file);
    write_file(y, label_file);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_dataset(y, y),
                         ("reprosgd::read_idx_dataset: " + y +
                          ": expected an image file with 3 dimensions (magic 0x00000803), found 1")
                             .c_str(),
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_dataset(x, x),
                         ("reprosgd::read_idx_dataset: " + x +
                          ": expected a label file with 1 dimension (magic 0x00000801), found 3")
                             .c_str(),
                         reprosgd::data_error);
    const std::string y4 = dir.file("y4");
    write_gzip(y4, idx_bytes(0x00000801, {4}, {1, 2, 3, 4}));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_dataset(x, y4),
                         ("reprosgd::read_idx_dataset: 3 images in " + x + " but 4 labels in " + y4).c_str(),
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_dataset(x, y, 9),
                         ("reprosgd::read_idx_dataset: " + y + ": label 9 at index 2 is outside [0, 9)").c_str(),
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_dataset(x, y, 0),
                         "reprosgd::read_idx_dataset: num_classes must be in [1, 256] for byte labels, got 0",
                         reprosgd::config_error);
    const std::string bad = dir.file("bad");
    write_file(bad, prefix(label_file, 10));
    CHECK_THROWS_WITH_AS((void)reprosgd::read_idx_dataset(x, bad),
                         ("reprosgd::read_idx_dataset: " + bad + ": truncated: expected 11 bytes, found 10").c_str(),
                         reprosgd::data_error);
    CHECK(reprosgd::read_idx_dataset(x, y, 10).size() == 3);
  }
}
