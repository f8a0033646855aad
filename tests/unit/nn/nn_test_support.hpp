// SPDX-License-Identifier: BSD-3-Clause
/// @file Helpers of the layer tests: host matrices and buffers, deterministic test values, a
/// training LayerContext, and a layer's parameters initialised in it.
#pragma once

#include <reprosgd/concepts/layer_context.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace reprosgd_test::nn {

using Mem = Kokkos::HostSpace;
using M = reprosgd::Matrix<Mem>;
using MRef = reprosgd::MatrixRef<Mem>;
using B = reprosgd::Buffer<Mem>;

/// The context a layer sees, on execution space Space.
template <class Space = Kokkos::Serial>
using Ctx = reprosgd::LayerContext<Space, reprosgd::PhiloxStream>;

/// A training-mode context on Space's default instance: the RNG keyed by `seed`, then the layer's
/// index, the step and the position of row 0 in the global batch (the dropout mask's coordinates).
template <class Space = Kokkos::Serial>
Ctx<Space> training_context(std::uint64_t seed, std::uint32_t layer = 0, std::uint64_t step = 0,
                            std::uint64_t sample_offset = 0) {
  return Ctx<Space>{Space(), reprosgd::PhiloxStream(seed), layer, step, sample_offset, true};
}

/// A value in [-scale, scale) that depends only on (i, salt): a splitmix-style hash of both.
inline float value(std::uint64_t i, float scale, std::uint64_t salt) {
  std::uint64_t x = i * 0x9E3779B97F4A7C15ull + salt;
  x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return (static_cast<float>(x >> 40) * 0x1p-24f * 2.0f - 1.0f) * scale;
}

/// A layer's parameters `p` for `in_width` inputs, initialised in `ctx`, and a zeroed gradient
/// `gp` of the same size.
struct LayerParams {
  B p, gp;
};
template <class Layer, class Context>
LayerParams initialized_params(const Layer& layer, const Context& ctx, int in_width) {
  LayerParams lp{B("p", layer.parameter_count(in_width)), B("gp", layer.parameter_count(in_width))};
  layer.initialize(ctx, lp.p, in_width);
  return lp;
}

}  // namespace reprosgd_test::nn
