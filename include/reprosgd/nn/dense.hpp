// SPDX-License-Identifier: BSD-3-Clause
/// @file Dense: y = x W + b through the deterministic GEMM.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/concepts/model_group.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/elementwise.hpp>
#include <reprosgd/kernels/gemm.hpp>
#include <reprosgd/nn/defer_weight_gradients.hpp>
#include <reprosgd/nn/model_group.hpp>
#include <reprosgd/reduction/local_sum.hpp>
#include <reprosgd/rng/distributions.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <algorithm>
#include <cstddef>
#include <limits>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/// Output features per chunk of a Dense layer unless it says otherwise (docs/parallelism.md).
inline constexpr int default_feature_chunk = 64;

/// How a Dense layer's weights are drawn (biases start at zero).
enum class Init {
  he_normal,       ///< N(0, 2/fan_in): for ReLU (He et al., 2015)
  xavier_uniform,  ///< U(-a, a), a = sqrt(6/(fan_in+fan_out)): for tanh/sigmoid (Glorot & Bengio, 2010)
};

/**
 * A fully connected layer with `in` inputs and `out` outputs.
 *
 * Parameters, in the model's buffer: W (in x out, row-major, so a row of x times W vectorises over
 * outputs) followed by b (out). Forward: y(i,j) = (sum_k ascending x(i,k) W(k,j)) + b(j).
 * Backward: dW = x^T dy (sum over the micro-batch's rows ascending), db(j) = sum_i dy(i,j).
 * There is one backward, across a ModelGroup (one process: LocalModelGroup); the Layer concept's
 * form runs it on a LocalModelGroup.
 *
 * **Feature chunks.** The outputs are cut into chunks of `feature_chunk` features (the last may be
 * narrower). The input gradient dx = dy W^T sums over the outputs; it is defined chunk by chunk:
 * each chunk's partial is a float GEMM (features ascending within the chunk) and the partials are
 * added by the Exact reduction (order-free, rounded once). With one chunk (out <= feature_chunk)
 * dx is the plain GEMM. This is what makes model parallelism keep the bits: a rank owning some
 * chunks computes their partials, and the ranks' partials add up to the same floats for any
 * ownership (docs/parallelism.md). The chunk width is part of the model (describe()), never of
 * the decomposition.
 *
 * **Example**: `Dense{784, 256}`, `Dense{784, 256, Init::xavier_uniform}`, or with 32-feature
 * chunks `Dense{784, 256, Init::he_normal, 32}`.
 */
struct Dense {
  int in = 0;
  int out = 0;
  Init init = Init::he_normal;
  int feature_chunk = default_feature_chunk;

  static constexpr const char* name() noexcept { return "dense"; }
  /// backward can hand dW to the caller (nn/defer_weight_gradients.hpp).
  static constexpr bool defers_weight_gradients = true;

