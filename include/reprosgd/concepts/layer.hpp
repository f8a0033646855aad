// SPDX-License-Identifier: BSD-3-Clause
/// @file The Layer concept: a stateless description of one layer; its parameters live elsewhere.
///
/// Semantic requirements (docs/concepts/layer.md):
/// - A layer holds no parameters and no mutable state. Its parameters are a slice of the model's one
///   contiguous buffer, its gradients a slice of a gradient row, both passed in.
/// - forward and backward are deterministic: every output element is written by one thread with a
///   fixed sequence of IEEE operations (reduce over k ascending), independent of thread count,
///   backend and compiler. No floating-point atomics or parallel_reduce.
/// - backward may be given an empty `gin` (the first layer): then it skips the input gradient.
/// - Random decisions are drawn from ctx.rng at the coordinates in ctx (see LayerContext).
#pragma once

#include <reprosgd/concepts/layer_context.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <concepts>
#include <cstddef>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/// A run of parameters inside a layer's slice that holds statistics, not trained weights (an
/// optional member of a layer, statistics_runs(); docs/concepts/layer.md).
struct StatisticsRun {
  std::size_t offset = 0;
  std::size_t count = 0;
};

/// A layer of a Sequential model.
template <class L>
concept Layer =
    std::copy_constructible<L> &&
    requires(const L l, int width, LayerContext<Kokkos::DefaultHostExecutionSpace, PhiloxStream> ctx,
             BufferRef<Kokkos::HostSpace> p, Matrix<Kokkos::HostSpace> x) {
      { L::name() } -> std::convertible_to<const char*>;
      { l.output_width(width) } -> std::convertible_to<int>;           // throws config_error on a mismatch
      { l.parameter_count(width) } -> std::convertible_to<std::size_t>;
      { l.describe(width) } -> std::convertible_to<std::string>;       // enters the configuration hash
      l.initialize(ctx, p, width);
      l.forward(ctx, p, x, x);
      l.backward(ctx, p, x, x, x, x, p);  // (params, in, out, grad_out, grad_in, grad_params)
    };

REPROSGD_END_NAMESPACE
