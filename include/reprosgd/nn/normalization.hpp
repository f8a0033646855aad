// SPDX-License-Identifier: BSD-3-Clause
/// @file BatchNorm2D, BatchNorm1D and LayerNorm: normalisation with statistics of the micro-batch
/// (the unit of work, so nothing depends on the rank or thread count) and, for batch
/// normalisation, running statistics kept in the parameter buffer.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/image.hpp>
#include <reprosgd/kernels/normalization.hpp>
#include <reprosgd/kernels/views.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

namespace detail {

inline std::string exact_float(float v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(v));  // exact, locale-free
  return buf;
}

inline void check_normalization_options(const char* who, float momentum, float eps, bool has_momentum) {
  const std::string w = who;
  if (has_momentum && !(momentum >= 0.0f && momentum <= 1.0f))
    throw config_error(w + ": momentum must be in [0, 1], got " + std::to_string(momentum));
  if (!(eps > 0.0f && std::isfinite(eps)))
    throw config_error(w + ": eps must be finite and > 0, got " + std::to_string(eps));
}

/// gp[2C + c] = share * mean[c] and gp[3C + c] = share * var[c]: the micro-batch's statistics
/// entered into its gradient row (LayerContext::batch_share), or zeros. @device
template <class ExecSpace>
void write_batch_statistics(const ExecSpace& space, long C, float share, const float* mean, const float* var,
                            float* gp) {
  const bool zero = mean == nullptr;
  Kokkos::parallel_for("reprosgd::BatchNorm::statistics", Kokkos::RangePolicy<ExecSpace>(space, 0, C),
                       KOKKOS_LAMBDA(const long c) {
                         gp[2 * C + c] = zero ? 0.0f : share * mean[c];
                         gp[3 * C + c] = zero ? 0.0f : share * var[c];
                       });
}

/// gamma = 1, beta = 0, running mean = 0, running variance = 1 (BatchNorm); or gamma = 1 and
/// beta = 0 (LayerNorm, `with_running` false). @device
template <class ExecSpace, class P>
void initialize_normalization(const ExecSpace& space, const P& params, long C, bool with_running) {
  Kokkos::parallel_for("reprosgd::normalization::initialize",
                       Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<long>(params.extent(0))),
                       KOKKOS_LAMBDA(const long e) {
                         const long part = e / C;  // 0 gamma, 1 beta, 2 running mean, 3 running variance
                         params(e) = part == 0 || (with_running && part == 3) ? 1.0f : 0.0f;
                       });
}

/**
 * Batch normalisation over C channels of `pixels` positions each (the code BatchNorm2D and
 * BatchNorm1D share). See BatchNorm2D for the arithmetic and the statistics.
 */
struct BatchNormCore {
  long channels = 0;
  long pixels = 1;
  float momentum = 0.1f;
  float eps = 1e-5f;

