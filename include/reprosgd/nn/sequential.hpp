// SPDX-License-Identifier: BSD-3-Clause
/// @file Sequential: a compile-time chain of layers over one contiguous parameter buffer.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/concepts/layer_context.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/image.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/defer_weight_gradients.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/group_layer.hpp>
#include <reprosgd/nn/layer_chain.hpp>
#include <reprosgd/nn/layer_traits.hpp>
#include <reprosgd/nn/model_group.hpp>
#include <reprosgd/reduction/canonical_blocks.hpp>
#include <reprosgd/reduction/local_sum.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <any>
#include <cstddef>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE


namespace detail {
/// Whether a Sequential of these layers may take its only layer's layers as its own (a chain).
template <class... Layers>
inline constexpr bool is_chain_model_v = sizeof...(Layers) == 1 && (LayerChainOfList<Layers> && ...);
/// `depth`, the number of layers, where it is known at compile time (not for a chain's layers).
template <bool Chain, std::size_t N>
struct SequentialDepth {
  static constexpr std::size_t depth = N;
};
template <std::size_t N>
struct SequentialDepth<true, N> {};
}  // namespace detail

/**
 * A model: layers applied in order, their parameters in ONE contiguous buffer (layer 0's first).
 *
 * Layer types are fixed at compile time (no virtual calls inside kernels); sizes are runtime. The
 * first layer fixes the input width (an `in` member, e.g. Dense, or input_width(), e.g. Conv2D).
 *
 * **Example**:
 * @code
 * reprosgd::Sequential model{reprosgd::Dense{784, 256}, reprosgd::ReLU{}, reprosgd::Dense{256, 10}};
 * @endcode
 *
 * **Layers chosen at run time.** A model whose only layer is a chain of layers with no shortcut (a
 * Network, nn/network.hpp: what `parse_network` composes from a text) takes the chain's layers as
 * its own: layer i of the model is the chain's layer i, with the key, the description, the
 * sharding and the trace's layer of a compile-time layer at that place, so the model has the bits
 * of the same layers written in a compile-time Sequential. layer_count() is then the chain's size
 * (and `depth`, the layer count known at compile time that Inference needs, is not declared).
 *
 * **Model parallelism.** shard(q, P) makes this object model rank q of a group of P: every Dense
 * layer then holds only the output features q owns (whole feature chunks, Dense::features_of),
 * every Conv2D only its output channels (whole channel chunks; its shard's output is gathered
 * pixel by pixel), and so does every Dense and Conv2D inside a residual block (nn/group_layer.hpp),
 * and parameters() is that shard — W's columns and b's elements of those features, layer by
 * layer. Other layers are replicated. The whole model's ("canonical", the one-process) layout is
 * still what initialisation keys on, what checkpoints and fingerprints hold, and what
 * canonical_runs() maps the shard into. forward/backward then take the ModelGroup that
 * connects the P ranks; the results are the same bits for every P (docs/parallelism.md).
 *
 * **Memory.** The parameters and workspaces live in `MemorySpace`, which must be the memory space of
 * the execution space that trains the model (the Trainer checks it). `Sequential` is the form for
 * Kokkos's default execution space (what most programs use); a program that trains on another
 * space (a host backend in a CUDA build, say) names it: `BasicSequential<Kokkos::HostSpace, ...>`
 * or `make_sequential<Kokkos::HostSpace>(layers...)`.
 *
 * @tparam MemorySpace a Kokkos memory space.
 * @tparam Layers models of the Layer concept.
 */
template <class MemorySpace, Layer... Layers>
class BasicSequential : public detail::SequentialDepth<detail::is_chain_model_v<Layers...>, sizeof...(Layers)> {
 public:
  using memory_space = MemorySpace;
  static_assert(sizeof...(Layers) > 0, "reprosgd::Sequential: a model needs at least one layer");
  /// Whether some layer keeps statistics that are not trained (BatchNorm): the Trainer then calls
  /// blend_statistics() before the optimizer's update and commit_statistics() after it.
  static constexpr bool keeps_statistics = (detail::KeepsStatistics<Layers> || ...);

