// SPDX-License-Identifier: BSD-3-Clause
/// @file A deterministic synthetic classification data set (class prototypes plus noise), the same
/// bits on every machine and compiler.
///
/// Every value is a pure function of (seed, global sample index, feature) through an integer
/// hash (detail::hash_coordinates, splitmix64), computed in integer fixed point and converted to
/// float exactly: no <random> distribution (their algorithms are implementation-defined), no
/// floating-point rounding at all, so no compiler flag can change a bit.
///
/// The model: class c has a prototype p_c in [0.5 - s, 0.5 + s]^F (s = separation), uniform per
/// feature; sample i has label y_i, uniform over the classes, and features
/// x_ij = clamp(p_{y_i, j} + a * (u1 + u2 + u3 + u4 - 2), 0, 1), with u1..u4 uniform on [0, 1)
/// (an Irwin-Hall approximation of a Gaussian with standard deviation a / sqrt(3); a = noise).
/// With equal isotropic noise the Bayes classifier is linear, so a small MLP learns it; the
/// defaults put a nearest-class-mean classifier at about 85% test accuracy with 784 features and
/// 10 classes (Fashion-MNIST-like difficulty). The class distance grows with sqrt(F): with few
/// features raise the separation.
#pragma once

#include <reprosgd/data/dataset.hpp>
#include <reprosgd/detail/data/splitmix.hpp>
#include <reprosgd/error.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// Options of make_synthetic_classification().
struct SyntheticOptions {
  /// Global index of the first sample generated: sample k of the result is global sample
  /// first_sample + k. Disjoint ranges of one seed give disjoint draws from the same distribution.
  std::uint64_t first_sample = 0;
  /// Half-width s of the interval [0.5 - s, 0.5 + s] the class prototypes are drawn from; in [0, 0.5].
  float separation = 0.04f;
  /// Noise amplitude a: the noise lies in [-2a, 2a) with standard deviation a / sqrt(3); in [0, 2].
  float noise = 0.4f;
};

namespace detail {
// Purposes keep the hash streams of labels, prototypes and noise apart.
inline constexpr std::uint64_t synthetic_label_purpose = 1;
inline constexpr std::uint64_t synthetic_prototype_purpose = 2;
inline constexpr std::uint64_t synthetic_noise_purpose = 3;
inline constexpr std::int64_t synthetic_one = std::int64_t{1} << 20;  // 1.0 in Q20 fixed point
}  // namespace detail

/**
 * Generates n samples of a learnable classification problem with `features` features in [0, 1]
 * and `classes` classes, identical bit for bit on every machine, compiler and thread count.
 *
 * @param seed selects the problem (the class prototypes) and the draws.
 * @param n number of samples.
 * @param features number of features F (784 mimics 28 x 28 images).
 * @param classes number of classes C.
 * @param options first global sample index, separation and noise.
 * @returns a host Dataset; feature values are multiples of 2^-20 in [0, 1].
 * @throws config_error when features < 1, classes < 1, or an option is outside its range.
 *
 * **Example**:
 * @code
 * auto train = reprosgd::make_synthetic_classification(42, 60000, 784, 10);
 * auto test  = reprosgd::make_synthetic_classification(42, 10000, 784, 10, {.first_sample = 60000});
 * @endcode
 */
