// SPDX-License-Identifier: BSD-3-Clause
/// @file Residual: output = block(x) + x, the block a compile-time chain of layers.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/elementwise.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/layer_chain.hpp>
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
 * **Keys and memory**: detail::LayerChain's (the block's layer j draws its random numbers as
 * layer (i + 1) * 256 + j of the model, i the Residual's own number; the block's outputs are kept
 * from forward to backward in stash_size() floats, which Sequential gives each Residual).
 *
 * Written `Residual{layers...}` or `ProjectedResidual{projection, layers...}` (below).
 */
namespace detail {
/// The block of a residual as a list LayerChain visits: a tuple of layers, and the projection as
/// position sizeof...(Block) (std::tuple<> for none).
template <class Projection, class... Block>
struct TupleLayers {
  std::tuple<Block...> block;
  Projection projection;

  [[nodiscard]] static constexpr std::size_t size() noexcept { return sizeof...(Block); }
  template <class F>
  void visit(std::size_t j, F&& f) const {
    if constexpr (!std::is_same_v<Projection, std::tuple<>>)
      if (j == size()) return f(projection);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((j == I ? (f(std::get<I>(block)), 0) : 0), ...);
    }(std::make_index_sequence<size()>{});
  }
};
}  // namespace detail

template <class Projection, Layer... Block>
class BasicResidual {
 public:
  static constexpr std::size_t depth = sizeof...(Block);
  static_assert(depth > 0 && depth <= 254, "reprosgd::Residual: a block has 1 to 254 layers");
  static constexpr bool projected = !std::is_same_v<Projection, void>;
  using projection_type = std::conditional_t<projected, Projection, std::tuple<>>;

  explicit BasicResidual(Block... block)
    requires(!projected)
      : chain_({{std::move(block)...}, {}}, Shortcut::identity) {}
  BasicResidual(projection_type projection, Block... block)
    requires projected
      : chain_({{std::move(block)...}, std::move(projection)}, Shortcut::projection) {}

  static constexpr const char* name() noexcept { return "residual"; }
  [[nodiscard]] int output_width(int width) const { return chain_.output_width(width, "reprosgd::Residual"); }
  [[nodiscard]] std::size_t parameter_count(int width) const { return chain_.parameter_count(width); }
  [[nodiscard]] std::string describe(int width) const { return "residual(" + chain_.describe_layers(width) + ")"; }
  [[nodiscard]] std::size_t scratch_size(int width, long rows) const { return chain_.scratch_size(width, rows); }
  [[nodiscard]] std::size_t stash_size(int width, long rows) const { return chain_.stash_size(width, rows); }
  [[nodiscard]] std::vector<StatisticsRun> statistics_runs(int width) const { return chain_.statistics_runs(width); }
  template <class Space, class P, class G>
  void update_statistics(const Space& space, const P& params, const G& grads, int width, float* next) const {
    chain_.update_statistics(space, params, grads, width, next);
  }
  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int width) const {
    chain_.initialize(ctx, params, width);
  }
  /// y = block(x) + x (or + projection(x)); the block's outputs stay in `stash` for backward.
  template <class Ctx, class P, class In, class Out, class Scratch, class Stash>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y, const Scratch& scratch,
               const Stash& stash) const {
    chain_.forward(ctx, params, x, y, scratch, stash);
  }
  /// The block's and the projection's parameter gradients; gx (unless empty: the first layer) =
  /// the block's input gradient + gy (or + the projection's input gradient).
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP, class Scratch, class Stash>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out&, const GOut& gy, const GIn& gx,
                const GP& gparams, const Scratch& scratch, const Stash& stash) const {
    chain_.backward(ctx, params, x, gy, gx, gparams, scratch, stash);
  }
  /// The Layer concept's forward: with scratch and stash of its own.
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y) const {
    chain_.forward_alone(ctx, params, x, y);
  }
  /// The Layer concept's backward: forward again into a stash of its own (the same bits), then backward.
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out& y, const GOut& gy, const GIn& gx,
                const GP& gparams) const {
    chain_.backward_alone(ctx, params, x, y, gy, gx, gparams);
  }

  template <std::size_t J>
  [[nodiscard]] const auto& layer() const noexcept { return std::get<J>(chain_.list().block); }

 private:
  detail::LayerChain<detail::TupleLayers<projection_type, Block...>> chain_;
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
