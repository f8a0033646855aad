// SPDX-License-Identifier: BSD-3-Clause
/// @file Pooling layers of NHWC samples: MaxPool2D, AvgPool2D (a window) and GlobalAvgPool (the
/// whole image). Parameter-free; kernels in kernels/pool.hpp.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/image.hpp>
#include <reprosgd/kernels/pool.hpp>

#include <cstddef>
#include <string>

REPROSGD_BEGIN_NAMESPACE

namespace detail {

/// What MaxPool2D and AvgPool2D share: the window over their input, its checks and description.
struct PoolWindow {
  ImageShape input;
  int kernel = 2;
  int stride = 0;  ///< 0: the kernel (non-overlapping windows, PyTorch's default)
  int padding = 0;

  [[nodiscard]] WindowGeometry geometry() const noexcept {
    return {input, kernel, stride == 0 ? kernel : stride, padding};
  }
  [[nodiscard]] ImageShape output_shape() const noexcept {
    const WindowGeometry g = geometry();
    return {input.channels, g.out_height(), g.out_width()};
  }
  [[nodiscard]] int input_width() const noexcept { return static_cast<int>(input.size()); }
  /// The checked output width; `who` names the layer in the messages.
  [[nodiscard]] int checked_output_width(const char* who, int width) const {
    if (stride < 0) throw config_error(std::string(who) + ": stride must be positive (or 0: the kernel), got " + std::to_string(stride));
    const WindowGeometry g = geometry();
    g.check(who);
    if (2 * padding > kernel)
      throw config_error(std::string(who) + ": padding " + std::to_string(padding) + " is more than half the kernel " +
                         std::to_string(kernel));
    input.check_input(who, width);
    return static_cast<int>(output_shape().size());
  }
  [[nodiscard]] std::string describe_as(const char* kind) const {
    const WindowGeometry g = geometry();
    return std::string(kind) + "(" + input.text() + ",k" + std::to_string(g.kernel) + ",s" + std::to_string(g.stride) +
           ",p" + std::to_string(g.padding) + ")";
  }
};

}  // namespace detail

/**
 * Max pooling: each output is the largest input of its window, per channel. Padding never wins.
 * **Tie rule**: the first of equal maxima in the window's order (kh, then kw ascending: the lowest
 * input index) takes the window's whole gradient; a NaN wins (it propagates). The backward pass is
 * a gather: each input element adds, windows in ascending order, the gradients of the windows it
 * wins, so overlapping windows need no atomics.
 *
 * **Example**: `MaxPool2D{{32, 28, 28}, 2}` (2x2, stride 2: the output is 32x14x14).
 */
struct MaxPool2D : detail::PoolWindow {
  MaxPool2D() = default;
  MaxPool2D(ImageShape in, int kernel_size, int stride_ = 0, int padding_ = 0)
      : detail::PoolWindow{in, kernel_size, stride_, padding_} {}
  static constexpr const char* name() noexcept { return "maxpool2d"; }
  [[nodiscard]] int output_width(int width) const { return checked_output_width("reprosgd::MaxPool2D", width); }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 0; }
  [[nodiscard]] std::string describe(int) const { return describe_as("maxpool2d"); }
  template <class Ctx, class P>
  void initialize(const Ctx&, const P&, int) const noexcept {}
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P&, const In& x, const Out& y) const {
    max_pool_forward(ctx.space, geometry(), static_cast<long>(x.extent(0)), x.data(), y.data());
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P&, const In& x, const Out&, const GOut& gy, const GIn& gx, const GP&) const {
    if (gx.extent(0) > 0) max_pool_backward(ctx.space, geometry(), static_cast<long>(x.extent(0)), x.data(), gy.data(), gx.data());
  }
};

/**
 * Average pooling: each output is the sum of its window (kh then kw ascending; padding counts as
 * zeros) divided by kernel^2 (PyTorch's AvgPool2d with count_include_pad).
 *
 * **Example**: `AvgPool2D{{32, 28, 28}, 2}`.
 */
struct AvgPool2D : detail::PoolWindow {
  AvgPool2D() = default;
  AvgPool2D(ImageShape in, int kernel_size, int stride_ = 0, int padding_ = 0)
      : detail::PoolWindow{in, kernel_size, stride_, padding_} {}
  static constexpr const char* name() noexcept { return "avgpool2d"; }
  [[nodiscard]] int output_width(int width) const { return checked_output_width("reprosgd::AvgPool2D", width); }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 0; }
  [[nodiscard]] std::string describe(int) const { return describe_as("avgpool2d"); }
  template <class Ctx, class P>
  void initialize(const Ctx&, const P&, int) const noexcept {}
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P&, const In& x, const Out& y) const {
    avg_pool_forward(ctx.space, geometry(), static_cast<long>(x.extent(0)), x.data(), y.data());
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P&, const In& x, const Out&, const GOut& gy, const GIn& gx, const GP&) const {
    if (gx.extent(0) > 0) avg_pool_backward(ctx.space, geometry(), static_cast<long>(x.extent(0)), gy.data(), gx.data());
  }
};

/**
 * Global average pooling: C x H x W to C, each channel's mean over the image (its pixels summed in
 * storage order, then divided by H * W).
 *
 * **Example**: `GlobalAvgPool{{64, 7, 7}}` (the output is 64 wide).
 */
struct GlobalAvgPool {
  ImageShape input;

  static constexpr const char* name() noexcept { return "global_avg_pool"; }
  [[nodiscard]] int input_width() const noexcept { return static_cast<int>(input.size()); }
  [[nodiscard]] int output_width(int width) const {
    input.check_input("reprosgd::GlobalAvgPool", width);
    return input.channels;
  }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 0; }
  [[nodiscard]] std::string describe(int) const { return "global_avg_pool(" + input.text() + ")"; }
  template <class Ctx, class P>
  void initialize(const Ctx&, const P&, int) const noexcept {}
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P&, const In& x, const Out& y) const {
    global_avg_pool_forward(ctx.space, input, static_cast<long>(x.extent(0)), x.data(), y.data());
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P&, const In& x, const Out&, const GOut& gy, const GIn& gx, const GP&) const {
    if (gx.extent(0) > 0) global_avg_pool_backward(ctx.space, input, static_cast<long>(x.extent(0)), gy.data(), gx.data());
  }
};

static_assert(Layer<MaxPool2D>);
static_assert(Layer<AvgPool2D>);
static_assert(Layer<GlobalAvgPool>);

REPROSGD_END_NAMESPACE