  /// Activations and gradient scratch for micro-batches of up to `rows` samples.
  struct Workspace {
    long rows = 0;
    std::vector<Matrix<memory_space>> act;  // act[0] is the input, act[l+1] the output of layer l
    Buffer<memory_space> grad_a, grad_b;    // ping-pong input-gradient scratch (rows x widest)
    Matrix<memory_space> grad_out;          // gradient of the loss w.r.t. the model's output
    Buffer<memory_space> local_out;         // a sharded layer's own output columns (model parallel)
    Buffer<memory_space> partials;          // input-gradient partials of the owned feature chunks
    Buffer<memory_space> layer_scratch;     // the largest scratch a layer asks for (detail::UsesScratch)
    std::vector<Buffer<memory_space>> stash;  // stash[l]: layer l's kept activations (detail::KeepsActivations)
    std::any chunk_sum;  // LocalExactSum<ExecSpace> of the one-process calls: its workspace kept between steps
    /// Diagnosis (trace level tensor, testing::find_nondeterminism): when keep_input_gradients()
    /// sized it, backward copies layer i's input gradient into input_gradients[i] (i > 0; the
    /// first layer computes none), which the ping-pong scratch would overwrite. Empty: nothing kept.
    std::vector<Matrix<memory_space>> input_gradients;
  };

  /// Make backward keep every layer's input gradient in ws.input_gradients (a copy per layer per
  /// micro-batch; for diagnosis only). Local.
  void keep_input_gradients(Workspace& ws) const {
    ws.input_gradients.clear();
    ws.input_gradients.emplace_back();  // layer 0: no input gradient
    for (std::size_t i = 1; i < layer_count(); ++i)
      ws.input_gradients.emplace_back("reprosgd::Sequential::input_gradient", ws.rows, widths_[i]);
  }

  /// A run of `length` parameters at `canonical` in the whole model's buffer and `local` in the shard.
  using Run = CanonicalRun;

  explicit BasicSequential(Layers... layers) : layers_(std::move(layers)...) {
    using first = std::tuple_element_t<0, std::tuple<Layers...>>;
    static_assert(detail::StatesInputWidth<first>,
                  "reprosgd::Sequential: the first layer must state its input width (e.g. Dense{in, out}, "
                  "Conv2D{{channels, height, width}, ...})");
    if constexpr (chain_model) {
      expanded_ = std::get<0>(layers_).shortcut() == Shortcut::none;
      // The chain's own checks (1 to 254 layers, widths that chain) and messages.
      if (expanded_) (void)std::get<0>(layers_).output_width(detail::input_width_of(std::get<0>(layers_)));
    }
    const std::size_t n = layer_count();
    widths_.assign(n + 1, 0);
    offsets_.assign(n + 1, 0);
    canonical_offsets_.assign(n + 1, 0);
    widths_[0] = detail::input_width_of(std::get<0>(layers_));
    for_each_layer([&](auto& layer, auto i) {
      widths_[i + 1] = layer.output_width(widths_[i]);
      canonical_offsets_[i + 1] = canonical_offsets_[i] + layer.parameter_count(widths_[i]);
    });
    shard(0, 1);
  }

  /**
   * Make this model rank q of a model group of p: the parameter buffer becomes q's shard (zeros:
   * initialise or load afterwards). shard(0, 1) is the whole model. Not collective.
   * @throws config_error unless 0 <= q < p
   */
  void shard(int q, int p) {
    if (p < 1 || q < 0 || q >= p)
      throw config_error("reprosgd::Sequential::shard: model rank " + std::to_string(q) + " of " + std::to_string(p) +
                         " (need 0 <= rank < size)");
    model_rank_ = q;
    model_size_ = p;
    offsets_[0] = 0;
    for_each_layer([&](auto& layer, auto i) {
      offsets_[i + 1] = offsets_[i] + detail::held_parameter_count(layer, widths_[i], place());
    });
    params_ = Buffer<memory_space>();
    params_ = Buffer<memory_space>("reprosgd::Sequential::params", offsets_[layer_count()]);
    std::size_t statistics = 0;
    for (const StatisticsRun& r : statistics_runs()) statistics += r.count;
    next_statistics_ = Buffer<memory_space>("reprosgd::Sequential::next_statistics", statistics);
  }