  [[nodiscard]] std::size_t parameter_count() const noexcept { return 4 * static_cast<std::size_t>(channels); }
  [[nodiscard]] std::size_t scratch_size() const noexcept { return 5 * static_cast<std::size_t>(channels); }

  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params) const {
    initialize_normalization(ctx.space, params, channels, true);
  }

  template <class Ctx, class P, class In, class Out, class Scratch>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y, const Scratch& scratch) const {
    const long N = static_cast<long>(x.extent(0)) * pixels, C = channels;
    float* mean = scratch.data();
    float* invstd = mean + C;
    const float* p = params.data();
    statistics(ctx, p, x.data(), N, mean, invstd, nullptr);
    channel_normalize(ctx.space, N, C, x.data(), ctx.training ? mean : p + 2 * C, invstd, p, p + C, y.data());
  }

  template <class Ctx, class P, class In, class GOut, class GIn, class GP, class Scratch>
  void backward(const Ctx& ctx, const P& params, const In& x, const GOut& gy, const GIn& gx, const GP& gparams,
                const Scratch& scratch) const {
    const long N = static_cast<long>(x.extent(0)) * pixels, C = channels;
    float* mean = scratch.data();
    float* invstd = mean + C;
    float* a = invstd + C;
    float* b = a + C;
    float* var = b + C;
    const float* p = params.data();
    float* gp = gparams.data();
    statistics(ctx, p, x.data(), N, mean, invstd, var);
    const float* centre = ctx.training ? mean : p + 2 * C;
    channel_gradient_sums(ctx.space, N, C, x.data(), gy.data(), centre, invstd, gp, gp + C, a, b);
    if (gx.extent(0) > 0)
      channel_input_gradient(ctx.space, N, C, ctx.training, x.data(), gy.data(), centre, invstd, p, a, b, gx.data());
    write_batch_statistics(ctx.space, C, ctx.batch_share, ctx.training ? mean : nullptr, var, gp);
  }

  [[nodiscard]] std::vector<StatisticsRun> statistics_runs() const {
    return {{2 * static_cast<std::size_t>(channels), 2 * static_cast<std::size_t>(channels)}};
  }
  /// next = the running statistics blended with the step's (in gparams' statistics slots, zeroed).
  template <class Space, class P, class G>
  void update_statistics(const Space& space, const P& params, const G& gparams, float* next) const {
    blend_statistics(space, 2 * channels, momentum, params.data() + 2 * channels, gparams.data() + 2 * channels, next);
  }

 private:
  // Training: the micro-batch's moments (and the unbiased variance when `var`); evaluation: the
  // running variance's inverse standard deviation.
  template <class Ctx>
  void statistics(const Ctx& ctx, const float* p, const float* x, long N, float* mean, float* invstd,
                  float* var) const {
    if (ctx.training)
      group_moments(ctx.space, ElementGroups{channels, N, 1, channels}, x, static_cast<double>(eps), mean, invstd, var);
    else
      inverse_std(ctx.space, channels, p + 3 * channels, static_cast<double>(eps), invstd);
  }
};

template <class Ctx>
auto own_scratch(const Ctx& ctx, std::size_t n, const char* label) {
  using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
  return Buffer<mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n);
}

}  // namespace detail

/**
 * Batch normalisation of NHWC images: per channel c, y = gamma[c] * (x - mean[c]) / sqrt(var[c] +
 * eps) + beta[c].
 *
 * **Statistics of the micro-batch.** In training, mean and var are those of the micro-batch's
 * rows x H x W values of the channel (the biased variance), summed in double in ascending order
 * by one thread and rounded once: the micro-batch is the unit of work, so they are the same
 * whichever rank or thread count runs it — unlike PyTorch's, which are those of a rank's share
 * of the batch. In evaluation they are the running statistics.
 *
 * **Running statistics.** Parameters: gamma (C), beta (C), running mean (C), running variance
 * (C), in the model's one buffer, so checkpoints, fingerprints, buddy copies and the model-parallel
 * replicas hold them with nothing added. The last two are not trained: backward enters the
 * micro-batch's mean and unbiased variance, times LayerContext::batch_share, into their gradient
 * slots; the exact reduction makes that their mean over the step's micro-batches (the same floats
 * for any P); and after the step Sequential::update_statistics() blends them, running = (1 -
 * momentum) * running + momentum * step's, in place of the optimizer's update (PyTorch's rule,
 * applied once per step). Initial values: gamma 1, beta 0, mean 0, variance 1.
 *
 * **Example**: `BatchNorm2D{{32, 28, 28}}`, or `BatchNorm2D{{32, 28, 28}, 0.01f, 1e-3f}`.
 */
struct BatchNorm2D {
  ImageShape input;
  float momentum = 0.1f;
  float eps = 1e-5f;

