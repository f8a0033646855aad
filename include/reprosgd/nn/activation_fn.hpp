// SPDX-License-Identifier: BSD-3-Clause
/// @file ActivationFn: an activation layer whose kind is chosen at run time (command lines, configs).
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/kernels/elementwise.hpp>

#include <cstddef>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/// Like ReLU/Tanh/Sigmoid, but the kind is a run-time value, so one model type serves all three.
struct ActivationFn {
  Activation kind = Activation::relu;

  static constexpr const char* name() noexcept { return "activation"; }
  [[nodiscard]] int output_width(int width) const noexcept { return width; }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 0; }
  [[nodiscard]] std::string describe(int) const {
    return kind == Activation::relu ? "relu" : kind == Activation::tanh ? "tanh" : "sigmoid";
  }
  template <class Ctx, class P>
  void initialize(const Ctx&, const P&, int) const noexcept {}
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P&, const In& x, const Out& y) const {
    activation_forward(ctx.space, kind, x, y);
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P&, const In&, const Out& y, const GOut& gy, const GIn& gx, const GP&) const {
    if (gx.extent(0) > 0) activation_backward(ctx.space, kind, y, gy, gx);
  }
};

static_assert(Layer<ActivationFn>);

REPROSGD_END_NAMESPACE
