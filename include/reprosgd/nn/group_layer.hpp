// SPDX-License-Identifier: BSD-3-Clause
/// @file One layer on model rank q of a model group of p: the parameters it holds there, where they
/// lie in the whole model's buffer, its buffers, and its forward and backward across the group.
/// Written once for the two containers that run layers in order, Sequential (the model's layers)
/// and LayerChain (a residual block's or a run-time network's), so that a convolution or a dense
/// layer is split the same way at any depth.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/concepts/model_group.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/layer_traits.hpp>
#include <reprosgd/reduction/canonical_blocks.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// Rank `rank` of a model group of `size` ({0, 1}: one process holding the whole model).
struct GroupPlace {
  int rank = 0;
  int size = 1;
};

/// A layer made of layers that splits its own inner layers over a model group (LayerChain): it
/// answers the questions below for itself, recursively.
template <class L>
concept GroupComposite = requires(const L l, int width, GroupPlace g) {
  { l.held_parameter_count(width, g) } -> std::convertible_to<std::size_t>;
};

/// The parameters `layer` (input width `width`) holds on rank g: a feature-shardable layer's shard
/// (W's columns and b's elements of its features), a composite's inner shards, else all of them.
template <class L>
std::size_t held_parameter_count(const L& layer, int width, GroupPlace g) {
  if constexpr (FeatureShardable<L>) return layer.shard_parameter_count(layer.features_of(g.rank, g.size));
  else if constexpr (GroupComposite<L>) return layer.held_parameter_count(width, g);
  else return layer.parameter_count(width);
}

/**
 * Append where rank g's parameters of `layer` lie in the whole model's buffer, `canonical` being
 * where the layer's whole parameters start there and `local` where its held ones start in the
 * rank's buffer (advanced past them): a sharded layer gives one run per row of W (its features'
 * columns) and one for b, a composite its inner layers' runs, any other layer one run.
 */
template <class L>
void append_held_runs(const L& layer, int width, std::size_t canonical, std::size_t& local, GroupPlace g,
                      std::vector<CanonicalRun>& runs) {
  if constexpr (FeatureShardable<L>) {
    const FeatureRange f = layer.features_of(g.rank, g.size);
    const auto held = static_cast<std::size_t>(f.size());
    if (held == 0) return;
    // W is weight_rows x features (a Conv2D's features are its channels, not its output width).
    const auto out = static_cast<std::size_t>(layer.output_width(width) / output_pixels_of(layer)),
               in = static_cast<std::size_t>(weight_rows_of(layer, width));
    for (std::size_t k = 0; k < in; ++k, local += held) runs.push_back({canonical + k * out + f.begin, local, held});
    runs.push_back({canonical + in * out + f.begin, local, held});
    local += held;
  } else if constexpr (GroupComposite<L>) {
    layer.append_held_runs(width, canonical, local, g, runs);
  } else {
    const std::size_t n = layer.parameter_count(width);
    if (n > 0) runs.push_back({canonical, local, n});
    local += n;
  }
}

/// Scratch a model group's forward and backward need besides the layers' own: a sharded layer's
/// output columns before the gather, and its input-gradient partials.
struct GroupBuffers {
  std::size_t local_out = 0;
  std::size_t partials = 0;
};
/// Grow `b` to what `layer` needs on rank g for `rows` samples (`input_gradient`: whether its
/// input gradient is computed; the model's first layer computes none).
template <class L>
void add_group_buffers(const L& layer, int width, long rows, GroupPlace g, bool input_gradient, GroupBuffers& b) {
  if constexpr (FeatureShardable<L>) {
    if (g.size > 1)
      b.local_out = std::max(b.local_out, static_cast<std::size_t>(rows * output_pixels_of(layer) *
                                                                   layer.features_of(g.rank, g.size).size()));
    if (input_gradient) b.partials = std::max(b.partials, layer.partials_size(rows, g.rank, g.size));
  } else if constexpr (GroupComposite<L>) {
    layer.add_group_buffers(width, rows, g, input_gradient, b);
  }
}

/// Draw rank g's parameters of `layer`, each keyed by its place in the whole layer. @deterministic
template <class L, class Ctx, class P>
void initialize_held(const L& layer, const Ctx& ctx, const P& params, int width, GroupPlace g) {
  if constexpr (FeatureShardable<L>) layer.initialize(ctx, params, width, layer.features_of(g.rank, g.size));
  else if constexpr (GroupComposite<L>) layer.initialize(ctx, params, width, g);
  else layer.initialize(ctx, params, width);
}

