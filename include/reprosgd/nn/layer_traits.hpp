// SPDX-License-Identifier: BSD-3-Clause
/// @file The optional members of a layer that its containers (Sequential, Residual) look for:
/// a stated input width or image shape, scratch memory, kept activations, running statistics,
/// output features that a model group can split.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/concepts/model_group.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/kernels/image.hpp>
#include <reprosgd/kernels/views.hpp>

#include <concepts>
#include <cstddef>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
template <class L>
concept HasInputWidth = requires(const L l) {
  { l.in } -> std::convertible_to<int>;
};
/// A layer that knows its input width: Dense's `in`, an image layer's input_width() (C x H x W).
template <class L>
concept StatesInputWidth = HasInputWidth<L> || requires(const L l) {
  { l.input_width() } -> std::convertible_to<int>;
};
template <StatesInputWidth L>
int input_width_of(const L& l) {
  if constexpr (HasInputWidth<L>) return l.in;
  else return l.input_width();
}
/// A layer whose input is an image of a stated shape (Conv2D, the pools, Flatten).
template <class L>
concept TakesImage = requires(const L l) {
  { l.input } -> std::convertible_to<ImageShape>;
};
/// A layer that needs scratch memory in forward and backward (Conv2D's patch matrix): it says how
/// many floats for `rows` samples, and takes them as a last argument; Sequential's Workspace keeps
/// the largest such buffer between steps.
template <class L>
concept UsesScratch = requires(const L l, int width, long rows) {
  { l.scratch_size(width, rows) } -> std::convertible_to<std::size_t>;
};
/// A layer that keeps activations from forward to backward in memory of its own (Residual: its
/// block's intermediate outputs): it says how many floats for `rows` samples, and takes them after
/// its scratch as a last argument; Sequential's Workspace holds one such buffer per layer.
template <class L>
concept KeepsActivations = UsesScratch<L> && requires(const L l, int width, long rows) {
  { l.stash_size(width, rows) } -> std::convertible_to<std::size_t>;
};
/// A layer whose parameter slice holds statistics that are not trained (BatchNorm's running mean
/// and variance): statistics_runs() says where; update_statistics(space, params, grads, width, next)
/// writes their values after the step into `next` (in run order) from the step's reduced
/// gradient slice, whose statistics slots carry the step's batch statistics, and zeroes those
/// slots. Sequential::update_statistics() writes `next` into the parameters after the optimizer.
template <class L>
concept KeepsStatistics = requires(const L l, int width) {
  { l.statistics_runs(width) } -> std::convertible_to<std::vector<StatisticsRun>>;
};
/// Whether a model (Sequential) has layers that keep statistics (Sequential::keeps_statistics).
template <class Model>
inline constexpr bool keeps_statistics_v = requires { requires Model::keeps_statistics; };
/// A layer whose output features can be split across a model group (Dense).
template <class L>
concept FeatureShardable = requires(const L l, int q, FeatureRange r) {
  { l.features_of(q, q) } -> std::same_as<FeatureRange>;
  { l.chunks() } -> std::convertible_to<int>;
  { l.chunks_of(q, q) } -> std::same_as<MicroBatchRange>;
  { l.shard_parameter_count(r) } -> std::convertible_to<std::size_t>;
};
/// The rows of a sharded layer's weight matrix (a shard holds W's columns of its features, row by
/// row, then b's): Dense's `in` (its input width), Conv2D's k^2 C (weight_rows()).
template <FeatureShardable L>
int weight_rows_of(const L& l, int width) {
  if constexpr (requires { l.weight_rows(); }) return l.weight_rows();
  else return width;
}
/// Output rows per sample of a sharded layer, for which a shard's features are gathered: 1
/// (Dense), the output pixels (Conv2D's output_pixels(): its features are channels).
template <FeatureShardable L>
long output_pixels_of(const L& l) {
  if constexpr (requires { l.output_pixels(); }) return l.output_pixels();
  else return 1;
}
}  // namespace detail

REPROSGD_END_NAMESPACE