  /// The runs of this object's parameter buffer that hold statistics, not trained weights
  /// (BatchNorm's running mean and variance; replicated layers, so the same in a shard), in order.
  [[nodiscard]] std::vector<StatisticsRun> statistics_runs() const {
    std::vector<StatisticsRun> runs;
    for_each_layer([&](auto& layer, auto i) {
      if constexpr (detail::KeepsStatistics<std::remove_cvref_t<decltype(layer)>>)
        for (StatisticsRun r : detail::held_statistics_runs(layer, widths_[i], place()))
          runs.push_back({offsets_[i] + r.offset, r.count});
    });
    return runs;
  }

  /**
   * After a step's reduction, before the optimizer's update: every statistics-keeping layer blends
   * the step's statistics (in `grads`' statistics slots, the exact mean of the micro-batches') into
   * its running ones, held until commit_statistics(), and zeroes those slots of `grads`. Local;
   * every rank holds the same reduced gradient, so every rank the same statistics. @deterministic
   */
  template <class ExecSpace, class Grads>
  void blend_statistics(const ExecSpace& space, const Grads& grads) const {
    float* next = next_statistics_.data();
    for_each_layer([&](auto& layer, auto i) {
      if constexpr (detail::KeepsStatistics<std::remove_cvref_t<decltype(layer)>>) {
        detail::update_held_statistics(layer, space, slice(params_, i), slice(grads, i), widths_[i], next, place());
        for (StatisticsRun r : detail::held_statistics_runs(layer, widths_[i], place())) next += r.count;
      }
    });
  }
  /// After the optimizer's update: the statistics blend_statistics() computed replace whatever the
  /// update wrote in their slots (a statistic is not trained). Local.
  template <class ExecSpace>
  void commit_statistics(const ExecSpace& space) const {
    std::size_t k = 0;
    for (const StatisticsRun& r : statistics_runs()) {
      Kokkos::deep_copy(space, Kokkos::subview(params_, std::make_pair(r.offset, r.offset + r.count)),
                        Kokkos::subview(next_statistics_, std::make_pair(k, k + r.count)));
      k += r.count;
    }
  }
  /// The model's layers: the Layers, or a run-time chain's layers (above).
  [[nodiscard]] std::size_t layer_count() const noexcept {
    if constexpr (chain_model)
      if (expanded_) return std::get<0>(layers_).size();
    return sizeof...(Layers);
  }
  [[nodiscard]] int model_rank() const noexcept { return model_rank_; }
  [[nodiscard]] int model_size() const noexcept { return model_size_; }

  /// Parameters this object holds: the whole model's, or its shard's after shard(q, p > 1).
  [[nodiscard]] std::size_t parameter_count() const noexcept { return offsets_[layer_count()]; }
  /// Parameters of the whole model (what checkpoints and fingerprints hold).
  [[nodiscard]] std::size_t canonical_parameter_count() const noexcept { return canonical_offsets_[layer_count()]; }
  /// Where layer `layer`'s parameters start in the whole model's buffer (layer == layer_count(): the end).
  [[nodiscard]] std::size_t canonical_parameter_offset(std::size_t layer) const noexcept {
    return canonical_offsets_[layer];
  }

