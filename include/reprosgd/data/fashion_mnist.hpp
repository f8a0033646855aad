// SPDX-License-Identifier: BSD-3-Clause
/// @file Loader for Fashion-MNIST (and MNIST, same file names) from a folder of IDX files.
#pragma once

#include <reprosgd/data/dataset.hpp>
#include <reprosgd/data/idx_reader.hpp>
#include <reprosgd/error.hpp>

#include <sys/stat.h>

#include <initializer_list>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/// Where Debian's `dataset-fashion-mnist` package installs the files.
inline constexpr const char* default_fashion_mnist_dir = "/usr/share/datasets/fashion-mnist";

namespace detail {

inline bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The file `stem` in `dir`, gzip-compressed (stem.gz, as distributed) or not; "" when neither exists.
inline std::string find_idx_file(const std::string& dir, const char* stem) {
  const std::string base = dir + "/" + stem;
  if (is_regular_file(base + ".gz")) return base + ".gz";
  if (is_regular_file(base)) return base;
  return {};
}

inline constexpr const char* fashion_mnist_files[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                                       "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

}  // namespace detail

/**
 * True when `dir` holds the four Fashion-MNIST files, each either gzip-compressed (`.gz`, as
 * distributed) or not: train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
 * t10k-labels-idx1-ubyte. Checks only that they exist; load_fashion_mnist() checks their contents.
 */
[[nodiscard]] inline bool fashion_mnist_available(const std::string& dir = default_fashion_mnist_dir) {
  for (const char* stem : detail::fashion_mnist_files)
    if (detail::find_idx_file(dir, stem).empty()) return false;
  return true;
}

/**
 * Loads Fashion-MNIST (60000 training and 10000 test images of 28 x 28 pixels, 10 classes; the
 * original MNIST folder works too) into host Datasets, features = pixel / 255.0f.
 *
 * @param dir the folder of the four IDX files (see fashion_mnist_available()).
 * @returns { train, test }.
 * @throws io_error "reprosgd::load_fashion_mnist: <dir>/train-images-idx3-ubyte(.gz) not found"
 *         when a file is missing; everything read_idx_dataset() throws; data_error when the images
 *         are not 28 x 28.
 */
[[nodiscard]] inline TrainTest<Kokkos::HostSpace> load_fashion_mnist(const std::string& dir = default_fashion_mnist_dir) {
  std::string paths[4];
  for (int k = 0; k < 4; ++k) {
    paths[k] = detail::find_idx_file(dir, detail::fashion_mnist_files[k]);
    if (paths[k].empty())
      throw io_error("reprosgd::load_fashion_mnist: " + dir + "/" + detail::fashion_mnist_files[k] + "(.gz) not found");
  }
  TrainTest<Kokkos::HostSpace> out;
  out.train = read_idx_dataset(paths[0], paths[1], 10);
  out.test = read_idx_dataset(paths[2], paths[3], 10);
  for (const auto* d : {&out.train, &out.test})
    if (d->feature_count() != 28 * 28)
      throw data_error("reprosgd::load_fashion_mnist: " + dir + ": expected 28 x 28 = 784 pixels per image, found " +
                       std::to_string(d->feature_count()));
  out.train.sample_shape = out.test.sample_shape = ImageShape{1, 28, 28};
  return out;
}

REPROSGD_END_NAMESPACE
