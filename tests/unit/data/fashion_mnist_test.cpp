// SPDX-License-Identifier: BSD-3-Clause
/// @file Tests of reprosgd/data/fashion_mnist.hpp against the real files (skipped when absent).
#include <reprosgd/data/fashion_mnist.hpp>

#include "data_test_support.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

TEST_SUITE("data/fashion_mnist") {
  TEST_CASE("the real Fashion-MNIST: sizes, first labels, class counts, pixels") {
    if (!reprosgd::fashion_mnist_available()) {
      MESSAGE("Fashion-MNIST not found in " << reprosgd::default_fashion_mnist_dir << ": test skipped");
      return;
    }
    const auto fm = reprosgd::load_fashion_mnist();
    REQUIRE(fm.train.size() == 60000);
    REQUIRE(fm.test.size() == 10000);
    CHECK(fm.train.feature_count() == 784);
    CHECK(fm.test.feature_count() == 784);
    CHECK(fm.train.num_classes == 10);
    const std::int32_t train_first[10] = {9, 0, 0, 3, 0, 2, 7, 2, 5, 5};
    const std::int32_t test_first[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    for (std::size_t i = 0; i < 10; ++i) {
      CHECK(fm.train.labels(i) == train_first[i]);
      CHECK(fm.test.labels(i) == test_first[i]);
    }
    std::vector<int> train_count(10, 0), test_count(10, 0);
    for (std::size_t i = 0; i < fm.train.size(); ++i) ++train_count[static_cast<std::size_t>(fm.train.labels(i))];
    for (std::size_t i = 0; i < fm.test.size(); ++i) ++test_count[static_cast<std::size_t>(fm.test.labels(i))];
    for (int c = 0; c < 10; ++c) {
      CHECK(train_count[static_cast<std::size_t>(c)] == 6000);
      CHECK(test_count[static_cast<std::size_t>(c)] == 1000);
    }
    // Image 0 of the training set: pixel sum 76247, first non-zero pixels 96 (1), 99 (13), 100 (73),
    // the maximum 255 first at 417. Pixel sums of the whole sets: 3431114169 and 573469082.
    CHECK(fm.train.features(0, 95) == 0.0f);
    CHECK(fm.train.features(0, 96) == 1.0f / 255.0f);
    CHECK(fm.train.features(0, 99) == 13.0f / 255.0f);
    CHECK(fm.train.features(0, 100) == 73.0f / 255.0f);
    CHECK(fm.train.features(0, 417) == 1.0f);
    auto pixel_sum = [](const reprosgd::Dataset<>& d, std::size_t first, std::size_t last) {
      std::uint64_t s = 0;
      for (std::size_t i = first; i < last; ++i)
        for (int j = 0; j < d.feature_count(); ++j)
          s += static_cast<std::uint64_t>(d.features(i, static_cast<std::size_t>(j)) * 255.0f + 0.5f);
      return s;
    };
    CHECK(pixel_sum(fm.train, 0, 1) == 76247);
    CHECK(pixel_sum(fm.train, 0, fm.train.size()) == 3431114169ULL);
    CHECK(pixel_sum(fm.test, 0, fm.test.size()) == 573469082ULL);
  }

  TEST_CASE("availability and a missing folder") {
    reprosgd_test::TempDir dir;
    CHECK_FALSE(reprosgd::fashion_mnist_available(dir.path()));
    CHECK_THROWS_WITH_AS((void)reprosgd::load_fashion_mnist(dir.path()),
                         ("reprosgd::load_fashion_mnist: " + dir.path() + "/train-images-idx3-ubyte(.gz) not found").c_str(),
                         reprosgd::io_error);
    // Uncompressed files (MNIST-style tiny stand-ins) are found too.
    const std::vector<std::uint8_t> px(2 * 28 * 28, 17);
    reprosgd_test::write_file(dir.file("train-images-idx3-ubyte"), reprosgd_test::idx_bytes(0x00000803, {2, 28, 28}, px));
    reprosgd_test::write_gzip(dir.file("train-labels-idx1-ubyte.gz"), reprosgd_test::idx_bytes(0x00000801, {2}, {3, 4}));
    CHECK_FALSE(reprosgd::fashion_mnist_available(dir.path()));
    reprosgd_test::write_file(dir.file("t10k-images-idx3-ubyte"), reprosgd_test::idx_bytes(0x00000803, {1, 28, 28}, std::vector<std::uint8_t>(784, 0)));
    reprosgd_test::write_file(dir.file("t10k-labels-idx1-ubyte"), reprosgd_test::idx_bytes(0x00000801, {1}, {9}));
    REQUIRE(reprosgd::fashion_mnist_available(dir.path()));
    const auto tt = reprosgd::load_fashion_mnist(dir.path());
    CHECK(tt.train.size() == 2);
    CHECK(tt.test.size() == 1);
    CHECK(tt.train.labels(1) == 4);
    CHECK(tt.test.labels(0) == 9);
    CHECK(tt.train.features(1, 783) == 17.0f / 255.0f);
  }
}
