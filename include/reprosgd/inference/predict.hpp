// SPDX-License-Identifier: BSD-3-Clause
/// @file Inference: a trained model's batched forward pass on the caller's Views, with its own
/// workspace (no allocation per call), dropout off, the model's normalisation applied — the same
/// bits as training's forward pass for the same rows. predict() and predicted_classes() beside it.
#pragma once

#include <reprosgd/concepts/layer_context.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/inference/normalization.hpp>
#include <reprosgd/kernels/gemv.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

REPROSGD_BEGIN_NAMESPACE

/// A model Inference can run: a Sequential (its layers by index, their widths and parameter offsets).
template <class M>
concept InferenceModel = requires(const M m, std::size_t i) {
  M::depth;
  typename M::memory_space;
  { m.input_width() } -> std::convertible_to<int>;
  { m.output_width() } -> std::convertible_to<int>;
  { m.width(i) } -> std::convertible_to<int>;
  { m.parameter_offset(i) } -> std::convertible_to<std::size_t>;
  { m.parameter_count() } -> std::convertible_to<std::size_t>;
  { m.model_size() } -> std::convertible_to<int>;
  m.parameters();
  m.template layer<0>();
};

/// A rank-2 View of float the inference reads its inputs from (any layout Kokkos indexes).
template <class V>
concept InferenceInput = Kokkos::is_view<V>::value && (static_cast<int>(V::rank) == 2) &&
                         std::same_as<typename V::non_const_value_type, float>;
/// A rank-2 View of non-const float the inference writes its outputs into (any layout).
template <class V>
concept InferenceOutput = InferenceInput<V> && std::same_as<typename V::value_type, float>;

namespace detail {
template <class V>
bool is_dense_row_major(const V& v) {
  if constexpr (std::is_same_v<typename V::array_layout, Kokkos::LayoutRight>)
    return v.extent(0) <= 1 || v.stride(0) == v.extent(1);
  else
    return false;
}
}  // namespace detail

/**
 * Runs a trained model forward on batches of the caller's inputs: y = model(normalise(x)), the
 * outputs' standardisation inverted where the model has one (Normalization).
 *
 * - **Bits.** Every layer runs the kernels training runs (Dense's GEMM, k ascending with one fused
 *   multiply-add per step, then the bias; the activations from math/), in evaluation mode
 *   (Dropout is the identity). Up to gemv_max_rows rows, Dense runs gemv_bias instead, which
 *   computes the same bits without packing the weights. A row's outputs are therefore the bits training's forward pass
 *   (`Sequential::forward`, as in `Trainer::evaluate`) computes for that row, whatever the batch,
 *   the thread count or the host backend (contract L1, docs/reproducibility.md).
 * - **Workspace.** Two activation buffers of capacity x (widest layer) floats in ExecSpace's
 *   memory, allocated by the constructor for `Options::batch` rows. predict() allocates nothing
 *   and copies nothing it does not have to: a LayoutRight, row-contiguous input without input
 *   normalisation goes straight into the first GEMM, and the last layer writes straight into a
 *   LayoutRight, row-contiguous output without output normalisation. A larger batch grows the
 *   workspace once, on that call (or, with `Options::grow = false`, runs in slices of
 *   capacity() rows, which gives the same bits); reserve() grows it up front.
 * - **Layouts.** Inputs and outputs are rank-2 Views of float, rows = samples, columns =
 *   features: LayoutRight (the fast path), LayoutLeft or LayoutStride (copied row by row through
 *   the workspace), in memory ExecSpace can access. x has input_width() columns, y output_width(),
 *   both the same number of rows.
 * - **Sharing.** The Inference holds a copy of the model object, which shares its parameter View
 *   (Kokkos reference semantics): several Inference objects may run one model, and parameters
 *   updated in place by further training are used by the next call. The model must be whole (not
 *   a model-parallel shard) and stay unsharded while an Inference uses it.
 * - No MPI and no collective. Not thread-safe: one predict() at a time per object (give each
 *   thread its own Inference). Asynchronous like a Kokkos kernel on `space` only where it can be:
 *   predict() returns after the last kernel is launched; fence `space` before reading y.
 *
 * @tparam Model a Sequential of the library's layers (InferenceModel).
 * @tparam ExecSpace the execution space that runs the kernels; it must access the model's memory.
 *
 * **Example**:
 * @code
 * reprosgd::Inference inference(model, norm, {.batch = 1024});     // allocates once
 * for (int t = 0; t < steps; ++t) {
 *   inference.predict(space, cells_in, cells_out);                  // no allocation
 *   space.fence();
 * }
 * @endcode
 */
