// SPDX-License-Identifier: BSD-3-Clause
/// @file Residual: output = block(x) + x, the block a compile-time chain of layers.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/elementwise.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/layer_traits.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/**
 * A residual connection: y = block(x) + x, the block being `Block...` applied in order (a ResNet
 * basic block is `Residual{Conv2D{...}, BatchNorm2D{...}, ReLU{}, Conv2D{...}, BatchNorm2D{...}}`).
 * The block must give as many outputs as it takes inputs (a convolution with padding keeps the
 * shape); with `projection`, a layer applied to x on the shortcut (a 1x1 Conv2D with a stride, a
 * Dense), y = block(x) + projection(x), so the block may change the shape.
 *
 * **Parameters**: the block's layers' in order, then the projection's, in the model's one buffer.
 * **Determinism**: the block's layers are computed as Sequential computes layers; the shortcut
 * is one rounded sum per element, and the input gradient block'(x)^T gy + gy (or + the
 * projection's) one more. Nothing depends on threads or ranks. Under model parallelism a
 * Residual is replicated like every layer other than Dense.
 * **Keys**: the block's layer j draws its random numbers (initialisation, dropout) as layer
 * (i + 1) * 256 + j, i being the Residual's own layer number; the projection as j = 255. So
 * blocks have at most 255 layers and the keys stay apart from a model's own layers while it has
 * fewer than 256.
 * **Memory**: the block's outputs are kept from forward to backward (stash_size(), which
 * Sequential gives each Residual); backward's gradients of the block's inner layers and their own
 * scratch are scratch_size().
 *
 * Written `Residual{layers...}` or `ProjectedResidual{projection, layers...}` (below).
 */
template <class Projection, Layer... Block>
class BasicResidual {
 public:
  static constexpr std::size_t depth = sizeof...(Block);
  static_assert(depth > 0 && depth < 255, "reprosgd::Residual: a block has 1 to 254 layers");
  static constexpr bool projected = !std::is_same_v<Projection, void>;
  using projection_type = std::conditional_t<projected, Projection, std::tuple<>>;

  explicit BasicResidual(Block... block)
    requires(!projected)
      : block_(std::move(block)...) {}
  BasicResidual(projection_type projection, Block... block)
    requires projected
      : block_(std::move(block)...), projection_(std::move(projection)) {}

  static constexpr const char* name() noexcept { return "residual"; }

  /// The block's widths for `width` inputs: w[0] = width, w[j + 1] the output of layer j.
  [[nodiscard]] std::array<int, depth + 1> widths(int width) const {
    std::array<int, depth + 1> w{};
    w[0] = width;
    for_each([&](const auto& layer, auto j) { w[j + 1] = layer.output_width(w[j]); });
    return w;
  }
  [[nodiscard]] int output_width(int width) const {
    const int out = widths(width)[depth];
    if constexpr (projected) {
      const int shortcut = projection_.output_width(width);
      if (shortcut != out)
        throw config_error("reprosgd::Residual: the block maps " + std::to_string(width) + " inputs to " +
                           std::to_string(out) + " outputs but the projection to " + std::to_string(shortcut));
    } else if (out != width) {
      throw config_error("reprosgd::Residual: the block maps " + std::to_string(width) + " inputs to " +
                         std::to_string(out) +
                         " outputs; the identity shortcut needs as many outputs as inputs (add a projection)");
    }
    return out;
  }
  /// Where each layer's parameters start in the Residual's slice (index depth: the projection's;
  /// depth + 1: the end).
  [[nodiscard]] std::array<std::size_t, depth + 2> offsets(int width) const {
    const auto w = widths(width);
    std::array<std::size_t, depth + 2> o{};
    for_each([&](const auto& layer, auto j) { o[j + 1] = o[j] + layer.parameter_count(w[j]); });
    o[depth + 1] = o[depth];
    if constexpr (projected) o[depth + 1] += projection_.parameter_count(width);
    return o;
  }
  [[nodiscard]] std::size_t parameter_count(int width) const { return offsets(width)[depth + 1]; }
  [[nodiscard]] std::string describe(int width) const {
    const auto w = widths(width);
    std::string d = "residual(";
    for_each([&](const auto& layer, auto j) { d += (j == 0 ? "" : ";") + layer.describe(w[j]); });
    if constexpr (projected) d += ";projection=" + projection_.describe(width);
    return d + ")";
  }