/// The runs of rank g's parameters of `layer` that hold statistics (BatchNorm's), relative to the
/// layer's held parameters.
template <class L>
std::vector<StatisticsRun> held_statistics_runs(const L& layer, int width, GroupPlace g) {
  if constexpr (GroupComposite<L>) return layer.statistics_runs(width, g);
  else return layer.statistics_runs(width);
}
template <class L, class Space, class P, class G>
void update_held_statistics(const L& layer, const Space& space, const P& params, const G& grads, int width,
                            float* next, GroupPlace g) {
  if constexpr (GroupComposite<L>) layer.update_statistics(space, params, grads, width, next, g);
  else layer.update_statistics(space, params, grads, width, next);
}

/**
 * y = layer(x) on `group`'s rank, holding `params` (its held parameters): a sharded layer in a
 * group of several computes its own features' columns into `local_out`, which the group gathers
 * into the whole y every rank continues with; a composite runs its inner layers so; any other
 * layer computes the whole y. `scratch` and `stash` as the layer asks (detail::UsesScratch,
 * KeepsActivations). @collective over group
 */
template <class L, class Ctx, class P, class In, class Out, class Scratch, class Stash, ModelGroup Group, class LocalOut>
void forward_held(const L& layer, const Ctx& ctx, const P& params, const In& x, const Out& y, const Scratch& scratch,
                  const Stash& stash, Group& group, const LocalOut& local_out) {
  using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
  if constexpr (FeatureShardable<L>) {
    if (group.model_size() > 1) {
      // The shard's features for every output row (a sample, or a sample's pixel), gathered into
      // the whole output row by row.
      const long out_rows = static_cast<long>(x.extent(0)) * output_pixels_of(layer);
      const FeatureRange f = layer.features_of(group.model_rank(), group.model_size());
      const MatrixRef<mem> mine(local_out.data(), out_rows, f.size());
      if (f.size() > 0) {
        if constexpr (UsesScratch<L>) layer.forward(ctx, params, x, mine, scratch);
        else layer.forward(ctx, params, x, mine);
      }
      ctx.space.fence();
      std::vector<FeatureRange> ranges;
      for (int r = 0; r < group.model_size(); ++r) ranges.push_back(layer.features_of(r, group.model_size()));
      group.gather_features(mine.data(), out_rows, std::span<const FeatureRange>(ranges),
                            MatrixRef<mem>(y.data(), out_rows, static_cast<long>(y.extent(1)) / output_pixels_of(layer)));
      return;
    }
  }
  if constexpr (GroupComposite<L>) layer.forward(ctx, params, x, y, scratch, stash, group, local_out);
  else if constexpr (KeepsActivations<L>) layer.forward(ctx, params, x, y, scratch, stash);
  else if constexpr (UsesScratch<L>) layer.forward(ctx, params, x, y, scratch);
  else layer.forward(ctx, params, x, y);
}

/**
 * The parameter gradients of rank g's parameters of `layer` and (unless gx is empty: the model's
 * first layer) its input gradient gx, every rank holding the whole output gradient gy: a sharded
 * layer's group backward (dW and db of its features; gx the owner's GEMM or the group's exact sum
 * of the chunks' partials, in `partials`), a composite's inner layers so, any other layer its own.
 * In one process (LocalModelGroup) the bits of the layer's own backward. @collective over group
 */
template <class L, class Ctx, class P, class In, class Out, class GOut, class GIn, class GP, class Scratch, class Stash,
          ModelGroup Group, class Partials>
void backward_held(const L& layer, const Ctx& ctx, const P& params, const In& x, const Out& y, const GOut& gy,
                   const GIn& gx, const GP& gparams, const Scratch& scratch, const Stash& stash, Group& group,
                   const Partials& partials) {
  if constexpr (FeatureShardable<L> && UsesScratch<L>)
    layer.backward(ctx, params, x, gy, gx, gparams, group, partials, scratch);
  else if constexpr (FeatureShardable<L>)
    layer.backward(ctx, params, x, gy, gx, gparams, group, partials);
  else if constexpr (GroupComposite<L>)
    layer.backward(ctx, params, x, y, gy, gx, gparams, scratch, stash, group, partials);
  else if constexpr (KeepsActivations<L>)
    layer.backward(ctx, params, x, y, gy, gx, gparams, scratch, stash);
  else if constexpr (UsesScratch<L>)
    layer.backward(ctx, params, x, y, gy, gx, gparams, scratch);
  else
    layer.backward(ctx, params, x, y, gy, gx, gparams);
}

}  // namespace detail
REPROSGD_END_NAMESPACE