template <InferenceModel Model, class ExecSpace = Kokkos::DefaultExecutionSpace>
  requires Kokkos::is_execution_space<ExecSpace>::value
class Inference {
 public:
  using model_type = Model;
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  static_assert(Kokkos::SpaceAccessibility<ExecSpace, typename Model::memory_space>::accessible,
                "reprosgd::Inference: the execution space cannot access the model's parameters");

  /// How the workspace is sized (aggregate: `{.batch = 1024}`).
  struct Options {
    long batch = 256;   ///< rows the workspace holds from the start
    bool grow = true;   ///< a larger batch grows the workspace (once); false: run it in slices
  };

  /**
   * @param model the trained model (whole, not a shard); its parameters are shared, not copied
   * @param normalization applied to inputs and inverted on outputs (checked against the model)
   * @throws config_error when the model is a shard, the batch is not positive or the
   *         normalisation does not fit the model
   */
  explicit Inference(const Model& model, const Normalization& normalization = {}, Options options = {})
      : model_(model), options_(options), norm_(checked(model, normalization, options)) {
    for (std::size_t i = 0; i <= Model::depth; ++i) widest_ = model_.width(i) > widest_ ? model_.width(i) : widest_;
    reserve(options_.batch);
  }
  Inference(const Model& model, Options options) : Inference(model, Normalization{}, options) {}

  [[nodiscard]] const Model& model() const noexcept { return model_; }
  [[nodiscard]] int input_width() const noexcept { return model_.input_width(); }
  [[nodiscard]] int output_width() const noexcept { return model_.output_width(); }
  /// Rows one call runs without growing the workspace.
  [[nodiscard]] long capacity() const noexcept { return capacity_; }
  /// Bytes of workspace held.
  [[nodiscard]] std::size_t workspace_bytes() const noexcept { return 2 * a_.extent(0) * sizeof(float); }

  /// Grow the workspace to `rows` rows (an allocation; nothing when it holds as many). @throws config_error rows < 1
  void reserve(long rows) {
    if (rows < 1) throw config_error("reprosgd::Inference: the batch must be at least 1 row, got " + std::to_string(rows));
    if (rows <= capacity_) return;
    const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(widest_);
    a_ = Buffer<memory_space>();
    b_ = Buffer<memory_space>();
    a_ = Buffer<memory_space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Inference::a"), n);
    b_ = Buffer<memory_space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Inference::b"), n);
    capacity_ = rows;
  }

  /**
   * y = the model's outputs for the rows of x, on `space`.
   * @param x N x input_width(), @param y N x output_width() (written; must not overlap x)
   * @throws config_error on a wrong width or row count, before any kernel is launched
   * @deterministic the bits of training's forward pass for each row, for any N, batch, thread
   *         count and host backend. Not collective.
   */
  template <InferenceInput In, InferenceOutput Out>
  void predict(const ExecSpace& space, const In& x, const Out& y) {
    static_assert(Kokkos::SpaceAccessibility<ExecSpace, typename In::memory_space>::accessible,
                  "reprosgd::Inference::predict: the execution space cannot access the input View");
    static_assert(Kokkos::SpaceAccessibility<ExecSpace, typename Out::memory_space>::accessible,
                  "reprosgd::Inference::predict: the execution space cannot access the output View");
    check_shapes(x, y);
    const long n = static_cast<long>(x.extent(0));
    if (n == 0) return;
    if (n > capacity_ && options_.grow) reserve(n);
    for (long r0 = 0; r0 < n; r0 += capacity_) run(space, x, y, r0, n - r0 < capacity_ ? n - r0 : capacity_);
  }
  /// predict() on a default instance of ExecSpace.
  template <InferenceInput In, InferenceOutput Out>
  void predict(const In& x, const Out& y) {
    predict(ExecSpace(), x, y);
  }

