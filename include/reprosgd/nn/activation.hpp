// SPDX-License-Identifier: BSD-3-Clause
/// @file ReLU, Tanh and Sigmoid layers: parameter-free elementwise nonlinearities.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/kernels/elementwise.hpp>

#include <cstddef>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/// An elementwise activation layer; use the aliases ReLU, Tanh, Sigmoid.
template <Activation A>
struct ActivationLayer {
  static constexpr const char* name() noexcept {
    return A == Activation::relu ? "relu" : A == Activation::tanh ? "tanh" : "sigmoid";
  }
  [[nodiscard]] int output_width(int width) const noexcept { return width; }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 0; }
  [[nodiscard]] std::string describe(int) const { return name(); }

  template <class Ctx, class P>
  void initialize(const Ctx&, const P&, int) const noexcept {}

  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P&, const In& x, const Out& y) const {
    activation_forward(ctx.space, A, x, y);
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P&, const In&, const Out& y, const GOut& gy, const GIn& gx, const GP&) const {
    if (gx.extent(0) > 0) activation_backward(ctx.space, A, y, gy, gx);
  }
};

using ReLU = ActivationLayer<Activation::relu>;
using Tanh = ActivationLayer<Activation::tanh>;
using Sigmoid = ActivationLayer<Activation::sigmoid>;

static_assert(Layer<ReLU>);
static_assert(Layer<Tanh>);
static_assert(Layer<Sigmoid>);

REPROSGD_END_NAMESPACE
