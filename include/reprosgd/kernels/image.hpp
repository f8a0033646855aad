// SPDX-License-Identifier: BSD-3-Clause
/// @file ImageShape and WindowGeometry: the vocabulary of the image kernels (convolution and
/// pooling). A sample is one row of a Matrix holding its H x W x C floats in NHWC order:
/// element (h, w, c) is at (h * W + w) * C + c (docs/layers.md, "Tensor layout").
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>

#include <string>

REPROSGD_BEGIN_NAMESPACE

/// The shape of one image sample: channels x height x width, stored height, width, channel.
struct ImageShape {
  int channels = 0;
  int height = 0;
  int width = 0;

  /// Floats per sample.
  [[nodiscard]] constexpr long size() const noexcept {
    return static_cast<long>(channels) * static_cast<long>(height) * static_cast<long>(width);
  }
  /// "CxHxW", as messages and descriptions write it.
  [[nodiscard]] std::string text() const {
    return std::to_string(channels) + "x" + std::to_string(height) + "x" + std::to_string(width);
  }
  friend constexpr bool operator==(const ImageShape&, const ImageShape&) = default;

  /// Throws config_error, named after `who` (e.g. "reprosgd::Flatten"), unless the shape is
  /// positive and `received`, the width the layer is given, is its size.
  void check_input(const char* who, int received) const {
    const std::string w = who;
    if (channels <= 0 || height <= 0 || width <= 0)
      throw config_error(w + ": the input shape must be positive, got " + text());
    if (received != size())
      throw config_error(w + ": expects " + text() + " = " + std::to_string(size()) + " inputs, receives " +
                         std::to_string(received));
  }
};

/**
 * A square window of `kernel` x `kernel` pixels moved by `stride` over an input padded by `padding`
 * on every side (convolution and pooling): output pixel (oh, ow) sees input rows
 * oh * stride - padding + kh and columns ow * stride - padding + kw, kh and kw in [0, kernel).
 * The output has floor((H + 2 padding - kernel) / stride) + 1 rows (and columns likewise): a
 * window never hangs over the padded input's end (PyTorch's rule, ceil_mode off).
 */
struct WindowGeometry {
  ImageShape in;
  int kernel = 1;
  int stride = 1;
  int padding = 0;

  [[nodiscard]] constexpr int out_height() const noexcept { return (in.height + 2 * padding - kernel) / stride + 1; }
  [[nodiscard]] constexpr int out_width() const noexcept { return (in.width + 2 * padding - kernel) / stride + 1; }
  /// Output pixels per sample.
  [[nodiscard]] constexpr long out_pixels() const noexcept {
    return static_cast<long>(out_height()) * static_cast<long>(out_width());
  }

  /// Throws config_error, named after `who` (e.g. "reprosgd::Conv2D"), unless the shape and window
  /// are positive and the kernel fits the padded input.
  void check(const char* who) const {
    const std::string w = who;
    in.check_input(who, static_cast<int>(in.size()));  // the shape alone: the layer checks its width
    if (kernel <= 0) throw config_error(w + ": kernel must be positive, got " + std::to_string(kernel));
    if (stride <= 0) throw config_error(w + ": stride must be positive, got " + std::to_string(stride));
    if (padding < 0) throw config_error(w + ": padding must not be negative, got " + std::to_string(padding));
    if (kernel > in.height + 2 * padding || kernel > in.width + 2 * padding)
      throw config_error(w + ": kernel " + std::to_string(kernel) + " is larger than the padded input " +
                         std::to_string(in.height + 2 * padding) + "x" + std::to_string(in.width + 2 * padding) +
                         " (input " + in.text() + ", padding " + std::to_string(padding) + ")");
  }
};

REPROSGD_END_NAMESPACE
