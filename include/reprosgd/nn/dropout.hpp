// SPDX-License-Identifier: BSD-3-Clause
/// @file Dropout with a counter-based mask: recomputed in backward, never stored or checkpointed.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/rng/distributions.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/**
 * Inverted dropout: in training, each element is kept with probability 1-p and scaled by 1/(1-p).
 * The keep decision is an integer comparison of the Philox word at (dropout, layer, step, position of
 * the sample in its global batch, element) with round(p * 2^32), so it is the same whichever rank,
 * thread or micro-batch processes the sample. In evaluation the layer is the identity.
 */
struct Dropout {
  float p = 0.5f;

  static constexpr const char* name() noexcept { return "dropout"; }
  [[nodiscard]] int output_width(int width) const {
    if (!(p >= 0.0f && p < 1.0f))
      throw config_error("reprosgd::Dropout: p must be in [0, 1), got " + std::to_string(p));
    return width;
  }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 0; }
  [[nodiscard]] std::string describe(int) const {
    char buf[64];
    std::snprintf(buf, sizeof buf, "dropout(%a)", static_cast<double>(p));  // exact, locale-free
    return buf;
  }
  template <class Ctx, class P>
  void initialize(const Ctx&, const P&, int) const noexcept {}

  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P&, const In& x, const Out& y) const {
    apply(ctx, x, y, "reprosgd::Dropout::forward");
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P&, const In&, const Out&, const GOut& gy, const GIn& gx, const GP&) const {
    // d/dx of (keep ? x * s : 0) is (keep ? s : 0): the same mask and scale applied to the gradient.
    if (gx.extent(0) > 0) apply(ctx, gy, gx, "reprosgd::Dropout::backward");
  }

  /// The kernel of forward and backward. 
  /// Public only because nvcc cannot compile an extended (device) lambda in a private or protected
  /// member function; not part of the interface.
  template <class Ctx, class In, class Out>
  void apply(const Ctx& ctx, const In& x, const Out& y, const char* label) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    const long cols = static_cast<long>(x.extent(1));
    const long rows = static_cast<long>(x.extent(0));
    const bool active = ctx.training && p > 0.0f;
    const std::uint32_t threshold = dropout_threshold(p);
    const float scale = 1.0f / (1.0f - p);
    const auto rng = ctx.rng;
    const std::uint32_t layer = ctx.layer;
    const std::uint64_t step = ctx.step, offset = ctx.sample_offset;
    Kokkos::parallel_for(label, Kokkos::RangePolicy<exec>(ctx.space, 0, rows * cols), KOKKOS_LAMBDA(const long e) {
      const long i = e / cols, j = e - i * cols;
      if (!active) {
        y(i, j) = x(i, j);
        return;
      }
      const StreamCoordinates c{Purpose::dropout, layer, step, offset + static_cast<std::uint64_t>(i),
                                static_cast<std::uint64_t>(j)};
      y(i, j) = dropout_keep(rng.uint32(c), threshold) ? x(i, j) * scale : 0.0f;
    });
  }
};

static_assert(Layer<Dropout>);

REPROSGD_END_NAMESPACE
