// SPDX-License-Identifier: BSD-3-Clause
/// @file Tests of reprosgd/data/synthetic.hpp: pinned bits (the same on every compiler and thread
/// count), sample ranges, value grid, class balance and learnability.
#include <reprosgd/data/synthetic.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

std::uint32_t bits(float x) {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

std::uint64_t fnv1a(const void* p, std::size_t n, std::uint64_t h = 1469598103934665603ULL) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= b[i];
    h *= 1099511628211ULL;
  }
  return h;
}

std::uint64_t fingerprint(const reprosgd::Dataset<>& d) {
  const std::uint64_t h = fnv1a(d.features.data(), d.features.span() * sizeof(float));
  return fnv1a(d.labels.data(), d.labels.span() * sizeof(std::int32_t), h);
}

// Test accuracy of the nearest class mean (fit on train): a linear classifier, so an MLP can do
// at least as well.
double nearest_class_mean_accuracy(const reprosgd::Dataset<>& train, const reprosgd::Dataset<>& test) {
  const int c = train.num_classes;
  const std::size_t f = static_cast<std::size_t>(train.feature_count());
  std::vector<double> mean(static_cast<std::size_t>(c) * f, 0.0);
  std::vector<std::size_t> count(static_cast<std::size_t>(c), 0);
  for (std::size_t i = 0; i < train.size(); ++i) {
    const auto y = static_cast<std::size_t>(train.labels(i));
    ++count[y];
    for (std::size_t j = 0; j < f; ++j) mean[y * f + j] += train.features(i, j);
  }
  for (std::size_t k = 0; k < static_cast<std::size_t>(c); ++k)
    for (std::size_t j = 0; j < f; ++j) mean[k * f + j] /= static_cast<double>(count[k]);
  std::size_t correct = 0;
  for (std::size_t i = 0; i < test.size(); ++i) {
    double best = 1e300;
    int best_k = -1;
    for (int k = 0; k < c; ++k) {
      double dist = 0;
      for (std::size_t j = 0; j < f; ++j) {
        const double t = test.features(i, j) - mean[static_cast<std::size_t>(k) * f + j];
        dist += t * t;
      }
      if (dist < best) {
        best = dist;
        best_k = k;
      }
    }
    correct += best_k == test.labels(i) ? 1 : 0;
  }
  return static_cast<double>(correct) / static_cast<double>(test.size());
}

}  // namespace

