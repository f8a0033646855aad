// SPDX-License-Identifier: BSD-3-Clause
/// @file Network: layers chosen at run time (from a text such as "conv(32,3,p1),bn,relu,...",
/// nn/model_spec.hpp), as one layer of a Sequential; AnyLayer, the built-in layer kinds it holds.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/image.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/conv2d.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/flatten.hpp>
#include <reprosgd/nn/layer_chain.hpp>
#include <reprosgd/nn/normalization.hpp>
#include <reprosgd/nn/pool2d.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

class Network;

/// One built-in layer chosen at run time, or a nested Network (a residual block).
struct AnyLayer {
  std::variant<Dense, Conv2D, MaxPool2D, AvgPool2D, GlobalAvgPool, Flatten, BatchNorm2D, BatchNorm1D, LayerNorm,
               ActivationFn, Dropout, std::shared_ptr<const Network>>
      kind;
};

namespace detail {
/// A Network's layers as a list LayerChain visits: the projection, if any, last.
struct AnyLayers {
  std::vector<AnyLayer> layers;
  bool projected = false;

  [[nodiscard]] std::size_t size() const noexcept { return layers.size() - (projected ? 1 : 0); }
  template <class F>
  void visit(std::size_t j, F&& f) const;  // below, once Network is complete
};
}  // namespace detail

/**
 * Layers applied in order, chosen at run time: the built-in layers (AnyLayer) and nested residual
 * blocks, with the arithmetic of detail::LayerChain — each inner layer's own kernels, in order, so
 * the same determinism argument as a Sequential's (docs/layers.md). As the only layer of a
 * `Sequential` it is a whole model composed at run time:
 *
 * @code
 * auto net = reprosgd::parse_network("conv(16,3,p1),bn,relu,maxpool(2),flatten,dense(10)", {1, 28, 28});
 * auto model = reprosgd::make_sequential<Kokkos::HostSpace>(net);
 * @endcode
 *
 * As the only layer of a Sequential a Network (with no shortcut) lends the model its layers: the
 * model's layer i is the Network's layer i, with the key, description, sharding under model
 * parallelism and trace layer of a compile-time layer at that place, so the model is the
 * compile-time Sequential of the same layers, bit for bit (nn/sequential.hpp). Nested inside a
 * model (a residual block, or a Network among other layers) it is one layer whose layer j draws
 * its random numbers as layer (i + 1)·256 + j (detail::LayerChain's keys), its Dense and Conv2D
 * layers split under model parallelism as a residual block's are.
 */
class Network : public detail::LayerChain<detail::AnyLayers> {
 public:
  Network() = default;
  /// `layers` applied in order, then `shortcut` (a residual block: identity, or projection with
  /// the projection as the last element of `layers`). `input` is the first layer's image shape
  /// (0x0x0 when it takes features): what the Trainer checks an image data set against.
  Network(std::vector<AnyLayer> layers, Shortcut shortcut = Shortcut::none, ImageShape input = {})
      : LayerChain({std::move(layers), shortcut == Shortcut::projection}, shortcut), input(input) {}

  ImageShape input;  ///< the first layer's image shape, or 0x0x0 (features)

  static constexpr const char* name() noexcept { return "network"; }
  [[nodiscard]] int input_width() const { return width_in_; }
  [[nodiscard]] int output_width(int width) const {
    return checked_output_width(width, shortcut() == Shortcut::none ? "reprosgd::Network" : "reprosgd::Residual");
  }
  /// "network(l0;l1;...)", or as Residual describes itself for a residual block.
  [[nodiscard]] std::string describe(int width) const {
    return (shortcut() == Shortcut::none ? "network(" : "residual(") + describe_layers(width) + ")";
  }

  /// The model's input width, as the first layer takes it (set by whoever composes the network).
  Network& with_input_width(int width) {
    width_in_ = width;
    return *this;
  }
  [[nodiscard]] const std::vector<AnyLayer>& layers() const noexcept { return list().layers; }

 private:
  int width_in_ = 0;
};

template <class F>
void detail::AnyLayers::visit(std::size_t j, F&& f) const {
  std::visit(
      [&](const auto& layer) {
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(layer)>, std::shared_ptr<const Network>>)
          f(*layer);
        else
          f(layer);
      },
      layers[j].kind);
}

static_assert(Layer<Network>);

REPROSGD_END_NAMESPACE
