// SPDX-License-Identifier: BSD-3-Clause
/// @file Conv2D: a 2-D convolution as im2col and the deterministic GEMM (a Dense layer on patches).
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/concepts/model_group.hpp>
#include <reprosgd/concepts/parallelism.hpp>
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
 * **Model parallelism.** Its output channels split over a model group as a Dense layer's output
 * features (whole channel chunks, one owner per channel): a rank computes its channels for every
 * output pixel, Sequential gathers them pixel by pixel, and the patch gradient is the owner's GEMM
 * (one chunk) or the group's exact sum of the chunks' partials — the same floats for any group
 * size, so the bits do not change (docs/parallelism.md).
 *
 * **Workspace.** The patch matrix needs scratch_size() floats (backward writes the patch gradient
 * over it); Sequential keeps it between steps (the Layer-concept calls without scratch allocate
 * it). A 1x1 convolution with stride 1 and no padding needs none: its patch matrix is the input.
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
  /// Floats of scratch forward and backward need for `rows` samples: the patch matrix (backward
  /// writes the patch gradient over it).
  [[nodiscard]] std::size_t scratch_size(int, long rows) const noexcept {
    if (pointwise()) return 0;
    return static_cast<std::size_t>(patch_rows(rows)) * static_cast<std::size_t>(kernel * kernel * input.channels);
  }

  // Model parallelism: the output channels split over a model group as the patch layer's
  // features (whole channel chunks; Sequential gathers a shard's channels pixel by pixel).
  /// The channel chunks (of channel_chunk output channels) the patch gradient is summed over.
  [[nodiscard]] int chunks() const noexcept { return patch_layer().chunks(); }
  [[nodiscard]] MicroBatchRange chunks_of(int q, int p) const noexcept { return patch_layer().chunks_of(q, p); }
  /// The output channels model rank q of p owns.
  [[nodiscard]] FeatureRange features_of(int q, int p) const noexcept { return patch_layer().features_of(q, p); }
  [[nodiscard]] std::size_t shard_parameter_count(FeatureRange r) const noexcept {
    return patch_layer().shard_parameter_count(r);
  }
  /// Rows of W (k^2 C): a shard's parameters are W's columns of its channels, row by row, then b's.
  [[nodiscard]] int weight_rows() const noexcept { return patch_layer().in; }
  /// Output rows per sample (the output pixels): a shard's channels are gathered for each.
  [[nodiscard]] long output_pixels() const noexcept { return geometry().out_pixels(); }
  /// Scratch of the group backward: the patch-gradient partials of the chunks rank q owns.
  [[nodiscard]] std::size_t partials_size(long rows, int q, int p) const noexcept {
    return patch_layer().partials_size(patch_rows(rows), q, p);
  }

  /// Draw the parameters: the patch layer's, keyed by each weight's place in the whole layer. @deterministic
  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int width) const {
    initialize(ctx, params, width, FeatureRange{0, out_channels});
  }
  /// Draw the parameters of the shard holding channels `r`, each weight keyed by its place in the
  /// whole layer (a shard holds exactly the whole layer's values). @deterministic
  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int, FeatureRange r) const {
    patch_layer().initialize(ctx, params, patch_layer().in, r);
  }

  /// y = im2col(x) W + b, with the patch matrix in `scratch` (scratch_size(width, rows) floats).
  /// The channels the parameters hold: all, or a shard's (y is then rows x OH x OW x its channels).
  template <class Ctx, class P, class In, class Out, class Scratch>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y, const Scratch& scratch) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    const long rows = static_cast<long>(x.extent(0)), m = patch_rows(rows);
    const long held = m > 0 ? static_cast<long>(y.size()) / m : 0;
    const MatrixRef<mem> patches = patch_matrix<mem>(ctx.space, x, scratch);
    patch_layer().forward(ctx, params, patches, MatrixRef<mem>(y.data(), m, held));
  }

  /**
   * Backward of the channels this model rank holds, across `group`, whose ranks hold the same
   * whole output gradient gy: the patch layer's group backward (Dense::backward) on the patch
   * matrix — dW and db of the rank's channels; the patch gradient the owner's GEMM (one chunk,
   * shared) or the group's exact sum of the chunks' partials — then col2im into gx (skipped when
   * gx is empty: the first layer). In one process (LocalModelGroup) these are the bits of the
   * Layer-concept backward. `partials`: partials_size(rows, q, p) floats; `scratch` as forward's.
   * @collective over group @deterministic
   */
  template <class Ctx, class P, class In, class GOut, class GIn, class GP, ModelGroup Group, class Partials, class Scratch>
  void backward(const Ctx& ctx, const P& params, const In& x, const GOut& gy, const GIn& gx, const GP& gparams,
                Group& group, const Partials& partials, const Scratch& scratch) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    const long rows = static_cast<long>(x.extent(0)), m = patch_rows(rows), kkc = kernel * kernel * input.channels;
    const MatrixRef<mem> patches = patch_matrix<mem>(ctx.space, x, scratch);
    const MatrixRef<mem> gyp(gy.data(), m, out_channels);
    const bool first = gx.extent(0) == 0;
    // The patch gradient overwrites the patches: the patch layer reads them only for the weight
    // gradients, before it writes its input gradient.
    const MatrixRef<mem> gpatch(pointwise() ? gx.data() : patches.data(), first ? 0 : m, first ? 0 : kkc);
    patch_layer().backward(ctx, params, patches, gyp, gpatch, gparams, group, partials);
    if (!first && !pointwise()) col2im(ctx.space, geometry(), rows, gpatch.data(), gx.data());
  }

  /// dW, db and (unless gx is empty: the first layer) gx in one process, with `scratch` as in
  /// forward: the group backward above on a LocalModelGroup. @deterministic
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP, class Scratch>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out&, const GOut& gy, const GIn& gx,
                const GP& gparams, const Scratch& scratch) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    using mem = typename exec::memory_space;
    LocalExactSum<exec> sum;
    LocalModelGroup<exec> group(ctx.space, sum);
    const Buffer<mem> partials(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::Conv2D::partials")),
                               gx.extent(0) == 0 ? 0 : partials_size(static_cast<long>(x.extent(0)), 0, 1));
    backward(ctx, params, x, gy, gx, gparams, group, partials, scratch);
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
