// SPDX-License-Identifier: BSD-3-Clause
/// @file Sequential: a compile-time chain of layers over one contiguous parameter buffer.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/layer_context.hpp>

#include <Kokkos_Core.hpp>

#include <array>
#include <cstddef>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
template <class L>
concept HasInputWidth = requires(const L l) {
  { l.in } -> std::convertible_to<int>;
};
}  // namespace detail

/**
 * A model: layers applied in order, their parameters in ONE contiguous buffer (layer 0's first).
 *
 * Layer types are fixed at compile time (no virtual calls inside kernels); sizes are runtime. The
 * first layer fixes the input width (it must have an `in` member, e.g. Dense).
 *
 * **Example**:
 * @code
 * reprosgd::Sequential model{reprosgd::Dense{784, 256}, reprosgd::ReLU{}, reprosgd::Dense{256, 10}};
 * @endcode
 *
 * @tparam Layers models of the Layer concept.
 */
template <Layer... Layers>
class Sequential {
 public:
  using memory_space = Kokkos::DefaultExecutionSpace::memory_space;
  static constexpr std::size_t depth = sizeof...(Layers);
  static_assert(depth > 0, "reprosgd::Sequential: a model needs at least one layer");

  /// Activations and gradient scratch for micro-batches of up to `rows` samples.
  struct Workspace {
    long rows = 0;
    std::vector<Matrix<memory_space>> act;  // act[0] is the input, act[l+1] the output of layer l
    Buffer<memory_space> grad_a, grad_b;    // ping-pong input-gradient scratch (rows x widest)
    Matrix<memory_space> grad_out;          // gradient of the loss w.r.t. the model's output
  };

  explicit Sequential(Layers... layers) : layers_(std::move(layers)...) {
    using first = std::tuple_element_t<0, std::tuple<Layers...>>;
    static_assert(detail::HasInputWidth<first>,
                  "reprosgd::Sequential: the first layer must state its input width (e.g. Dense{in, out})");
    widths_[0] = std::get<0>(layers_).in;
    offsets_[0] = 0;
    for_each_layer([&](auto& layer, auto i) {
      widths_[i + 1] = layer.output_width(widths_[i]);
      offsets_[i + 1] = offsets_[i] + layer.parameter_count(widths_[i]);
    });
    params_ = Buffer<memory_space>("reprosgd::Sequential::params", offsets_[depth]);
  }

  [[nodiscard]] std::size_t parameter_count() const noexcept { return offsets_[depth]; }
  [[nodiscard]] int input_width() const noexcept { return widths_[0]; }
  [[nodiscard]] int output_width() const noexcept { return widths_[depth]; }
  [[nodiscard]] int width(std::size_t i) const noexcept { return widths_[i]; }
  [[nodiscard]] std::size_t parameter_offset(std::size_t layer) const noexcept { return offsets_[layer]; }
  [[nodiscard]] const Buffer<memory_space>& parameters() const noexcept { return params_; }
  template <std::size_t I>
  [[nodiscard]] const auto& layer() const noexcept { return std::get<I>(layers_); }

  /// One line per layer ("dense(784,256,he)", ...): enters the configuration hash of checkpoints.
  [[nodiscard]] std::vector<std::string> describe() const {
    std::vector<std::string> out;
    for_each_layer([&](auto& layer, auto i) { out.push_back(layer.describe(widths_[i])); });
    return out;
  }

  /// Draw the initial parameters from `rng` (purpose init, keyed by layer and element). @deterministic
  template <class ExecSpace, class Rng>
  void initialize(const ExecSpace& space, const Rng& rng) {
    for_each_layer([&](auto& layer, auto i) {
      LayerContext<ExecSpace, Rng> ctx{space, rng, static_cast<std::uint32_t>(i), 0, 0, false};
      layer.initialize(ctx, slice(params_, i), widths_[i]);
    });
    space.fence();
  }

  [[nodiscard]] Workspace make_workspace(long rows) const {
    Workspace ws;
    ws.rows = rows;
    int widest = 0;
    for (std::size_t i = 0; i <= depth; ++i) {
      ws.act.emplace_back("reprosgd::Sequential::act", rows, widths_[i]);
      widest = widths_[i] > widest ? widths_[i] : widest;
    }
    ws.grad_a = Buffer<memory_space>("reprosgd::Sequential::grad_a", rows * widest);
    ws.grad_b = Buffer<memory_space>("reprosgd::Sequential::grad_b", rows * widest);
    ws.grad_out = Matrix<memory_space>("reprosgd::Sequential::grad_out", rows, widths_[depth]);
    return ws;
  }

  /// Forward the first `rows` rows of ws.act[0] through every layer; the output is ws.act[depth].
  template <class ExecSpace, class Rng>
  void forward(const LayerContext<ExecSpace, Rng>& base, Workspace& ws, long rows) const {
    for_each_layer([&](auto& layer, auto i) {
      auto ctx = base;
      ctx.layer = static_cast<std::uint32_t>(i);
      layer.forward(ctx, slice(params_, i), top(ws.act[i], rows), top(ws.act[i + 1], rows));
    });
  }

  /// Backward from ws.grad_out (first `rows` rows) into the gradient buffer `grads` (one row of the
  /// trainer's gradient matrix, laid out like the parameters).
  template <class ExecSpace, class Rng, class Grads>
  void backward(const LayerContext<ExecSpace, Rng>& base, Workspace& ws, long rows, const Grads& grads) const {
    MatrixRef<memory_space> gout(ws.grad_out.data(), rows, widths_[depth]);
    bool use_a = true;
    for_each_layer_reverse([&](auto& layer, auto i) {
      auto ctx = base;
      ctx.layer = static_cast<std::uint32_t>(i);
      float* scratch = use_a ? ws.grad_a.data() : ws.grad_b.data();
      MatrixRef<memory_space> gin(scratch, i == 0 ? 0 : rows, i == 0 ? 0 : widths_[i]);
      layer.backward(ctx, slice(params_, i), top(ws.act[i], rows), top(ws.act[i + 1], rows), gout, gin,
                     slice(grads, i));
      gout = gin;
      use_a = !use_a;
    });
  }

 private:
  template <class B>
  BufferRef<memory_space> slice(const B& buffer, std::size_t i) const {
    return BufferRef<memory_space>(buffer.data() + offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  static MatrixRef<memory_space> top(const Matrix<memory_space>& m, long rows) {
    return MatrixRef<memory_space>(m.data(), rows, m.extent(1));
  }
  template <class F>
  void for_each_layer(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::get<I>(layers_), std::integral_constant<std::size_t, I>{}), ...);
    }(std::make_index_sequence<depth>{});
  }
  template <class F>
  void for_each_layer(F&& f) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::get<I>(layers_), std::integral_constant<std::size_t, I>{}), ...);
    }(std::make_index_sequence<depth>{});
  }
  template <class F>
  void for_each_layer_reverse(F&& f) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::get<depth - 1 - I>(layers_), std::integral_constant<std::size_t, depth - 1 - I>{}), ...);
    }(std::make_index_sequence<depth>{});
  }

  std::tuple<Layers...> layers_;
  std::array<int, depth + 1> widths_{};
  std::array<std::size_t, depth + 1> offsets_{};
  Buffer<memory_space> params_;
};

REPROSGD_END_NAMESPACE
