// SPDX-License-Identifier: BSD-3-Clause
/// @file Activation layers: ActivationFn, a parameter-free elementwise nonlinearity whose kind is a
/// run-time value (command lines, configs), and ReLU, Tanh, Sigmoid, the same layer under its
/// kind's name (`Sequential{Dense{784, 256}, ReLU{}, Dense{256, 10}}`).
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/kernels/elementwise.hpp>

#include <cstddef>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/// An elementwise activation layer of kind `kind`; ReLU{}, Tanh{} and Sigmoid{} name the kinds.
struct ActivationFn {
  Activation kind = Activation::relu;

  static constexpr const char* name() noexcept { return "activation"; }
  [[nodiscard]] int output_width(int width) const noexcept { return width; }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 0; }
  /// "relu", "tanh" or "sigmoid" (enters the configuration hash of checkpoints).
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

/// ActivationFn{Activation::relu}: y = max(x, 0).
struct ReLU : ActivationFn {
  constexpr ReLU() noexcept : ActivationFn{Activation::relu} {}
};
/// ActivationFn{Activation::tanh}.
struct Tanh : ActivationFn {
  constexpr Tanh() noexcept : ActivationFn{Activation::tanh} {}
};
/// ActivationFn{Activation::sigmoid}: y = 1 / (1 + exp(-x)).
struct Sigmoid : ActivationFn {
  constexpr Sigmoid() noexcept : ActivationFn{Activation::sigmoid} {}
};

static_assert(Layer<ActivationFn>);
static_assert(Layer<ReLU>);
static_assert(Layer<Tanh>);
static_assert(Layer<Sigmoid>);

REPROSGD_END_NAMESPACE