  /// The shape checks of predict(), with its messages, for callers that check before a time loop.
  template <class In, class Out>
  void check_shapes(const In& x, const Out& y) const {
    const std::string who = "reprosgd::Inference::predict: ";
    if (static_cast<long>(x.extent(1)) != input_width())
      throw config_error(who + "the input has " + std::to_string(x.extent(1)) + " columns, the model expects " +
                         std::to_string(input_width()) + " inputs");
    if (static_cast<long>(y.extent(1)) != output_width())
      throw config_error(who + "the output has " + std::to_string(y.extent(1)) + " columns, the model gives " +
                         std::to_string(output_width()) + " outputs");
    if (x.extent(0) != y.extent(0))
      throw config_error(who + "the input has " + std::to_string(x.extent(0)) + " rows, the output " +
                         std::to_string(y.extent(0)));
  }

 private:
  using ConstRef = Kokkos::View<const float**, Kokkos::LayoutRight, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Ref = MatrixRef<memory_space>;

  static Normalization checked(const Model& model, const Normalization& n, const Options& o) {
    if (model.model_size() != 1)
      throw config_error("reprosgd::Inference: the model is a shard of a model group of " +
                         std::to_string(model.model_size()) +
                         " (infer with the whole model: save_model() gathers it, load_model() restores it)");
    if (o.batch < 1) throw config_error("reprosgd::Inference: Options::batch must be at least 1, got " + std::to_string(o.batch));
    n.check(model.input_width(), model.output_width(), "reprosgd::Inference");
    return n;
  }

  // Rows [r0, r0 + rows) of x into rows [r0, r0 + rows) of y. `cur` is where the activations are:
  // the caller's input (-1), buffer a (0) or b (1).
  template <class In, class Out>
  void run(const ExecSpace& space, const In& x, const Out& y, long r0, long rows) {
    const long in = input_width();
    ConstRef cur;
    int at = -1;
    constexpr bool direct_in = std::is_same_v<typename In::memory_space, memory_space>;
    constexpr bool direct_out = std::is_same_v<typename Out::memory_space, memory_space>;
    if constexpr (direct_in) {
      if (!norm_.inputs() && detail::is_dense_row_major(x)) cur = ConstRef(x.data() + r0 * in, rows, in);
    }
    if (cur.data() == nullptr) {
      normalize_input_rows(space, x, r0, norm_.in_mean, norm_.in_div, Ref(a_.data(), rows, in));
      cur = ConstRef(a_.data(), rows, in);
      at = 0;
    }
    LayerContext<ExecSpace, PhiloxStream> ctx{space, PhiloxStream(0), 0, 0, 0, false};
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (layer_forward<I>(ctx, cur, at, y, r0, rows, direct_out), ...);
    }(std::make_index_sequence<Model::depth>{});
    // The last layer wrote straight into y (at == -1) or into the workspace: then copy, inverting
    // the outputs' standardisation where there is one.
    if (at >= 0) denormalize_output_rows(space, cur, norm_.out_mean, norm_.out_div, y, r0);
  }

  template <class Out>
  float* y_row_pointer(const Out& y, long r0, bool direct_out) const {
    if (!direct_out || norm_.outputs() || !detail::is_dense_row_major(y)) return nullptr;
    return y.data() + r0 * output_width();
  }

  template <std::size_t I, class Ctx, class Out>
  void layer_forward(Ctx ctx, ConstRef& cur, int& at, const Out& y, long r0, long rows, bool direct_out) {
    using L = std::remove_cvref_t<decltype(model_.template layer<I>())>;
    // Dropout in evaluation is the identity: the activations stay where they are (training's
    // forward copies them; the bits are the same).
    if constexpr (std::is_base_of_v<Dropout, L>) {
      return;
    } else {
      const auto& layer = model_.template layer<I>();
      ctx.layer = static_cast<std::uint32_t>(I);
      const long w = model_.width(I + 1);
      const std::size_t off = model_.parameter_offset(I), end = model_.parameter_offset(I + 1);
      const BufferRef<typename Model::memory_space> params(model_.parameters().data() + off, end - off);
      float* target = nullptr;
      int next = at == 0 ? 1 : 0;
      if (I + 1 == Model::depth || last_computing<I + 1>()) target = y_row_pointer(y, r0, direct_out);
      if (target == nullptr) target = next == 0 ? a_.data() : b_.data();
      else next = -1;
      const Ref dst(target, rows, w);
      if constexpr (std::is_same_v<L, Dense>) {
        if (rows <= gemv_max_rows) {
          // A few rows: Dense's forward without packing its weights (gemv_bias: the same bits).
          const Kokkos::View<const float**, Kokkos::LayoutRight, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>
              weights(params.data(), layer.in, w);
          const Kokkos::View<const float*, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> bias(
              params.data() + static_cast<std::size_t>(layer.in) * static_cast<std::size_t>(w), w);
          gemv_bias(ctx.space, cur, weights, bias, dst);
          cur = ConstRef(target, rows, w);
          at = next;
          return;
        }
      }
      layer.forward(ctx, params, cur, dst);
      cur = ConstRef(target, rows, w);
      at = next;
    }
  }
  // Whether every layer from J on is a Dropout (so layer J-1 computes the model's output).
  template <std::size_t J>
  static constexpr bool last_computing() {
    if constexpr (J >= Model::depth) {
      return true;
    } else {
      using L = std::remove_cvref_t<decltype(std::declval<const Model&>().template layer<J>())>;
      return std::is_base_of_v<Dropout, L> && last_computing<J + 1>();
    }
  }

  Model model_;
  Options options_;
  detail::NormalizationViews<memory_space> norm_;
  int widest_ = 0;
  long capacity_ = 0;
  Buffer<memory_space> a_, b_;  // ping-pong activations, capacity_ x widest_ each
};