  /**
   * Where model rank q's shard (of this object's group size) lies in the whole model's buffer:
   * contiguous runs in shard order (a sharded Dense layer gives one run per row of W, then one
   * for its biases; a replicated layer one run). Model rank 0 holds the replicated layers' runs;
   * other ranks list them too (their copies are equal). Pure function; not collective.
   */
  [[nodiscard]] std::vector<Run> canonical_runs(int q) const { return canonical_runs(q, model_size_); }
  /// canonical_runs() of model rank q in a group of p (whatever this object's own sharding).
  [[nodiscard]] std::vector<Run> canonical_runs(int q, int p) const {
    std::vector<Run> runs;
    std::size_t local = 0;
    for_each_layer([&](auto& layer, auto i) {
      detail::append_held_runs(layer, widths_[i], canonical_offsets_[i], local, detail::GroupPlace{q, p}, runs);
    });
    return runs;
  }
  [[nodiscard]] int input_width() const noexcept { return widths_[0]; }
  /// The image shape the first layer expects (Conv2D, a pool, Flatten), else 0x0x0 (features).
  [[nodiscard]] ImageShape input_shape() const noexcept {
    using first = std::tuple_element_t<0, std::tuple<Layers...>>;
    if constexpr (detail::TakesImage<first>) return std::get<0>(layers_).input;
    else return ImageShape{};
  }
  [[nodiscard]] int output_width() const noexcept { return widths_[layer_count()]; }
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

  /// Draw the initial parameters from `rng` (purpose init, keyed by layer and element of the
  /// whole model, so a shard holds exactly the whole model's values). @deterministic
  template <class ExecSpace, class Rng>
  void initialize(const ExecSpace& space, const Rng& rng) {
    for_each_layer([&](auto& layer, auto i) {
      LayerContext<ExecSpace, Rng> ctx{space, rng, static_cast<std::uint32_t>(i), 0, 0, false};
      detail::initialize_held(layer, ctx, slice(params_, i), widths_[i], place());
    });
    space.fence();
  }

