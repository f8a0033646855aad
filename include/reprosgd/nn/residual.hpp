// SPDX-License-Identifier: BSD-3-Clause
/// @file Residual: output = block(x) + x, the block a compile-time chain of layers.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/nn/layer_chain.hpp>

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

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
 * Under model parallelism the block's Dense and Conv2D layers are split over the group like a
 * Sequential's (detail::LayerChain, nn/group_layer.hpp); its other layers are replicated.
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

namespace detail {
/// A residual's projection as TupleLayers holds it: std::tuple<> for none.
template <class Projection>
using ResidualProjection = std::conditional_t<std::is_same_v<Projection, void>, std::tuple<>, Projection>;
}  // namespace detail

/// The residual blocks' one class: the chain of the block's layers, its shortcut, their description.
template <class Projection, Layer... Block>
class BasicResidual : public detail::LayerChain<detail::TupleLayers<detail::ResidualProjection<Projection>, Block...>> {
 public:
  static constexpr std::size_t depth = sizeof...(Block);
  static constexpr bool projected = !std::is_same_v<Projection, void>;
  using projection_type = detail::ResidualProjection<Projection>;
  using chain_type = detail::LayerChain<detail::TupleLayers<projection_type, Block...>>;

  explicit BasicResidual(Block... block)
    requires(!projected)
      : chain_type({{std::move(block)...}, {}}, Shortcut::identity) {}
  BasicResidual(projection_type projection, Block... block)
    requires projected
      : chain_type({{std::move(block)...}, std::move(projection)}, Shortcut::projection) {}

  static constexpr const char* name() noexcept { return "residual"; }
  [[nodiscard]] int output_width(int width) const { return this->checked_output_width(width, "reprosgd::Residual"); }
  [[nodiscard]] std::string describe(int width) const { return "residual(" + this->describe_layers(width) + ")"; }

  template <std::size_t J>
  [[nodiscard]] const auto& layer() const noexcept { return std::get<J>(this->list().block); }
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
