// SPDX-License-Identifier: BSD-3-Clause
/// @file Dense: y = x W + b through the deterministic GEMM.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/elementwise.hpp>
#include <reprosgd/kernels/gemm.hpp>
#include <reprosgd/rng/distributions.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstddef>
#include <string>

REPROSGD_BEGIN_NAMESPACE

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
 * Backward: dW = x^T dy (sum over the micro-batch's rows ascending), db(j) = sum_i dy(i,j),
 * dx = dy W^T.
 *
 * **Example**: `Dense{784, 256}` or `Dense{784, 256, Init::xavier_uniform}`.
 */
struct Dense {
  int in = 0;
  int out = 0;
  Init init = Init::he_normal;

  static constexpr const char* name() noexcept { return "dense"; }

  [[nodiscard]] int output_width(int width) const {
    if (in <= 0 || out <= 0)
      throw config_error("reprosgd::Dense: sizes must be positive, got " + std::to_string(in) + "x" +
                         std::to_string(out));
    if (width != in)
      throw config_error("reprosgd::Dense: expects " + std::to_string(in) + " inputs, receives " +
                         std::to_string(width));
    return out;
  }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept {
    return static_cast<std::size_t>(in) * static_cast<std::size_t>(out) + static_cast<std::size_t>(out);
  }
  [[nodiscard]] std::string describe(int) const {
    return std::string("dense(") + std::to_string(in) + "," + std::to_string(out) + "," +
           (init == Init::he_normal ? "he" : "xavier") + ")";
  }

  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int) const {
    using exec = decltype(ctx.space);
    const long n_w = static_cast<long>(in) * out;
    const auto rng = ctx.rng;
    const std::uint32_t layer = ctx.layer;
    const bool he = init == Init::he_normal;
    // The scale is computed once on the host with correctly rounded IEEE sqrt.
    const float scale = he ? static_cast<float>(std::sqrt(2.0 / in)) : static_cast<float>(std::sqrt(6.0 / (in + out)));
    Kokkos::parallel_for(
        "reprosgd::Dense::initialize", Kokkos::RangePolicy<exec>(ctx.space, 0, n_w + out), KOKKOS_LAMBDA(const long e) {
          if (e >= n_w) {
            params(e) = 0.0f;
            return;
          }
          const StreamCoordinates c0{Purpose::init, layer, 0, 0, 2 * static_cast<std::uint64_t>(e)};
          StreamCoordinates c1 = c0;
          c1.element += 1;
          if (he) {
            params(e) = normal_float(rng.uint32(c0), rng.uint32(c1)) * scale;
          } else {
            params(e) = (2.0f * uniform_float(rng.uint32(c0)) - 1.0f) * scale;
          }
        });
  }

  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y) const {
    using mem = typename decltype(ctx.space)::memory_space;
    const MatrixRef<mem> w(params.data(), in, out);
    const BufferRef<mem> b(params.data() + static_cast<std::size_t>(in) * out, out);
    gemm_nn_bias(ctx.space, x, w, b, y);  // the bits of gemm_nn then add_bias, in one pass
  }

  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out&, const GOut& gy, const GIn& gx,
                const GP& gparams) const {
    using mem = typename decltype(ctx.space)::memory_space;
    const MatrixRef<mem> gw(gparams.data(), in, out);
    const BufferRef<mem> gb(gparams.data() + static_cast<std::size_t>(in) * out, out);
    gemm_tn(ctx.space, x, gy, gw);
    bias_gradient(ctx.space, gy, gb);
    if (gx.extent(0) > 0) {
      const MatrixRef<mem> w(params.data(), in, out);
      gemm_nt(ctx.space, gy, w, gx);
    }
  }
};

static_assert(Layer<Dense>);

REPROSGD_END_NAMESPACE