  [[nodiscard]] Workspace make_workspace(long rows) const {
    Workspace ws;
    ws.rows = rows;
    int widest = 0;
    for (std::size_t i = 0; i <= layer_count(); ++i) {
      ws.act.emplace_back("reprosgd::Sequential::act", rows, widths_[i]);
      widest = widths_[i] > widest ? widths_[i] : widest;
    }
    ws.grad_a = Buffer<memory_space>("reprosgd::Sequential::grad_a", rows * widest);
    ws.grad_b = Buffer<memory_space>("reprosgd::Sequential::grad_b", rows * widest);
    ws.grad_out = Matrix<memory_space>("reprosgd::Sequential::grad_out", rows, widths_[layer_count()]);
    detail::GroupBuffers group_buffers;
    for_each_layer([&](auto& layer, auto i) {
      detail::add_group_buffers(layer, widths_[i], rows, place(), i > 0, group_buffers);
    });
    std::size_t scratch = 0;
    for_each_layer([&](auto& layer, auto i) {
      if constexpr (detail::UsesScratch<std::remove_cvref_t<decltype(layer)>>)
        scratch = std::max(scratch, static_cast<std::size_t>(layer.scratch_size(widths_[i], rows)));
    });
    ws.layer_scratch = Buffer<memory_space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Sequential::layer_scratch"),
                                            scratch);
    ws.stash.resize(layer_count());
    for_each_layer([&](auto& layer, auto i) {
      if constexpr (detail::KeepsActivations<std::remove_cvref_t<decltype(layer)>>)
        ws.stash[i] = Buffer<memory_space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Sequential::stash"),
                                           layer.stash_size(widths_[i], rows));
    });
    ws.local_out = Buffer<memory_space>("reprosgd::Sequential::local_out", group_buffers.local_out);
    ws.partials = Buffer<memory_space>("reprosgd::Sequential::partials", group_buffers.partials);
    return ws;
  }

  /// Forward the first `rows` rows of ws.act[0] through every layer; the output is ws.act[layer_count()].
  /// One process holding the whole model.
  template <class ExecSpace, class Rng>
  void forward(const LayerContext<ExecSpace, Rng>& base, Workspace& ws, long rows) const {
    LocalModelGroup<ExecSpace> group(base.space, local_sum<ExecSpace>(ws));
    forward(base, ws, rows, group);
  }

  /// Forward across a model group: a sharded layer computes its own features' columns, which the
  /// group gathers into the whole output every rank continues with. @collective over the group
  template <class ExecSpace, class Rng, ModelGroup Group>
  void forward(const LayerContext<ExecSpace, Rng>& base, Workspace& ws, long rows, Group& group) const {
    check_group(group);
    for_each_layer([&](auto& layer, auto i) {
      auto ctx = base;
      ctx.layer = static_cast<std::uint32_t>(i);
      detail::forward_held(layer, ctx, slice(params_, i), top(ws.act[i], rows), top(ws.act[i + 1], rows),
                           ws.layer_scratch, ws.stash[i], group, ws.local_out);
    });
  }

  /// Backward from ws.grad_out (first `rows` rows) into the gradient buffer `grads` (one row of the
  /// trainer's gradient matrix, laid out like the parameters). One process holding the whole model.
  template <class ExecSpace, class Rng, class Grads>
  void backward(const LayerContext<ExecSpace, Rng>& base, Workspace& ws, long rows, const Grads& grads) const {
    LocalModelGroup<ExecSpace> group(base.space, local_sum<ExecSpace>(ws));
    backward(base, ws, rows, grads, group);
  }

  /**
   * Backward across a model group. Every rank holds the whole output gradient of a sharded layer;
   * the layer's group backward (Dense::backward) computes dW and db of its own features and the
   * input-gradient partials of its own feature chunks, which the group adds exactly (the same
   * floats for any P; one process is the group LocalModelGroup). @collective over the group
   */
  template <class ExecSpace, class Rng, class Grads, ModelGroup Group>
  void backward(const LayerContext<ExecSpace, Rng>& base, Workspace& ws, long rows, const Grads& grads,
                Group& group) const {
    backward(base, ws, rows, grads, group, static_cast<const DeferWeightGradients<NoDeferral>*>(nullptr));
  }

  /// Backward in one process, handing the weight gradients of the layers that can defer them
  /// (top-level Dense layers) to `defer` (nn/defer_weight_gradients.hpp); the rest as above.
  template <class ExecSpace, class Rng, class Grads, class F>
  void backward(const LayerContext<ExecSpace, Rng>& base, Workspace& ws, long rows, const Grads& grads,
                const DeferWeightGradients<F>& defer) const {
    LocalModelGroup<ExecSpace> group(base.space, local_sum<ExecSpace>(ws));
    backward(base, ws, rows, grads, group, &defer);
  }

 private:
  struct NoDeferral {};

  template <class ExecSpace, class Rng, class Grads, ModelGroup Group, class F>
  void backward(const LayerContext<ExecSpace, Rng>& base, Workspace& ws, long rows, const Grads& grads, Group& group,
                const DeferWeightGradients<F>* defer) const {
    check_group(group);
    MatrixRef<memory_space> gout(ws.grad_out.data(), rows, widths_[layer_count()]);
    bool use_a = true;
    for_each_layer_reverse([&](auto& layer, auto i) {
      auto ctx = base;
      ctx.layer = static_cast<std::uint32_t>(i);
      float* scratch = use_a ? ws.grad_a.data() : ws.grad_b.data();
      MatrixRef<memory_space> gin(scratch, i == 0 ? 0 : rows, i == 0 ? 0 : widths_[i]);
      if constexpr (!std::is_same_v<F, NoDeferral> && DefersWeightGradients<std::remove_cvref_t<decltype(layer)>>)
        layer.backward(ctx, slice(params_, i), top(ws.act[i], rows), gout, gin, slice(grads, i), group, ws.partials,
                       *defer);
      else
        detail::backward_held(layer, ctx, slice(params_, i), top(ws.act[i], rows), top(ws.act[i + 1], rows), gout,
                              gin, slice(grads, i), ws.layer_scratch, ws.stash[i], group, ws.partials);
      if (i > 0 && !ws.input_gradients.empty())
        Kokkos::deep_copy(base.space, top(ws.input_gradients[i], rows), gin);
      gout = gin;
      use_a = !use_a;
    });
  }

  [[nodiscard]] detail::GroupPlace place() const noexcept { return {model_rank_, model_size_}; }
  /// The workspace's one-process chunk sum on ExecSpace (made on first use, kept between steps).
  template <class ExecSpace>
  static LocalExactSum<ExecSpace>& local_sum(Workspace& ws) {
    if (auto* sum = std::any_cast<LocalExactSum<ExecSpace>>(&ws.chunk_sum)) return *sum;
    return ws.chunk_sum.template emplace<LocalExactSum<ExecSpace>>();
  }
  template <class G>
  void check_group(const G& group) const {
    if (group.model_size() != model_size_ || group.model_rank() != model_rank_)
      throw config_error("reprosgd::Sequential: the model is shard " + std::to_string(model_rank_) + " of " +
                         std::to_string(model_size_) + " but the model group says rank " +
                         std::to_string(group.model_rank()) + " of " + std::to_string(group.model_size()) +
                         " (call shard() with the group's rank and size)");
  }
  template <class B>
  BufferRef<memory_space> slice(const B& buffer, std::size_t i) const {
    return BufferRef<memory_space>(buffer.data() + offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  static MatrixRef<memory_space> top(const Matrix<memory_space>& m, long rows) {
    return MatrixRef<memory_space>(m.data(), rows, m.extent(1));
  }
  // f(layer, i) for every layer in order: i an integral constant for the Layers, an index for a
  // run-time chain's layers (the same code serves both: i only indexes).
  template <class F>
  void for_each_layer(F&& f) const {
    if constexpr (chain_model) {
      if (expanded_) {
        const auto& chain = std::get<0>(layers_);
        for (std::size_t i = 0; i < chain.size(); ++i) chain.list().visit(i, [&](const auto& layer) { f(layer, i); });
        return;
      }
    }
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::get<I>(layers_), std::integral_constant<std::size_t, I>{}), ...);
    }(std::make_index_sequence<sizeof...(Layers)>{});
  }
  template <class F>
  void for_each_layer_reverse(F&& f) const {
    if constexpr (chain_model) {
      if (expanded_) {
        const auto& chain = std::get<0>(layers_);
        for (std::size_t i = chain.size(); i-- > 0;) chain.list().visit(i, [&](const auto& layer) { f(layer, i); });
        return;
      }
    }
    constexpr std::size_t n = sizeof...(Layers);
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::get<n - 1 - I>(layers_), std::integral_constant<std::size_t, n - 1 - I>{}), ...);
    }(std::make_index_sequence<n>{});
  }

  // Whether the only layer is a chain that may lend the model its layers (above).
  static constexpr bool chain_model = detail::is_chain_model_v<Layers...>;

  std::tuple<Layers...> layers_;
  bool expanded_ = false;                      // the model's layers are the chain's (chain_model, no shortcut)
  std::vector<int> widths_;                    // [layer_count() + 1]
  std::vector<std::size_t> offsets_;           // of this object's (possibly sharded) buffer
  std::vector<std::size_t> canonical_offsets_; // of the whole model's buffer
  int model_rank_ = 0;
  int model_size_ = 1;
  Buffer<memory_space> params_;
  Buffer<memory_space> next_statistics_;  // blend_statistics()' values until commit_statistics()
};

/// A model in the default execution space's memory (the example above): BasicSequential with that
/// space, written without naming it.
template <Layer... Layers>
class Sequential : public BasicSequential<Kokkos::DefaultExecutionSpace::memory_space, Layers...> {
 public:
  explicit Sequential(Layers... layers)
      : BasicSequential<Kokkos::DefaultExecutionSpace::memory_space, Layers...>(std::move(layers)...) {}
};
template <Layer... Layers>
Sequential(Layers...) -> Sequential<Layers...>;

/// A model whose parameters live in `MemorySpace`: `make_sequential<Kokkos::HostSpace>(Dense{4, 2})`.
template <class MemorySpace, Layer... Layers>
[[nodiscard]] BasicSequential<MemorySpace, Layers...> make_sequential(Layers... layers) {
  return BasicSequential<MemorySpace, Layers...>(std::move(layers)...);
}

REPROSGD_END_NAMESPACE
