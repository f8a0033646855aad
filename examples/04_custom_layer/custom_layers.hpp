// SPDX-License-Identifier: BSD-3-Clause
/// @file Two layers a user might write, models of reprosgd::Layer (docs/concepts/layer.md):
/// - LearnedScale: y(i,j) = a(j) x(i,j) + b(j), a per-feature scale and shift the model learns;
/// - Gelu: the GELU activation in its tanh form, y = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
///
/// What keeps them inside the contract (the same bits for any thread count and backend):
/// - every output element is written by one thread with a fixed sequence of IEEE operations;
/// - LearnedScale's parameter gradient is a sum over the micro-batch's rows, done by one thread per
///   feature with the rows ascending: no float atomics, no parallel_reduce;
/// - Gelu uses reprosgd::math::tanh, which is built from + - * / alone; std::tanh differs between
///   C libraries and devices;
/// - LearnedScale draws its initial scales from ctx.rng at (Purpose::init, ctx.layer, feature),
///   coordinates that name what the number is for, never a thread;
/// - the kernels are KOKKOS_LAMBDAs in public member functions that capture only Views and
///   scalars, so they compile for a GPU too.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/math/elementary.hpp>
#include <reprosgd/rng/distributions.hpp>
#include <reprosgd/rng/stream_coordinates.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace custom_layers {

/**
 * y(i,j) = a(j) x(i,j) + b(j) over `width` features (the width of the layer before it).
 *
 * Parameters, in the model's buffer: a (width), then b (width). a starts at 1 + u/2 with u uniform
 * in [-1/2, 1/2) drawn at (init, layer, feature j); b starts at 0.
 * Backward: dx(i,j) = a(j) dy(i,j); da(j) = sum_i dy(i,j) x(i,j) and db(j) = sum_i dy(i,j), the
 * rows ascending from +0.0f in one thread per feature.
 */
struct LearnedScale {
  static constexpr const char* name() noexcept { return "learned_scale"; }
  [[nodiscard]] int output_width(int width) const {
    if (width < 1) throw reprosgd::config_error("custom_layers::LearnedScale: width must be >= 1, got " + std::to_string(width));
    return width;
  }
  [[nodiscard]] std::size_t parameter_count(int width) const noexcept { return 2 * static_cast<std::size_t>(width); }
  [[nodiscard]] std::string describe(int width) const { return "learned_scale(" + std::to_string(width) + ")"; }

  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int width) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    const auto rng = ctx.rng;
    const std::uint32_t layer = ctx.layer;
    const long n = width;
    Kokkos::parallel_for(
        "custom_layers::LearnedScale::initialize", Kokkos::RangePolicy<exec>(ctx.space, 0, n), KOKKOS_LAMBDA(const long j) {
          const reprosgd::StreamCoordinates at{reprosgd::Purpose::init, layer, 0, 0, static_cast<std::uint64_t>(j)};
          params(j) = 1.0f + 0.5f * (reprosgd::uniform_float(rng.uint32(at)) - 0.5f);
          params(n + j) = 0.0f;
        });
  }

  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    const long n = static_cast<long>(x.extent(1));
    Kokkos::parallel_for(
        "custom_layers::LearnedScale::forward", Kokkos::RangePolicy<exec>(ctx.space, 0, static_cast<long>(x.extent(0)) * n),
        KOKKOS_LAMBDA(const long e) {
          const long i = e / n, j = e - i * n;
          y(i, j) = params(j) * x(i, j) + params(n + j);
        });
  }

  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out&, const GOut& gy, const GIn& gx,
                const GP& gparams) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    const long rows = static_cast<long>(x.extent(0)), n = static_cast<long>(x.extent(1));
    if (gx.extent(0) > 0)  // empty for the model's first layer
      Kokkos::parallel_for(
          "custom_layers::LearnedScale::input_gradient", Kokkos::RangePolicy<exec>(ctx.space, 0, rows * n),
          KOKKOS_LAMBDA(const long e) {
            const long i = e / n, j = e - i * n;
            gx(i, j) = params(j) * gy(i, j);
          });
    // One thread per feature, the rows in order: the same sum on every backend and thread count.
    Kokkos::parallel_for(
        "custom_layers::LearnedScale::parameter_gradient", Kokkos::RangePolicy<exec>(ctx.space, 0, n),
        KOKKOS_LAMBDA(const long j) {
          float da = 0.0f, db = 0.0f;
          for (long i = 0; i < rows; ++i) {
            da = da + gy(i, j) * x(i, j);
            db = db + gy(i, j);
          }
          gparams(j) = da;
          gparams(n + j) = db;
        });
  }
};

/// GELU, tanh form: y = x/2 (1 + t), t = tanh(u), u = c0 (x + c1 x^3). @device @deterministic
KOKKOS_INLINE_FUNCTION float gelu(float x) {
  constexpr float c0 = 0.7978845608f, c1 = 0.044715f;  // sqrt(2/pi)
  const float t = reprosgd::math::tanh(c0 * (x + c1 * x * x * x));
  return 0.5f * x * (1.0f + t);
}
/// dy/dx = (1 + t)/2 + x/2 (1 - t^2) c0 (1 + 3 c1 x^2). @device @deterministic
KOKKOS_INLINE_FUNCTION float gelu_derivative(float x) {
  constexpr float c0 = 0.7978845608f, c1 = 0.044715f;
  const float t = reprosgd::math::tanh(c0 * (x + c1 * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * c0 * (1.0f + 3.0f * c1 * x * x);
}

/// The GELU activation (tanh form), elementwise, no parameters; backward recomputes t from x.
struct Gelu {
  static constexpr const char* name() noexcept { return "gelu"; }
  [[nodiscard]] int output_width(int width) const noexcept { return width; }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 0; }
  [[nodiscard]] std::string describe(int) const { return "gelu_tanh"; }
  template <class Ctx, class P>
  void initialize(const Ctx&, const P&, int) const noexcept {}

  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P&, const In& x, const Out& y) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    const long n = static_cast<long>(x.extent(1));
    Kokkos::parallel_for(
        "custom_layers::Gelu::forward", Kokkos::RangePolicy<exec>(ctx.space, 0, static_cast<long>(x.extent(0)) * n),
        KOKKOS_LAMBDA(const long e) { y(e / n, e % n) = gelu(x(e / n, e % n)); });
  }

  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P&, const In& x, const Out&, const GOut& gy, const GIn& gx, const GP&) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    if (gx.extent(0) == 0) return;
    const long n = static_cast<long>(x.extent(1));
    Kokkos::parallel_for(
        "custom_layers::Gelu::backward", Kokkos::RangePolicy<exec>(ctx.space, 0, static_cast<long>(x.extent(0)) * n),
        KOKKOS_LAMBDA(const long e) { gx(e / n, e % n) = gelu_derivative(x(e / n, e % n)) * gy(e / n, e % n); });
  }
};

static_assert(reprosgd::Layer<LearnedScale>);
static_assert(reprosgd::Layer<Gelu>);

}  // namespace custom_layers