  [[nodiscard]] int output_width(int width) const {
    if (in <= 0 || out <= 0)
      throw config_error("reprosgd::Dense: sizes must be positive, got " + std::to_string(in) + "x" +
                         std::to_string(out));
    if (feature_chunk <= 0)
      throw config_error("reprosgd::Dense: feature_chunk must be positive, got " + std::to_string(feature_chunk));
    if (width != in)
      throw config_error("reprosgd::Dense: expects " + std::to_string(in) + " inputs, receives " +
                         std::to_string(width));
    return out;
  }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return shard_parameter_count({0, out}); }
  /// Parameters of the shard holding output features `r`: W's columns r (in x r.size()), then b(r).
  [[nodiscard]] std::size_t shard_parameter_count(FeatureRange r) const noexcept {
    return (static_cast<std::size_t>(in) + 1) * static_cast<std::size_t>(r.size());
  }
  /// The chunk width enters the description only where it changes the numerics (more than one chunk).
  [[nodiscard]] std::string describe(int) const {
    std::string d = std::string("dense(") + std::to_string(in) + "," + std::to_string(out) + "," +
                    (init == Init::he_normal ? "he" : "xavier");
    if (chunks() > 1) d += ",chunk=" + std::to_string(feature_chunk);
    return d + ")";
  }

  /// Number of feature chunks.
  [[nodiscard]] int chunks() const noexcept { return (out + feature_chunk - 1) / feature_chunk; }
  /// The features of chunk c.
  [[nodiscard]] FeatureRange chunk_features(int c) const noexcept {
    return {std::min(c * feature_chunk, out), std::min((c + 1) * feature_chunk, out)};
  }
  /// The chunks model rank q of P owns, contiguously (the micro-batch owner map over chunks, so
  /// with fewer chunks than ranks some ranks own none of this layer).
  [[nodiscard]] MicroBatchRange chunks_of(int q, int p) const noexcept { return micro_batch_range_of(q, p, chunks()); }
  /// The output features model rank q of P owns.
  [[nodiscard]] FeatureRange features_of(int q, int p) const noexcept {
    const MicroBatchRange c = chunks_of(q, p);
    return {chunk_features(static_cast<int>(c.begin)).begin, c.size() == 0 ? chunk_features(static_cast<int>(c.begin)).begin
                                                                           : chunk_features(static_cast<int>(c.end) - 1).end};
  }

  /// Draw the parameters of the whole layer. @deterministic
  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int width) const {
    initialize(ctx, params, width, FeatureRange{0, out});
  }
  /// Draw the parameters of the shard holding features `r`: every weight is keyed by its place
  /// (k, j) in the whole layer, so a shard holds exactly the whole layer's values. @deterministic
  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int, FeatureRange r) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    const long nl = r.size(), n_w = static_cast<long>(in) * nl, f0 = r.begin, n_out = out;
    const auto rng = ctx.rng;
    const std::uint32_t layer = ctx.layer;
    const bool he = init == Init::he_normal;
    // The scale is computed once on the host with correctly rounded IEEE sqrt.
    const float scale = he ? static_cast<float>(std::sqrt(2.0 / in)) : static_cast<float>(std::sqrt(6.0 / (in + out)));
    Kokkos::parallel_for(
        "reprosgd::Dense::initialize", Kokkos::RangePolicy<exec>(ctx.space, 0, n_w + nl), KOKKOS_LAMBDA(const long e) {
          if (e >= n_w) {
            params(e) = 0.0f;
            return;
          }
          const long k = e / nl, whole = k * n_out + f0 + (e - k * nl);  // index in the whole layer's W
          const StreamCoordinates c0{Purpose::init, layer, 0, 0, 2 * static_cast<std::uint64_t>(whole)};
          StreamCoordinates c1 = c0;
          c1.element += 1;
          if (he) {
            params(e) = normal_float(rng.uint32(c0), rng.uint32(c1)) * scale;
          } else {
            params(e) = (2.0f * uniform_float(rng.uint32(c0)) - 1.0f) * scale;
          }
        });
  }

  /// y = x W + b for the features the parameters hold (the whole layer, or a shard: y's width).
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    const long nl = static_cast<long>(y.extent(1));
    const MatrixRef<mem> w(params.data(), in, nl);
    const BufferRef<mem> b(params.data() + static_cast<std::size_t>(in) * nl, nl);
    gemm_nn_bias(ctx.space, x, w, b, y);  // the bits of gemm_nn then add_bias, in one pass
  }

  /// dW and db of the features the parameters hold, from gy's columns for them (a column
  /// subview of the full output gradient does). @deterministic
  template <class Space, class In, class GOut, class GP>
  void weight_gradients(const Space& space, const In& x, const GOut& gy, const GP& gparams) const {
    using mem = typename Space::memory_space;
    const long nl = static_cast<long>(gy.extent(1));
    const MatrixRef<mem> gw(gparams.data(), in, nl);
    const BufferRef<mem> gb(gparams.data() + static_cast<std::size_t>(in) * nl, nl);
    gemm_tn(space, x, gy, gw);
    bias_gradient(space, gy, gb);
  }

  /// The input-gradient partial of chunk c: gy(:, chunk) W(:, chunk)^T, from a shard holding
  /// features `held` (which contain the chunk) and the full output gradient. @deterministic
  template <class Space, class P, class GOut, class Partial>
  void chunk_partial(const Space& space, const P& params, FeatureRange held, int c, const GOut& gy,
                     const Partial& partial) const {
    using mem = typename Space::memory_space;
    const FeatureRange f = chunk_features(c);
    const MatrixRef<mem> w(params.data(), in, held.size());
    const auto wc = Kokkos::subview(w, Kokkos::ALL(), std::make_pair(f.begin - held.begin, f.end - held.begin));
    const auto gyc = Kokkos::subview(gy, Kokkos::ALL(), std::make_pair(f.begin, f.end));
    gemm_nt(space, gyc, wc, partial);
  }

  /// Floats of scratch the group backward needs for `rows` rows on model rank q of p: the input
  /// gradient partials of the chunks q owns (none with one chunk).
  [[nodiscard]] std::size_t partials_size(long rows, int q, int p) const noexcept {
    if (chunks() == 1) return 0;
    return static_cast<std::size_t>(chunks_of(q, p).size()) * static_cast<std::size_t>(rows) * static_cast<std::size_t>(in);
  }

  /**
   * Backward of the features this model rank holds (the whole layer in one process), across the
   * ranks of `group`, which hold the same whole output gradient `gy` (rows x out):
   * - dW and db of the rank's own features, from gy's columns for them (serial bits: the sums run
   *   over rows), into `gparams`;
   * - the input gradient gx (rows x in, contiguous; empty for the first layer: skipped): with one
   *   chunk, its owner's GEMM gy W^T, shared with the group; with several, the group's Exact sum
   *   of the chunk partials each rank computes for the chunks it owns (the same floats for any
   *   group size; NaN when a partial holds a NaN or an Inf).
   * `partials` is scratch of at least partials_size(rows, q, p) floats.
   * @collective over group @deterministic
   */
  template <class Ctx, class P, class In, class GOut, class GIn, class GP, ModelGroup Group, class Scratch>
  void backward(const Ctx& ctx, const P& params, const In& x, const GOut& gy, const GIn& gx, const GP& gparams,
                Group& group, const Scratch& partials) const {
    backward_with(ctx, params, gy, gx, group, partials,
                  [&](const auto& gyf) { weight_gradients(ctx.space, x, gyf, gparams); });
  }
  /// The same with dW handed to `defer` (its bias gradient and gx computed here).
  template <class Ctx, class P, class In, class GOut, class GIn, class GP, ModelGroup Group, class Scratch, class F>
  void backward(const Ctx& ctx, const P& params, const In& x, const GOut& gy, const GIn& gx, const GP& gparams,
                Group& group, const Scratch& partials, const DeferWeightGradients<F>& defer) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    backward_with(ctx, params, gy, gx, group, partials, [&](const auto& gyf) {
      const long nl = static_cast<long>(gyf.extent(1));
      bias_gradient(ctx.space, gyf, BufferRef<mem>(gparams.data() + static_cast<std::size_t>(in) * nl, nl));
      defer.record(x, gyf, MatrixRef<mem>(gparams.data(), in, nl));
    });
  }

  /// The group backward, with `weights(gy of the held features)` computing (or deferring) dW and db.
  template <class Ctx, class P, class GOut, class GIn, ModelGroup Group, class Scratch, class Weights>
  void backward_with(const Ctx& ctx, const P& params, const GOut& gy, const GIn& gx, Group& group,
                     const Scratch& partials, const Weights& weights) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    const int q = group.model_rank(), p = group.model_size();
    const FeatureRange f = features_of(q, p);
    if (f.size() > 0) weights(Kokkos::subview(gy, Kokkos::ALL(), std::make_pair(f.begin, f.end)));
    if (gx.extent(0) == 0) return;
    const long rows = static_cast<long>(gx.extent(0)), n = rows * in;
    const MicroBatchRange own = chunks_of(q, p);
    if (chunks() == 1) {
      // One chunk: its owner's partial is dx (no sum), shared with the group.
      if (own.size() == 1) gemm_nt(ctx.space, gy, MatrixRef<mem>(params.data(), in, f.size()), gx);
      if (p > 1) {
        ctx.space.fence();
        group.share(gx.data(), n, 0);
      }
      return;
    }
    const Matrix<mem> mine(partials.data(), own.size(), n);
    for (long c = own.begin; c < own.end; ++c)
      chunk_partial(ctx.space, params, f, static_cast<int>(c), gy,
                    MatrixRef<mem>(mine.data() + (c - own.begin) * n, rows, in));
    ctx.space.fence();
    group.sum_input_gradient(mine, chunks(), BufferRef<mem>(gx.data(), n));
  }

  /// The Layer concept's backward: the whole layer in one process, the group backward above on a
  /// LocalModelGroup with its own scratch (Sequential keeps both between steps instead).
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out&, const GOut& gy, const GIn& gx,
                const GP& gparams) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    using mem = typename exec::memory_space;
    LocalExactSum<exec> sum;
    LocalModelGroup<exec> group(ctx.space, sum);
    const Buffer<mem> partials(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Dense::partials"),
                               partials_size(static_cast<long>(gx.extent(0)), 0, 1));
    backward(ctx, params, x, gy, gx, gparams, group, partials);
  }
};

static_assert(Layer<Dense>);

REPROSGD_END_NAMESPACE