[[nodiscard]] inline Dataset<Kokkos::HostSpace> make_synthetic_classification(std::uint64_t seed, std::size_t n,
                                                                              int features, int classes,
                                                                              const SyntheticOptions& options = {}) {
  const char* who = "reprosgd::make_synthetic_classification";
  if (features < 1) throw config_error(std::string(who) + ": features must be at least 1, got " + std::to_string(features));
  if (classes < 1) throw config_error(std::string(who) + ": classes must be at least 1, got " + std::to_string(classes));
  if (!(options.separation >= 0.0f && options.separation <= 0.5f))
    throw config_error(std::string(who) + ": separation must be in [0, 0.5], got " + std::to_string(options.separation));
  if (!(options.noise >= 0.0f && options.noise <= 2.0f))
    throw config_error(std::string(who) + ": noise must be in [0, 2], got " + std::to_string(options.noise));
  // The options in Q16 fixed point: a multiplication by a power of two (exact) and a truncation.
  const std::int64_t sep_q16 = static_cast<std::int64_t>(options.separation * 65536.0f);
  const std::int64_t noise_q16 = static_cast<std::int64_t>(options.noise * 65536.0f);

  const std::size_t f = static_cast<std::size_t>(features);
  Kokkos::View<std::int32_t**, Kokkos::LayoutRight, Kokkos::HostSpace> prototype(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::synthetic_prototypes")),
      static_cast<std::size_t>(classes), f);
  for (int c = 0; c < classes; ++c)
    for (std::size_t j = 0; j < f; ++j) {
      const std::uint64_t h = detail::hash_coordinates(seed, detail::synthetic_prototype_purpose,
                                                       static_cast<std::uint64_t>(c), j);
      const std::int64_t centred = static_cast<std::int64_t>(h >> 44) - (std::int64_t{1} << 19);  // Q20 in [-1/2, 1/2)
      // 2 * centred * s: Q20 x Q16 = Q36, shifted back to Q20 (arithmetic shift: floor, as C++20 defines it).
      prototype(c, j) = static_cast<std::int32_t>((std::int64_t{1} << 19) + ((2 * centred * sep_q16) >> 16));
    }

  Dataset<Kokkos::HostSpace> out;
  out.num_classes = classes;
  out.features = Dataset<Kokkos::HostSpace>::features_type(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::synthetic_features")), n, f);
  out.labels = Dataset<Kokkos::HostSpace>::labels_type(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::synthetic_labels")), n);
  const auto x = out.features;
  const auto y = out.labels;
  const std::uint64_t first = options.first_sample;
  const std::uint64_t num_classes = static_cast<std::uint64_t>(classes);
  // Each sample is written by one thread from its own coordinates only: the thread count cannot matter.
  Kokkos::parallel_for(
      "reprosgd::make_synthetic_classification",
      Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::IndexType<std::int64_t>>(0, static_cast<std::int64_t>(n)),
      [=](std::int64_t i) {
        const std::uint64_t g = first + static_cast<std::uint64_t>(i);
        const auto label = static_cast<std::int32_t>(
            detail::hash_coordinates(seed, detail::synthetic_label_purpose, g, 0) % num_classes);
        y(i) = label;
        for (std::size_t j = 0; j < f; ++j) {
          const std::uint64_t h = detail::hash_coordinates(seed, detail::synthetic_noise_purpose, g, j);
          // Four 16-bit uniforms summed and centred: Q16 in [-2, 2).
          const std::int64_t sum = static_cast<std::int64_t>(h & 0xffff) + static_cast<std::int64_t>((h >> 16) & 0xffff) +
                                   static_cast<std::int64_t>((h >> 32) & 0xffff) + static_cast<std::int64_t>(h >> 48);
          const std::int64_t noise = ((sum - (std::int64_t{1} << 17)) * noise_q16) >> 12;  // Q32 -> Q20
          std::int64_t v = prototype(label, j) + noise;
          v = v < 0 ? 0 : (v > detail::synthetic_one ? detail::synthetic_one : v);
          // v <= 2^20 < 2^24: the conversion and the power-of-two scaling are both exact.
          x(i, j) = static_cast<float>(v) * (1.0f / 1048576.0f);
        }
      });
  Kokkos::DefaultHostExecutionSpace().fence();
  return out;
}

/**
 * A training set of global samples [0, n_train) and a test set of samples [n_train, n_train +
 * n_test) of the same problem (same seed, so the same class prototypes): the stand-in for
 * Fashion-MNIST when its files are absent.
 */
[[nodiscard]] inline TrainTest<Kokkos::HostSpace> make_synthetic_train_test(std::uint64_t seed, std::size_t n_train,
                                                                           std::size_t n_test, int features = 784,
                                                                           int classes = 10,
                                                                           SyntheticOptions options = {}) {
  TrainTest<Kokkos::HostSpace> out;
  out.train = make_synthetic_classification(seed, n_train, features, classes, options);
  options.first_sample += n_train;
  out.test = make_synthetic_classification(seed, n_test, features, classes, options);
  return out;
}

REPROSGD_END_NAMESPACE