  /// Scratch: two gradient buffers of the widest inner width, then the largest inner scratch.
  [[nodiscard]] std::size_t scratch_size(int width, long rows) const {
    return 2 * gradient_floats(width, rows) + inner_scratch(width, rows);
  }
  /// Kept activations: the block's outputs (each layer's), then the inner layers' own stashes.
  [[nodiscard]] std::size_t stash_size(int width, long rows) const {
    const auto w = widths(width);
    std::size_t n = 0;
    for (std::size_t j = 1; j <= depth; ++j) n += static_cast<std::size_t>(rows) * static_cast<std::size_t>(w[j]);
    if constexpr (projected) n += static_cast<std::size_t>(rows) * static_cast<std::size_t>(w[depth]);
    for_all([&](const auto& layer, std::size_t, int in) {
      if constexpr (detail::KeepsActivations<std::remove_cvref_t<decltype(layer)>>) n += layer.stash_size(in, rows);
    }, width);
    return n;
  }
  /// The inner layers' statistics (BatchNorm's running mean and variance), at their offsets here.
  [[nodiscard]] std::vector<StatisticsRun> statistics_runs(int width) const {
    const auto o = offsets(width);
    std::vector<StatisticsRun> runs;
    for_all([&](const auto& layer, std::size_t j, int in) {
      if constexpr (detail::KeepsStatistics<std::remove_cvref_t<decltype(layer)>>)
        for (StatisticsRun r : layer.statistics_runs(in)) runs.push_back({o[j] + r.offset, r.count});
    }, width);
    return runs;
  }
  /// The inner layers' update_statistics, `next` filled in statistics_runs() order.
  template <class Space, class P, class G>
  void update_statistics(const Space& space, const P& params, const G& grads, int width, float* next) const {
    const auto o = offsets(width);
    for_all([&](const auto& layer, std::size_t j, int in) {
      if constexpr (detail::KeepsStatistics<std::remove_cvref_t<decltype(layer)>>) {
        layer.update_statistics(space, sub(params, o, j), sub(grads, o, j), in, next);
        for (StatisticsRun r : layer.statistics_runs(in)) next += r.count;
      }
    }, width);
  }

  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int width) const {
    const auto o = offsets(width);
    for_all([&](const auto& layer, std::size_t j, int in) { layer.initialize(inner(ctx, j), sub(params, o, j), in); },
            width);
  }

  /// y = block(x) + x (or + projection(x)); the block's outputs stay in `stash` for backward.
  template <class Ctx, class P, class In, class Out, class Scratch, class Stash>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y, const Scratch& scratch,
               const Stash& stash) const {
    const long rows = static_cast<long>(x.extent(0));
    const int width = static_cast<int>(x.extent(1));
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    const Plan<mem> plan(*this, width, rows, scratch.data(), stash.data());
    for_all([&](const auto& layer, std::size_t j, int) {
      call_forward(layer, j, inner(ctx, j), sub(params, plan.o, j), plan.input(j, x), plan.output(j), plan);
    }, width);
    const float* shortcut = x.data();
    if constexpr (projected) shortcut = plan.out[depth];
    add_elements(ctx.space, rows * plan.w[depth], plan.out[depth - 1], shortcut, y.data());
  }

  /// The block's and the projection's parameter gradients; gx (unless empty: the first layer) =
  /// the block's input gradient + gy (or + the projection's input gradient).
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP, class Scratch, class Stash>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out&, const GOut& gy, const GIn& gx,
                const GP& gparams, const Scratch& scratch, const Stash& stash) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    const long rows = static_cast<long>(x.extent(0));
    const int width = static_cast<int>(x.extent(1));
    const Plan<mem> plan(*this, width, rows, scratch.data(), stash.data());
    const bool first = gx.extent(0) == 0;
    MatrixRef<mem> g(gy.data(), rows, plan.w[depth]);
    bool use_a = true;
    for_all_reverse([&](const auto& layer, std::size_t j, int in) {
      float* target = j == 0 ? gx.data() : (use_a ? plan.grad_a : plan.grad_b);
      const MatrixRef<mem> gin(target, j == 0 && first ? 0 : rows, j == 0 && first ? 0 : in);
      call_backward(layer, j, inner(ctx, j), sub(params, plan.o, j), plan.input(j, x), plan.output(j), g, gin,
                    sub(gparams, plan.o, j), plan);
      g = gin;
      use_a = !use_a;
    }, width);
    if constexpr (projected) {
      // The projection's input gradient into the scratch, then added to the block's.
      const MatrixRef<mem> gin(plan.grad_a, first ? 0 : rows, first ? 0 : width);
      call_backward(projection_, depth, inner(ctx, 255), sub(params, plan.o, depth), plan.input(depth, x), plan.output(depth),
                    MatrixRef<mem>(gy.data(), rows, plan.w[depth]), gin, sub(gparams, plan.o, depth), plan);
      if (!first) add_elements(ctx.space, static_cast<long>(rows) * width, gx.data(), plan.grad_a, gx.data());
    } else if (!first) {
      add_elements(ctx.space, rows * width, gx.data(), gy.data(), gx.data());
    }
  }

  /// The Layer concept's forward: with scratch and stash of its own.
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y) const {
    const int width = static_cast<int>(x.extent(1));
    const long rows = static_cast<long>(x.extent(0));
    forward(ctx, params, x, y, own(ctx, scratch_size(width, rows)), own(ctx, stash_size(width, rows)));
  }
  /// The Layer concept's backward: forward again into a stash of its own (the same bits), then backward.
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out& y, const GOut& gy, const GIn& gx,
                const GP& gparams) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    const int width = static_cast<int>(x.extent(1));
    const long rows = static_cast<long>(x.extent(0));
    const auto scratch = own(ctx, scratch_size(width, rows)), stash = own(ctx, stash_size(width, rows));
    const Matrix<mem> again("reprosgd::Residual::output", rows, static_cast<long>(y.extent(1)));
    forward(ctx, params, x, again, scratch, stash);
    backward(ctx, params, x, y, gy, gx, gparams, scratch, stash);
  }

  template <std::size_t J>
  [[nodiscard]] const auto& layer() const noexcept { return std::get<J>(block_); }

 private:
  // Where everything lives for a call: the widths, the parameter offsets, the block's outputs in
  // the stash (out[j]: layer j's; out[depth]: the projection's), then the inner layers' stashes;
  // the two gradient buffers and then the inner layers' scratch in the scratch.
  template <class Mem>
  struct Plan {
    std::array<int, depth + 1> w;
    std::array<std::size_t, depth + 2> o;
    long rows;
    std::array<float*, depth + 1> out{};
    std::array<float*, depth + 1> stash{};
    std::array<std::size_t, depth + 1> stash_n{};
    float* grad_a;
    float* grad_b;
    float* scratch;
    std::size_t scratch_n;

    Plan(const BasicResidual& r, int width, long rows_, float* scratch_, float* stash_)
        : w(r.widths(width)), o(r.offsets(width)), rows(rows_) {
      float* s = stash_;
      for (std::size_t j = 0; j < depth; ++j) {
        out[j] = s;
        s += rows * w[j + 1];
      }
      if constexpr (projected) {
        out[depth] = s;
        s += rows * w[depth];
      }
      r.for_all([&](const auto& layer, std::size_t j, int in) {
        if constexpr (detail::KeepsActivations<std::remove_cvref_t<decltype(layer)>>) {
          stash[j] = s;
          stash_n[j] = layer.stash_size(in, rows);
          s += stash_n[j];
        }
      }, width);
      const std::size_t g = r.gradient_floats(width, rows);
      grad_a = scratch_;
      grad_b = scratch_ + g;
      scratch = scratch_ + 2 * g;
      scratch_n = r.inner_scratch(width, rows);
    }
    /// Layer j's input: x for the first layer and the projection, else layer j - 1's output.
    template <class In>
    MatrixRef<Mem> input(std::size_t j, const In& x) const {
      if (j == 0 || j == depth) return MatrixRef<Mem>(x.data(), rows, w[0]);
      return MatrixRef<Mem>(out[j - 1], rows, w[j]);
    }
    MatrixRef<Mem> output(std::size_t j) const { return MatrixRef<Mem>(out[j], rows, w[j < depth ? j + 1 : depth]); }
  };

  template <class L, class Ctx, class P, class In, class Out, class Mem>
  static void call_forward(const L& layer, std::size_t j, const Ctx& ctx, const P& p, const In& x, const Out& y,
                           const Plan<Mem>& plan) {
    if constexpr (detail::KeepsActivations<L>)
      layer.forward(ctx, p, x, y, BufferRef<Mem>(plan.scratch, plan.scratch_n), BufferRef<Mem>(plan.stash[j], plan.stash_n[j]));
    else if constexpr (detail::UsesScratch<L>)
      layer.forward(ctx, p, x, y, BufferRef<Mem>(plan.scratch, plan.scratch_n));
    else
      layer.forward(ctx, p, x, y);
  }
  template <class L, class Ctx, class P, class In, class Out, class GOut, class GIn, class GP, class Mem>
  static void call_backward(const L& layer, std::size_t j, const Ctx& ctx, const P& p, const In& x, const Out& y,
                            const GOut& gy, const GIn& gx, const GP& gp, const Plan<Mem>& plan) {
    if constexpr (detail::KeepsActivations<L>)
      layer.backward(ctx, p, x, y, gy, gx, gp, BufferRef<Mem>(plan.scratch, plan.scratch_n),
                     BufferRef<Mem>(plan.stash[j], plan.stash_n[j]));
    else if constexpr (detail::UsesScratch<L>)
      layer.backward(ctx, p, x, y, gy, gx, gp, BufferRef<Mem>(plan.scratch, plan.scratch_n));
    else
      layer.backward(ctx, p, x, y, gy, gx, gp);
  }

  [[nodiscard]] std::size_t gradient_floats(int width, long rows) const {
    const auto w = widths(width);
    return static_cast<std::size_t>(rows) * static_cast<std::size_t>(*std::max_element(w.begin(), w.end()));
  }
  [[nodiscard]] std::size_t inner_scratch(int width, long rows) const {
    std::size_t n = 0;
    for_all([&](const auto& layer, std::size_t, int in) {
      if constexpr (detail::UsesScratch<std::remove_cvref_t<decltype(layer)>>) n = std::max<std::size_t>(n, layer.scratch_size(in, rows));
    }, width);
    return n;
  }

  template <class Ctx>
  static Ctx inner(Ctx ctx, std::size_t j) {
    ctx.layer = (ctx.layer + 1) * 256u + static_cast<std::uint32_t>(j);
    return ctx;
  }
  template <class P, std::size_t N>
  static auto sub(const P& params, const std::array<std::size_t, N>& o, std::size_t j) {
    using mem = typename P::memory_space;
    return BufferRef<mem>(params.data() + o[j], o[j + 1] - o[j]);
  }
  template <class Ctx>
  static auto own(const Ctx& ctx, std::size_t n) {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    return Buffer<mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Residual::memory"), n);
  }

  template <class F>
  void for_each(F&& f) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::get<I>(block_), std::integral_constant<std::size_t, I>{}), ...);
    }(std::make_index_sequence<depth>{});
  }
  // Every inner layer with its position (the projection's is depth) and input width.
  template <class F>
  void for_all(F&& f, int width) const {
    const auto w = widths(width);
    for_each([&](const auto& layer, auto j) { f(layer, static_cast<std::size_t>(j), w[j]); });
    if constexpr (projected) f(projection_, depth, width);
  }
  template <class F>
  void for_all_reverse(F&& f, int width) const {
    const auto w = widths(width);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::get<depth - 1 - I>(block_), depth - 1 - I, w[depth - 1 - I]), ...);
    }(std::make_index_sequence<depth>{});
  }

  std::tuple<Block...> block_;
  [[no_unique_address]] projection_type projection_{};
};

/// y = block(x) + x. **Example**: `Residual{Dense{64, 64}, ReLU{}, Dense{64, 64}}`.
template <Layer... Block>
class Residual : public BasicResidual<void, Block...> {
 public:
  explicit Residual(Block... block) : BasicResidual<void, Block...>(std::move(block)...) {}
};
template <class... Block>
Residual(Block...) -> Residual<Block...>;

/// y = block(x) + projection(x), for a block that changes the shape. **Example**:
/// `ProjectedResidual{Conv2D{{16, 8, 8}, 32, 1, 2}, Conv2D{{16, 8, 8}, 32, 3, 2, 1}, ReLU{}}`
/// (the projection first).
template <Layer Projection, Layer... Block>
class ProjectedResidual : public BasicResidual<Projection, Block...> {
 public:
  ProjectedResidual(Projection projection, Block... block)
      : BasicResidual<Projection, Block...>(std::move(projection), std::move(block)...) {}
};
template <class Projection, class... Block>
ProjectedResidual(Projection, Block...) -> ProjectedResidual<Projection, Block...>;

REPROSGD_END_NAMESPACE
