// SPDX-License-Identifier: BSD-3-Clause
/// @file Conv2D: a 2-D convolution as im2col and the deterministic GEMM (a Dense layer on patches).
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/conv.hpp>
#include <reprosgd/kernels/gemm.hpp>
#include <reprosgd/kernels/image.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/dense.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <string>
#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

/**
 * A 2-D convolution of NHWC samples (kernels/image.hpp): `out_channels` filters of kernel x kernel x
 * input.channels, moved by `stride` over the input padded with `padding` zeros.
 *
 * **It is a Dense layer on patches.** im2col writes each output pixel's window as one row of a patch
 * matrix (rows x OH x OW rows, kernel^2 x C columns, ordered kh, kw, c); the convolution is then
 * exactly Dense{kernel^2 C, out_channels}.forward of that matrix, and its rows x OH x OW x
 * out_channels result is the NHWC output with no transpose. The parameters are that Dense layer's:
 * W (kernel^2 C x out_channels, row (kh * kernel + kw) * C + c) then b (out_channels); so are the
 * initialisation (He or Xavier with the patch matrix's fans, every weight keyed by its place in the
 * whole layer), the weight gradient dW = patches^T dY (a sum over every output pixel of every
 * sample of the micro-batch, ascending), the bias gradient, and the input gradient of the patches,
 * dY W^T: one GEMM with up to `channel_chunk` output channels, else the exact sum of the chunks'
 * partials (docs/parallelism.md). col2im then adds each input element's patch gradients in a
 * fixed order. Every element has one owner; nothing depends on threads or backend.
 *
 * **Workspace.** The patch matrix needs scratch_size() floats; Sequential keeps it between steps
 * (the Layer-concept calls without scratch allocate it). A 1x1 convolution with stride 1 and no
 * padding needs none: its patch matrix is the input.
 *
 * **Example**: `Conv2D{{1, 28, 28}, 32, 3, 1, 1}`: 32 filters of 3x3 over a 28x28 grayscale image,
 * padded by 1 (the output is 32x28x28).
 */
struct Conv2D {
  ImageShape input;
  int out_channels = 0;
  int kernel = 1;
  int stride = 1;
  int padding = 0;
  Init init = Init::he_normal;
  int channel_chunk = default_feature_chunk;  ///< output channels per input-gradient chunk

  static constexpr const char* name() noexcept { return "conv2d"; }

  [[nodiscard]] WindowGeometry geometry() const noexcept { return {input, kernel, stride, padding}; }
  [[nodiscard]] ImageShape output_shape() const noexcept {
    const WindowGeometry g = geometry();
    return {out_channels, g.out_height(), g.out_width()};
  }
  /// Floats per input sample (the model's input width when this is the first layer).
  [[nodiscard]] int input_width() const noexcept { return static_cast<int>(input.size()); }
  /// The Dense layer this convolution applies to each patch.
  [[nodiscard]] Dense patch_layer() const noexcept {
    return Dense{kernel * kernel * input.channels, out_channels, init, channel_chunk};
  }

