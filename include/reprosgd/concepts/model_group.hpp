// SPDX-License-Identifier: BSD-3-Clause
/// @file The ModelGroup concept: the ranks that share one model replica's layers (model
/// parallelism), and FeatureRange, the run of a layer's output features one of them owns.
///
/// Semantic requirements (docs/concepts/parallelism.md):
/// - Every operation is collective over the group (every model rank calls it, in the same order)
///   and deterministic: every rank receives the same floats for any number of ranks.
/// - The ranks' `ranges` of a layer tile its output features, in model-rank order.
/// Models: LocalModelGroup (one process, nn/model_group.hpp), MpiModelGroup (parallel/hybrid.hpp).
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/kernels/views.hpp>

#include <Kokkos_Core.hpp>

#include <concepts>
#include <span>

REPROSGD_BEGIN_NAMESPACE

/// A contiguous run [begin, end) of a layer's output features: what one model-parallel rank owns.
struct FeatureRange {
  int begin = 0;
  int end = 0;
  [[nodiscard]] int size() const noexcept { return end - begin; }
  friend bool operator==(const FeatureRange&, const FeatureRange&) = default;
};

/**
 * What Sequential needs from the ranks that split its layers' output features among them.
 *
 * - gather_features: every rank passes its features' columns of a layer output (rows x its width,
 *   contiguous) and receives the whole output (rows x all features) — the ranks' `ranges` tile it.
 * - sum_input_gradient: the Exact sum of the chunk partials over the group (each rank passes the
 *   partials of the chunks it owns, possibly none), the same floats on every rank; NaN everywhere
 *   when a partial holds a NaN or an Inf.
 * - share: copy `n` floats from model rank `root` to every rank of the group.
 * All three are collective over the group and deterministic.
 */
template <class G>
concept ModelGroup = requires(G& g, const G& cg, const float* local, long rows, std::span<const FeatureRange> ranges,
                              MatrixRef<Kokkos::DefaultExecutionSpace::memory_space> full,
                              Matrix<Kokkos::DefaultExecutionSpace::memory_space> partials,
                              BufferRef<Kokkos::DefaultExecutionSpace::memory_space> sum, float* data) {
  { cg.model_rank() } -> std::convertible_to<int>;
  { cg.model_size() } -> std::convertible_to<int>;
  g.gather_features(local, rows, ranges, full);
  g.sum_input_gradient(partials, 1, sum);
  g.share(data, rows, 0);
};

REPROSGD_END_NAMESPACE