TEST_SUITE("data/synthetic") {
  TEST_CASE("splitmix64 known answers") {
    // Vigna's splitmix64 seeded with 0 yields 0xe220a8397b1dcdaf first.
    CHECK(reprosgd::detail::splitmix64(0) == 0xe220a8397b1dcdafULL);
    CHECK(reprosgd::detail::hash_coordinates(1, 2, 3, 4) == 0xd55ccd4aeb3ccafbULL);
  }

  TEST_CASE("pinned values: the same bits on every machine, compiler and thread count") {
    const auto d = reprosgd::make_synthetic_classification(42, 6, 5, 3);
    REQUIRE(d.size() == 6);
    REQUIRE(d.feature_count() == 5);
    CHECK(d.num_classes == 3);
    const std::int32_t labels[6] = {1, 0, 2, 1, 0, 1};
    const std::uint32_t row0[5] = {0x00000000, 0x3dfd5180, 0x3ed2c000, 0x3f042790, 0x3f4d3de0};
    const std::uint32_t row1[5] = {0x3f233720, 0x3f800000, 0x3f5c2ae0, 0x3f3a8bd0, 0x3ecc0200};
    const std::uint32_t row5[5] = {0x3f171220, 0x3ee8a3c0, 0x3f19d7d0, 0x3e591900, 0x3eadfca0};
    for (std::size_t i = 0; i < 6; ++i) CHECK(d.labels(i) == labels[i]);
    for (std::size_t j = 0; j < 5; ++j) {
      CHECK(bits(d.features(0, j)) == row0[j]);
      CHECK(bits(d.features(1, j)) == row1[j]);
      CHECK(bits(d.features(5, j)) == row5[j]);
    }
    // A whole 1000 x 784 set, fingerprinted.
    CHECK(fingerprint(reprosgd::make_synthetic_classification(7, 1000, 784, 10)) == 0xd05e9cc809b93c07ULL);
  }

  TEST_CASE("a sample depends only on (seed, global index): ranges compose, seeds differ") {
    const auto whole = reprosgd::make_synthetic_classification(3, 30, 17, 4);
    const auto tail = reprosgd::make_synthetic_classification(3, 12, 17, 4, {.first_sample = 18});
    for (std::size_t i = 0; i < 12; ++i) {
      CHECK(tail.labels(i) == whole.labels(18 + i));
      for (std::size_t j = 0; j < 17; ++j) CHECK(bits(tail.features(i, j)) == bits(whole.features(18 + i, j)));
    }
    const auto tt = reprosgd::make_synthetic_train_test(3, 18, 12, 17, 4);
    CHECK(fingerprint(tt.test) == fingerprint(tail));
    CHECK(tt.train.size() == 18);
    CHECK(fingerprint(reprosgd::make_synthetic_classification(3, 30, 17, 4)) == fingerprint(whole));
    CHECK(fingerprint(reprosgd::make_synthetic_classification(4, 30, 17, 4)) != fingerprint(whole));
  }

  TEST_CASE("values are multiples of 2^-20 in [0, 1]; labels cover the classes evenly") {
    const auto d = reprosgd::make_synthetic_classification(11, 5000, 20, 10);
    std::vector<int> count(10, 0);
    for (std::size_t i = 0; i < d.size(); ++i) {
      REQUIRE(d.labels(i) >= 0);
      REQUIRE(d.labels(i) < 10);
      ++count[static_cast<std::size_t>(d.labels(i))];
      for (std::size_t j = 0; j < 20; ++j) {
        const float v = d.features(i, j);
        REQUIRE(v >= 0.0f);
        REQUIRE(v <= 1.0f);
        const float scaled = v * 1048576.0f;
        REQUIRE(scaled == static_cast<float>(static_cast<std::int32_t>(scaled)));
      }
    }
    for (int c : count) {
      CHECK(c > 400);
      CHECK(c < 600);
    }
  }

  TEST_CASE("the default 784 x 10 problem is learnable but not trivial") {
    const auto tt = reprosgd::make_synthetic_train_test(2024, 6000, 2000);
    CHECK(tt.train.feature_count() == 784);
    CHECK(tt.train.num_classes == 10);
    const double acc = nearest_class_mean_accuracy(tt.train, tt.test);
    MESSAGE("nearest-class-mean test accuracy: " << acc);
    CHECK(acc > 0.75);  // chance is 0.10
    CHECK(acc < 0.95);
    // More separation, easier problem.
    const auto easy = reprosgd::make_synthetic_train_test(2024, 3000, 1000, 784, 10, {.separation = 0.1f});
    CHECK(nearest_class_mean_accuracy(easy.train, easy.test) > 0.99);
  }

  TEST_CASE("argument checks") {
    CHECK_THROWS_WITH_AS((void)reprosgd::make_synthetic_classification(1, 10, 0, 2),
                         "reprosgd::make_synthetic_classification: features must be at least 1, got 0", reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::make_synthetic_classification(1, 10, 3, 0),
                         "reprosgd::make_synthetic_classification: classes must be at least 1, got 0", reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::make_synthetic_classification(1, 10, 3, 2, {.separation = 0.6f}),
                         "reprosgd::make_synthetic_classification: separation must be in [0, 0.5], got 0.600000",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS((void)reprosgd::make_synthetic_classification(1, 10, 3, 2, {.noise = -1.0f}),
                         "reprosgd::make_synthetic_classification: noise must be in [0, 2], got -1.000000", reprosgd::config_error);
    CHECK(reprosgd::make_synthetic_classification(1, 0, 3, 2).size() == 0);
  }
}