  [[nodiscard]] int output_width(int width) const {
    geometry().check("reprosgd::Conv2D");
    if (out_channels <= 0)
      throw config_error("reprosgd::Conv2D: out_channels must be positive, got " + std::to_string(out_channels));
    if (channel_chunk <= 0)
      throw config_error("reprosgd::Conv2D: channel_chunk must be positive, got " + std::to_string(channel_chunk));
    input.check_input("reprosgd::Conv2D", width);
    return static_cast<int>(output_shape().size());
  }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return patch_layer().parameter_count(0); }
  [[nodiscard]] std::string describe(int) const {
    std::string d = "conv2d(" + input.text() + "," + std::to_string(out_channels) + ",k" + std::to_string(kernel) +
                    ",s" + std::to_string(stride) + ",p" + std::to_string(padding) + "," +
                    (init == Init::he_normal ? "he" : "xavier");
    if (patch_layer().chunks() > 1) d += ",chunk=" + std::to_string(channel_chunk);
    return d + ")";
  }

  /// A 1x1 convolution with stride 1 and no padding: the patch matrix is the input itself.
  [[nodiscard]] bool pointwise() const noexcept { return kernel == 1 && stride == 1 && padding == 0; }
  /// Rows of the patch matrix of `rows` samples.
  [[nodiscard]] long patch_rows(long rows) const noexcept { return rows * geometry().out_pixels(); }
  /// Floats of scratch forward and backward need for `rows` samples: the patch matrix, and with
  /// several channel chunks its gradient beside it.
  [[nodiscard]] std::size_t scratch_size(int, long rows) const noexcept {
    if (pointwise()) return 0;
    const auto patch = static_cast<std::size_t>(patch_rows(rows)) * static_cast<std::size_t>(kernel * kernel * input.channels);
    return patch_layer().chunks() > 1 ? 2 * patch : patch;
  }

  /// Draw the parameters: the patch layer's, keyed by each weight's place in the whole layer. @deterministic
  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int) const {
    patch_layer().initialize(ctx, params, patch_layer().in);
  }

  /// y = im2col(x) W + b, with the patch matrix in `scratch` (scratch_size(width, rows) floats).
  template <class Ctx, class P, class In, class Out, class Scratch>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y, const Scratch& scratch) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    const long rows = static_cast<long>(x.extent(0));
    const MatrixRef<mem> patches = patch_matrix<mem>(ctx.space, x, scratch);
    patch_layer().forward(ctx, params, patches, MatrixRef<mem>(y.data(), patch_rows(rows), out_channels));
  }

  /// dW, db and (unless gx is empty: the first layer) gx, with `scratch` as in forward. @deterministic
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP, class Scratch>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out&, const GOut& gy, const GIn& gx,
                const GP& gparams, const Scratch& scratch) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    using mem = typename exec::memory_space;
    const long rows = static_cast<long>(x.extent(0)), m = patch_rows(rows), kkc = kernel * kernel * input.channels;
    const Dense d = patch_layer();
    const MatrixRef<mem> patches = patch_matrix<mem>(ctx.space, x, scratch);
    const MatrixRef<mem> gyp(gy.data(), m, out_channels);
    if (gx.extent(0) == 0 || d.chunks() == 1) {
      d.weight_gradients(ctx.space, patches, gyp, gparams);
      if (gx.extent(0) == 0) return;  // the first layer: no input gradient
      // The patch gradient overwrites the patches, which the weight gradients no longer need.
      const MatrixRef<mem> gpatch = pointwise() ? MatrixRef<mem>(gx.data(), m, kkc) : patches;
      gemm_nt(ctx.space, gyp, MatrixRef<mem>(params.data(), kkc, out_channels), gpatch);
      if (!pointwise()) col2im(ctx.space, geometry(), rows, gpatch.data(), gx.data());
      return;
    }
    // Several channel chunks: Dense's backward (the exact sum of the chunks' partials) into the
    // patch gradient beside the patches.
    const MatrixRef<mem> gpatch(pointwise() ? gx.data() : scratch.data() + m * kkc, m, kkc);
    d.backward(ctx, params, patches, gyp, gyp, gpatch, gparams);
    if (!pointwise()) col2im(ctx.space, geometry(), rows, gpatch.data(), gx.data());
  }

  /// The Layer concept's forward: as above with scratch of its own.
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y) const {
    forward(ctx, params, x, y, own_scratch(ctx, static_cast<long>(x.extent(0))));
  }
  /// The Layer concept's backward: as above with scratch of its own.
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out& y, const GOut& gy, const GIn& gx,
                const GP& gparams) const {
    backward(ctx, params, x, y, gy, gx, gparams, own_scratch(ctx, static_cast<long>(x.extent(0))));
  }

  /// The patch matrix of x: x itself for a pointwise convolution, else im2col into the scratch.
  /// Public only because nvcc cannot compile an extended (device) lambda in a private member
  /// function; not part of the interface.
  template <class Mem, class Space, class In, class Scratch>
  MatrixRef<Mem> patch_matrix(const Space& space, const In& x, const Scratch& scratch) const {
    const long rows = static_cast<long>(x.extent(0)), kkc = kernel * kernel * input.channels;
    if (pointwise()) return MatrixRef<Mem>(x.data(), patch_rows(rows), kkc);
    if (scratch.extent(0) < static_cast<std::size_t>(patch_rows(rows) * kkc))
      throw config_error("reprosgd::Conv2D: scratch of " + std::to_string(scratch.extent(0)) +
                         " floats is smaller than the patch matrix (" + std::to_string(patch_rows(rows) * kkc) + ")");
    im2col(space, geometry(), rows, x.data(), scratch.data());
    return MatrixRef<Mem>(scratch.data(), patch_rows(rows), kkc);
  }

 private:
  template <class Ctx>
  auto own_scratch(const Ctx& ctx, long rows) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    return Buffer<mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Conv2D::scratch"),
                       scratch_size(input_width(), rows));
  }
};

static_assert(Layer<Conv2D>);

REPROSGD_END_NAMESPACE