  static constexpr const char* name() noexcept { return "batchnorm2d"; }
  [[nodiscard]] int input_width() const noexcept { return static_cast<int>(input.size()); }
  [[nodiscard]] int output_width(int width) const {
    input.check_input("reprosgd::BatchNorm2D", width);
    detail::check_normalization_options("reprosgd::BatchNorm2D", momentum, eps, true);
    return width;
  }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return core().parameter_count(); }
  [[nodiscard]] std::string describe(int) const {
    return "batchnorm2d(" + input.text() + ",momentum=" + detail::exact_float(momentum) +
           ",eps=" + detail::exact_float(eps) + ")";
  }
  [[nodiscard]] std::size_t scratch_size(int, long) const noexcept { return core().scratch_size(); }
  [[nodiscard]] std::vector<StatisticsRun> statistics_runs(int) const { return core().statistics_runs(); }

  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int) const {
    core().initialize(ctx, params);
  }
  template <class Ctx, class P, class In, class Out, class Scratch>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y, const Scratch& scratch) const {
    core().forward(ctx, params, x, y, scratch);
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP, class Scratch>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out&, const GOut& gy, const GIn& gx,
                const GP& gparams, const Scratch& scratch) const {
    core().backward(ctx, params, x, gy, gx, gparams, scratch);
  }
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y) const {
    forward(ctx, params, x, y, detail::own_scratch(ctx, core().scratch_size(), "reprosgd::BatchNorm2D::scratch"));
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out& y, const GOut& gy, const GIn& gx,
                const GP& gparams) const {
    backward(ctx, params, x, y, gy, gx, gparams,
             detail::own_scratch(ctx, core().scratch_size(), "reprosgd::BatchNorm2D::scratch"));
  }
  /// next = the running statistics blended with the step's, whose slots in gparams it zeroes.
  template <class Space, class P, class G>
  void update_statistics(const Space& space, const P& params, const G& gparams, int, float* next) const {
    core().update_statistics(space, params, gparams, next);
  }

  [[nodiscard]] detail::BatchNormCore core() const noexcept {
    return {input.channels, static_cast<long>(input.height) * input.width, momentum, eps};
  }
};

/**
 * Batch normalisation of features: BatchNorm2D with every feature a channel of one pixel (the
 * statistics are over the micro-batch's rows). Parameters: gamma, beta, running mean, running
 * variance, `features` each.
 *
 * **Example**: `BatchNorm1D{128}`.
 */
struct BatchNorm1D {
  int features = 0;
  float momentum = 0.1f;
  float eps = 1e-5f;

  static constexpr const char* name() noexcept { return "batchnorm1d"; }
  [[nodiscard]] int input_width() const noexcept { return features; }
  [[nodiscard]] int output_width(int width) const {
    if (features <= 0) throw config_error("reprosgd::BatchNorm1D: features must be positive, got " + std::to_string(features));
    if (width != features)
      throw config_error("reprosgd::BatchNorm1D: expects " + std::to_string(features) + " inputs, receives " +
                         std::to_string(width));
    detail::check_normalization_options("reprosgd::BatchNorm1D", momentum, eps, true);
    return width;
  }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return as_image().parameter_count(0); }
  [[nodiscard]] std::string describe(int) const {
    return "batchnorm1d(" + std::to_string(features) + ",momentum=" + detail::exact_float(momentum) +
           ",eps=" + detail::exact_float(eps) + ")";
  }
  [[nodiscard]] std::size_t scratch_size(int, long rows) const noexcept { return as_image().scratch_size(0, rows); }
  [[nodiscard]] std::vector<StatisticsRun> statistics_runs(int) const { return as_image().statistics_runs(0); }
  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int width) const {
    as_image().initialize(ctx, params, width);
  }
  template <class Ctx, class P, class In, class Out, class... Scratch>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y, const Scratch&... scratch) const {
    as_image().forward(ctx, params, x, y, scratch...);
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP, class... Scratch>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out& y, const GOut& gy, const GIn& gx,
                const GP& gparams, const Scratch&... scratch) const {
    as_image().backward(ctx, params, x, y, gy, gx, gparams, scratch...);
  }
  template <class Space, class P, class G>
  void update_statistics(const Space& space, const P& params, const G& gparams, int, float* next) const {
    as_image().update_statistics(space, params, gparams, 0, next);
  }
  /// The same layer as a BatchNorm2D of features x 1 x 1 images.
  [[nodiscard]] BatchNorm2D as_image() const noexcept { return {{features, 1, 1}, momentum, eps}; }
};