/**
 * The model's outputs for the rows of x, into y (Inference's contract). A convenience that builds
 * an Inference, so its workspace is allocated on every call: inside a time loop keep an Inference.
 * @throws config_error as Inference and Inference::predict @deterministic Not collective.
 */
template <class ExecSpace, InferenceModel Model, InferenceInput In, InferenceOutput Out>
  requires Kokkos::is_execution_space<ExecSpace>::value
void predict(const ExecSpace& space, const Model& model, const In& x, const Out& y,
             const Normalization& normalization = {}) {
  const long rows = x.extent(0) > 0 ? static_cast<long>(x.extent(0)) : 1;
  Inference<Model, ExecSpace> inference(model, normalization, {.batch = rows});
  inference.predict(space, x, y);
  space.fence();
}
/// predict() on a default instance of the default execution space.
template <InferenceModel Model, InferenceInput In, InferenceOutput Out>
void predict(const Model& model, const In& x, const Out& y, const Normalization& normalization = {}) {
  predict(Kokkos::DefaultExecutionSpace(), model, x, y, normalization);
}

/**
 * classes(i) = the index of the first largest output of row i (a strict `>` scan over columns
 * ascending): the predicted class, with the tie rule of the training accuracy
 * (softmax_cross_entropy's correct count), so predict()'s accuracy is training's. NaN outputs
 * never win. @deterministic @device
 */
template <class ExecSpace, InferenceInput Outputs, class Classes>
  requires Kokkos::is_execution_space<ExecSpace>::value
void predicted_classes(const ExecSpace& space, const Outputs& y, const Classes& classes) {
  if (classes.extent(0) != y.extent(0))
    throw config_error("reprosgd::predicted_classes: " + std::to_string(y.extent(0)) + " rows of outputs but " +
                       std::to_string(classes.extent(0)) + " classes");
  const long cols = static_cast<long>(y.extent(1));
  Kokkos::parallel_for(
      "reprosgd::predicted_classes", Kokkos::RangePolicy<ExecSpace>(space, 0, static_cast<long>(y.extent(0))),
      KOKKOS_LAMBDA(const long i) {
        int best = 0;
        for (long j = 1; j < cols; ++j)
          if (y(i, j) > y(i, best)) best = static_cast<int>(j);
        classes(i) = best;
      });
}

REPROSGD_END_NAMESPACE
