// SPDX-License-Identifier: BSD-3-Clause
/// @file Flatten: an image's C x H x W floats seen as one feature vector (the identity on NHWC rows).
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/image.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/**
 * The identity from an image to its H x W x C features, in storage (NHWC) order: a sample's row is
 * already flat, so the layer states where the image ends (it checks the shape) and copies. A Dense
 * layer after it sees feature (h * W + w) * C + c — not PyTorch's (c * H + h) * W + w, so weights
 * are not exchanged with a PyTorch model without permuting their rows (docs/layers.md).
 *
 * **Example**: `Flatten{{64, 7, 7}}` (3,136 features).
 */
struct Flatten {
  ImageShape input;

  static constexpr const char* name() noexcept { return "flatten"; }
  [[nodiscard]] int input_width() const noexcept { return static_cast<int>(input.size()); }
  [[nodiscard]] int output_width(int width) const {
    input.check_input("reprosgd::Flatten", width);
    return width;
  }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 0; }
  [[nodiscard]] std::string describe(int) const { return "flatten(" + input.text() + ")"; }
  template <class Ctx, class P>
  void initialize(const Ctx&, const P&, int) const noexcept {}
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P&, const In& x, const Out& y) const {
    Kokkos::deep_copy(ctx.space, y, x);
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P&, const In&, const Out&, const GOut& gy, const GIn& gx, const GP&) const {
    if (gx.extent(0) > 0) Kokkos::deep_copy(ctx.space, gx, gy);
  }
};

static_assert(Layer<Flatten>);

REPROSGD_END_NAMESPACE