/**
 * Layer normalisation: each sample's `features` values (an image's C x H x W) are normalised by
 * their own mean and biased variance, summed in double over the features in ascending order by one
 * thread, then scaled per feature: y(r, j) = gamma[j] * (x - mean[r]) / sqrt(var[r] + eps) + beta[j].
 * No running statistics: training and evaluation compute the same thing. Parameters: gamma then
 * beta, `features` each (1 and 0 initially). dgamma and dbeta are sums over the micro-batch's rows
 * in ascending order; the input gradient is one thread per row.
 *
 * **Example**: `LayerNorm{256}`; after a 32x7x7 convolution `LayerNorm{32 * 7 * 7}`.
 */
struct LayerNorm {
  int features = 0;
  float eps = 1e-5f;

  static constexpr const char* name() noexcept { return "layernorm"; }
  [[nodiscard]] int input_width() const noexcept { return features; }
  [[nodiscard]] int output_width(int width) const {
    if (features <= 0) throw config_error("reprosgd::LayerNorm: features must be positive, got " + std::to_string(features));
    if (width != features)
      throw config_error("reprosgd::LayerNorm: expects " + std::to_string(features) + " inputs, receives " +
                         std::to_string(width));
    detail::check_normalization_options("reprosgd::LayerNorm", 0.0f, eps, false);
    return width;
  }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 2 * static_cast<std::size_t>(features); }
  [[nodiscard]] std::string describe(int) const {
    return "layernorm(" + std::to_string(features) + ",eps=" + detail::exact_float(eps) + ")";
  }
  /// The rows' means and inverse standard deviations.
  [[nodiscard]] std::size_t scratch_size(int, long rows) const noexcept { return 2 * static_cast<std::size_t>(rows); }

  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int) const {
    detail::initialize_normalization(ctx.space, params, features, false);
  }
  template <class Ctx, class P, class In, class Out, class Scratch>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y, const Scratch& scratch) const {
    const long R = static_cast<long>(x.extent(0)), F = features;
    float* mean = scratch.data();
    float* invstd = mean + R;
    group_moments(ctx.space, ElementGroups{R, F, F, 1}, x.data(), static_cast<double>(eps), mean, invstd, nullptr);
    row_normalize(ctx.space, R, F, x.data(), mean, invstd, params.data(), params.data() + F, y.data());
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP, class Scratch>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out&, const GOut& gy, const GIn& gx,
                const GP& gparams, const Scratch& scratch) const {
    const long R = static_cast<long>(x.extent(0)), F = features;
    float* mean = scratch.data();
    float* invstd = mean + R;
    group_moments(ctx.space, ElementGroups{R, F, F, 1}, x.data(), static_cast<double>(eps), mean, invstd, nullptr);
    row_parameter_gradients(ctx.space, R, F, x.data(), gy.data(), mean, invstd, gparams.data(), gparams.data() + F);
    if (gx.extent(0) > 0) row_input_gradient(ctx.space, R, F, x.data(), gy.data(), mean, invstd, params.data(), gx.data());
  }
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y) const {
    forward(ctx, params, x, y,
            detail::own_scratch(ctx, scratch_size(features, static_cast<long>(x.extent(0))), "reprosgd::LayerNorm::scratch"));
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out& y, const GOut& gy, const GIn& gx,
                const GP& gparams) const {
    backward(ctx, params, x, y, gy, gx, gparams,
             detail::own_scratch(ctx, scratch_size(features, static_cast<long>(x.extent(0))), "reprosgd::LayerNorm::scratch"));
  }
};

static_assert(Layer<BatchNorm2D>);
static_assert(Layer<BatchNorm1D>);
static_assert(Layer<LayerNorm>);

REPROSGD_END_NAMESPACE
