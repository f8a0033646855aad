// SPDX-License-Identifier: BSD-3-Clause
/// @file StepPipeline: the arithmetic of one training step and of an evaluation, with the buffers
/// they reuse: load a micro-batch, forward, loss, backward into the micro-batch's gradient row,
/// the exact reduction of the rows, and the step's metrics gathered in micro-batch order.
///
/// A step of global batch B: the samples at positions [s*B, (s+1)*B) of the epoch's keyed
/// permutation are cut into M = B/m micro-batches; this rank runs the micro-batches the policy
/// gives it (micro_batch_range), each into its own gradient row, and the Reduction sums the M rows
/// exactly. Nothing here depends on how many ranks run the other rows (docs/architecture.md).
/// No fault handling and no checkpoints: the Trainer composes those around it.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/concepts/reduction.hpp>
#include <reprosgd/concepts/rng_stream.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/data/keyed_permutation.hpp>
#include <reprosgd/detail/vector_alignment.hpp>
#include <reprosgd/kernels/loss.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/defer_weight_gradients.hpp>
#include <reprosgd/reduction/exact.hpp>
#include <reprosgd/trainer/deferred_weight_gradients.hpp>
#include <reprosgd/trainer/metrics.hpp>
#include <reprosgd/trainer/sharding.hpp>
#include <reprosgd/trainer/state.hpp>
#include <reprosgd/trainer/step_dump.hpp>
#include <reprosgd/trainer/trace.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// Loss and correct predictions summed over a step's or an evaluation's micro-batches.
struct BatchTotals {
  double loss = 0.0;
  double correct = 0.0;
};

/// The gather of load_micro_batch on `space`, which can read `x`/`y`/`t` and write
/// `to`/`to_labels`/`to_targets`: a sample's features, and its label (classification, y not empty)
/// or its targets (regression, t not empty).
template <class ExecSpace, class X, class Y, class T, class To, class ToLabels, class ToTargets>
void gather_rows(const ExecSpace& space, const To& to, const ToLabels& to_labels, const ToTargets& to_targets,
                 const X& x, const Y& y, const T& t, const std::optional<KeyedPermutation>& order, long first,
                 long rows) {
  const long f = static_cast<long>(x.extent(1));
  const long tw = static_cast<long>(t.extent(1));
  const bool labelled = y.extent(0) > 0;
  const bool shuffled = order.has_value();
  const KeyedPermutation perm = shuffled ? *order : KeyedPermutation(0, 0, 1);
  Kokkos::parallel_for(
      "reprosgd::Trainer::load_micro_batch", Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(const long r) {
        const long idx = shuffled ? static_cast<long>(perm(static_cast<std::uint64_t>(first + r))) : first + r;
        for (long j = 0; j < f; ++j) to(r, j) = x(idx, j);
        if (labelled) to_labels(r) = y(idx);
        for (long j = 0; j < tw; ++j) to_targets(r, j) = t(idx, j);
      });
}

/// Copy rows [first, first+rows) of the epoch order (`order`, or the data set's own order) into
/// the workspace's micro-batch `w.input` and `w.labels` or `w.targets`: one thread per row, so the permutation (a few Philox calls) is
/// evaluated once per sample. A free function: device lambdas may not live in private members.
/// When `space` cannot read the data set's memory (host data, device space), the rows are gathered
/// on the host into the workspace's host mirrors (`w.input_host`, ...) and copied over: the
/// data set is staged to the device micro-batch by micro-batch. A copy either way, so the bits
/// are the same.
template <class ExecSpace, class Data, class Ws>
void load_micro_batch(const ExecSpace& space, Ws& w, const Data& data, const std::optional<KeyedPermutation>& order,
                      long first, long rows) {
  using data_memory = typename decltype(data.features)::memory_space;
  if constexpr (Kokkos::SpaceAccessibility<ExecSpace, data_memory>::accessible) {
    gather_rows(space, w.input, w.labels, w.targets, data.features, data.labels, data.targets, order, first, rows);
  } else {
    static_assert(Kokkos::SpaceAccessibility<Kokkos::DefaultHostExecutionSpace, data_memory>::accessible,
                  "reprosgd::Trainer: the data set must be in host memory or in the training space's memory");
    space.fence();  // the previous micro-batch's copy out of the staging buffers has finished
    const Kokkos::DefaultHostExecutionSpace host;
    gather_rows(host, w.input_host, w.labels_host, w.targets_host, data.features, data.labels, data.targets, order,
                first, rows);
    host.fence();
    Kokkos::deep_copy(space, w.input, w.input_host);
    Kokkos::deep_copy(space, w.labels, w.labels_host);
    Kokkos::deep_copy(space, w.targets, w.targets_host);
  }
}

template <Parallelism Par, RngStream Rng>
class StepPipeline {
 public:
  using execution_space = typename Par::execution_space;
  using memory_space = typename execution_space::memory_space;
  using reduction_type = typename Par::reduction_type;

  /// Size the step's buffers for `model` (this rank's shard) and M micro-batches of m rows over
  /// the policy's current ranks; again after a shrink re-shards or re-maps. Local.
  template <class Model>
  void lay_out(Par& par, const Model& model, long M, long m) {
    // A shrink may have re-sharded: only a model-parallel policy shards (under any other the
    // Trainer has agreed that the model is whole).
    if constexpr (ShardedParallelism<Par>) train_.reset(), eval_.reset();
    mine_ = par.micro_batch_range(M);
    const long n_params = static_cast<long>(model.parameter_count());
    if (!fits<Model>(train_, m, n_params)) train_ = make_workspace(model, m), kept_input_gradients_.clear();
    if (static_cast<long>(grad_rows_.extent(0)) != mine_.size() || static_cast<long>(grad_rows_.extent(1)) != n_params) {
      grad_rows_ = Matrix<memory_space>();
      // Rows padded to 64 bytes, so that every row starts as row 0 does, at an aligned address:
      // the GEMMs write the large weight gradients with aligned non-temporal stores
      // (docs/gemm.md, "C written past the caches"); an unaligned row would be written with ordinary ones.
      const long stride = (n_params + grad_row_align - 1) / grad_row_align * grad_row_align;
      const Matrix<memory_space> padded(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::grads"), mine_.size(),
                                        stride);
      grad_rows_ = Kokkos::subview(padded, Kokkos::ALL(), Kokkos::make_pair(0L, n_params));
      grad_sum_ = Buffer<memory_space>("reprosgd::grad_sum", n_params);
    }
    if constexpr (ShardedParallelism<Par>) grad_blocks_ = Sharding<Par>::gradient_blocks(model);
    mb_loss_ = Kokkos::View<double*, Kokkos::HostSpace>("reprosgd::mb_loss", mine_.size());
    mb_correct_ = Kokkos::View<double*, Kokkos::HostSpace>("reprosgd::mb_correct", mine_.size());
    all_loss_ = Kokkos::View<double*, Kokkos::HostSpace>("reprosgd::all_loss", M);
    all_correct_ = Kokkos::View<double*, Kokkos::HostSpace>("reprosgd::all_correct", M);
  }

  /// Forward and backward of this rank's micro-batches of the step at `position` in epoch order
  /// (`order`: the epoch's permutation, or none), each into its gradient row, loss scaled by 1/B.
  /// `dump`, when it is at `step`, receives every micro-batch's tensors after its backward.
  template <class Model, class Data>
  void compute(Par& par, const Rng& rng, LossKind loss, const Model& model, const Data& train,
               const std::optional<KeyedPermutation>& order, std::uint64_t step, long position, long B, long m,
               StepDump* dump = nullptr) {
    const execution_space space = par.space();
    const bool dumping = dump && dump->at(step);
    auto& ws = model_workspace<Model>(*train_);
    const long n_params = static_cast<long>(grad_rows_.extent(1));
    const long stride = static_cast<long>(grad_rows_.stride(0));
    // Deferred weight gradients (trainer/deferred_weight_gradients.hpp): one rank holding every
    // row, the Exact sum, a host space, a model whose backward can defer; not for a dumped step,
    // whose files hold every micro-batch's whole gradient row.
    deferring_ = false;
    if constexpr (can_defer<Model>) deferring_ = defer_enabled_ && par.size() == 1 && mine_.size() >= 2 && !dumping;
    if (deferring_) deferred_.begin_step(mine_.size(), grad_rows_.data(), stride);
    for (long u = mine_.begin; u < mine_.end; ++u) {
      const long first = position * B + u * m;  // the micro-batch's row 0 in the epoch order
      load_micro_batch(space, size_targets(*train_, train), train, order, first, m);
      LayerContext<execution_space, Rng> ctx{space,
                                             rng,
                                             0,
                                             step,
                                             static_cast<std::uint64_t>(u * m),
                                             true,
                                             static_cast<float>(m) / static_cast<float>(B)};
      forward(par, model, ctx, ws, m);
      compute_loss(space, *train_, loss, train.is_regression(), m, 1.0f / static_cast<float>(B), true);
      BufferRef<memory_space> row(grad_rows_.data() + (u - mine_.begin) * stride, n_params);
      // The step's first micro-batch at trace level tensor, and every micro-batch of a dumped
      // step: backward keeps every layer's input gradient (buffers swapped in for those
      // micro-batches only, so the others copy nothing).
      const bool record = record_tensors_ && u == 0;
      if (record || dumping) {
        if (kept_input_gradients_.empty()) model.keep_input_gradients(ws);
        else std::swap(ws.input_gradients, kept_input_gradients_);
      }
      if constexpr (ShardedParallelism<Par>) {
        model.backward(ctx, ws, m, row, par.model_group());
      } else if constexpr (can_defer<Model>) {
        if (deferring_) {
          deferred_.begin_micro_batch(u - mine_.begin);
          model.backward(ctx, ws, m, row, DeferWeightGradients<Recorder>{Recorder{&deferred_, space}});
        } else {
          model.backward(ctx, ws, m, row);
        }
      } else {
        model.backward(ctx, ws, m, row);
      }
      if (record) tensors_ = tensor_fingerprints(ws, m);
      if (dumping) {
        space.fence();
        dump->micro_batch(model, ws, train_->labels, row, step * static_cast<std::uint64_t>(B / m) + static_cast<std::uint64_t>(u), m);
      }
      if (record || dumping) std::swap(ws.input_gradients, kept_input_gradients_);
      sum_rows(*train_, m, mb_loss_(u - mine_.begin), mb_correct_(u - mine_.begin));
    }
  }

  /// Compute the weight gradients of Dense layers after each step's micro-batches where that is
  /// possible (TrainerOptions::defer_weight_gradients; the same bits either way). On by default.
  void defer_weight_gradients(bool on) noexcept { defer_enabled_ = on; }

  /// Record the first micro-batch's activations in each step (trace level tensor); off by default.
  void record_tensors(bool on) {
    record_tensors_ = on;
    tensors_.clear();
  }
  /// The fingerprints of the last step's first micro-batch: on the rank that ran it, when recording.
  [[nodiscard]] const std::vector<TensorFingerprints>& first_micro_batch_tensors() const noexcept { return tensors_; }

  /// The exact sum of the step's M gradient rows into grad_sum(). A shard's rows are reduced over
  /// the blocks of the whole model's parameter vector, never over the shard's own buffer: which
  /// elements share a block exponent, and so every rounding, is then the one-process run's on
  /// every grid (docs/reproducibility.md, "Every reduction over the canonical layout"). @collective
  ReductionResult reduce(Par& par, long M) {
    if constexpr (defers_here) {
      if (deferring_) {
        deferring_ = false;
        const Exact::Presummed slots = reduction_.presummed(static_cast<long>(grad_sum_.extent(0)));
        deferred_.run(par.space(), grad_rows_, grad_sum_, slots);
        return reduction_.reduce_presummed(par, grad_rows_, M, grad_sum_);
      }
    }
    if constexpr (ShardedParallelism<Par> && requires {
                    reduction_.reduce(par, grad_rows_, M, grad_sum_, grad_blocks_, par.model_group().parallelism());
                  }) {
      return reduction_.reduce(par, grad_rows_, M, grad_sum_, grad_blocks_, par.model_group().parallelism());
    } else {
      static_assert(!ShardedParallelism<Par> || !reduction_type::rank_independent,
                    "reprosgd::Trainer: a rank-independent reduction under model parallelism must reduce a shard "
                    "over the whole model's blocks (reduce(par, rows, M, sum, CanonicalBlocks, group), as Exact does)");
      return reduction_.reduce(par, grad_rows_, M, grad_sum_);
    }
  }

  /// The step's loss and correct count over all M micro-batches, added in micro-batch order. @collective
  BatchTotals totals(Par& par, long M) {
    par.allgather_micro_batches(mb_loss_, all_loss_, M);
    par.allgather_micro_batches(mb_correct_, all_correct_, M);
    return add_in_order(all_loss_, all_correct_, M);
  }

  [[nodiscard]] const Buffer<memory_space>& grad_sum() const noexcept { return grad_sum_; }

  /**
   * Mean loss and accuracy (regression: RMSE and R^2) of `model` on `data` in evaluation
   * micro-batches of m rows spread over the ranks and combined in micro-batch order, so they do not
   * depend on the rank count. @collective
   */
  template <class Model, class Data>
  EvalMetrics evaluate(Par& par, const Rng& rng, LossKind loss, const Model& model, const Data& data, long m) {
    const execution_space space = par.space();
    const long n = static_cast<long>(data.size());
    const long M = (n + m - 1) / m;  // ranks beyond M own no evaluation micro-batch
    if (!fits<Model>(eval_, m, static_cast<long>(model.parameter_count()))) eval_ = make_workspace(model, m);
    const MicroBatchRange mine = par.micro_batch_range(M);
    Kokkos::View<double*, Kokkos::HostSpace> l("reprosgd::eval_loss", mine.size()), c("reprosgd::eval_correct", mine.size());
    Kokkos::View<double*, Kokkos::HostSpace> all_l("reprosgd::eval_all_loss", M), all_c("reprosgd::eval_all_correct", M);
    auto& ws = model_workspace<Model>(*eval_);
    for (long u = mine.begin; u < mine.end; ++u) {
      const long rows = (u + 1) * m <= n ? m : n - u * m;
      load_micro_batch(space, size_targets(*eval_, data), data, std::nullopt, u * m, rows);
      LayerContext<execution_space, Rng> ctx{space, rng, 0, 0, static_cast<std::uint64_t>(u * m), false};
      forward(par, model, ctx, ws, rows);
      compute_loss(space, *eval_, loss, data.is_regression(), rows, 0.0f, false);
      sum_rows(*eval_, rows, l(u - mine.begin), c(u - mine.begin));
    }
    par.allgather_micro_batches(l, all_l, M);
    par.allgather_micro_batches(c, all_c, M);
    const BatchTotals t = add_in_order(all_l, all_c, M);
    EvalMetrics em;
    em.count = static_cast<std::uint64_t>(n);
    em.correct = static_cast<std::uint64_t>(t.correct);
    em.loss = t.loss / static_cast<double>(n);
    em.accuracy = t.correct / static_cast<double>(n);
    if (data.is_regression()) {
      // The loss is the mean over samples of each row's mean squared error: the MSE over all
      // n x T values. R^2 pools the T targets: 1 - SSE / SST (scikit-learn's variance_weighted).
      em.regression = true;
      em.rmse = std::sqrt(em.loss);
      const double sst = total_sum_of_squares(data.targets);
      em.r2 = 1.0 - em.loss * static_cast<double>(n) * data.target_count() / sst;
    }
    return em;
  }

 private:
  // Type-erased holder of the model's workspace, so the pipeline is not templated on the model.
  struct WorkspaceBase {
    virtual ~WorkspaceBase() = default;
    Matrix<memory_space> input;
    Kokkos::View<std::int32_t*, memory_space> labels;
    Kokkos::View<float*, memory_space> row_loss;
    Kokkos::View<std::int32_t*, memory_space> row_correct;
    Matrix<memory_space> output, grad_out;
    Matrix<memory_space> targets;  // regression: rows x T (sized by size_targets), else rows x 0
    // Host mirrors of input and labels: the staging buffers of a device space (the same Views
    // on a host space, where create_mirror_view allocates nothing).
    typename Matrix<memory_space>::HostMirror input_host;
    typename Kokkos::View<std::int32_t*, memory_space>::HostMirror labels_host;
    typename Matrix<memory_space>::HostMirror targets_host;
    long rows = 0;
    long params = 0;
  };
  template <class Model>
  struct ModelWorkspace final : WorkspaceBase {
    typename Model::Workspace model;
  };

  template <class Model>
  static bool fits(const std::unique_ptr<WorkspaceBase>& w, long rows, long params) {
    return w && w->rows == rows && w->params == params && dynamic_cast<ModelWorkspace<Model>*>(w.get());
  }
  template <class Model>
  static std::unique_ptr<WorkspaceBase> make_workspace(const Model& model, long rows) {
    auto w = std::make_unique<ModelWorkspace<Model>>();
    w->model = model.make_workspace(rows);
    w->input = w->model.act.front();
    w->output = w->model.act.back();
    w->grad_out = w->model.grad_out;
    w->labels = Kokkos::View<std::int32_t*, memory_space>("reprosgd::labels", rows);
    w->row_loss = Kokkos::View<float*, memory_space>("reprosgd::row_loss", rows);
    w->row_correct = Kokkos::View<std::int32_t*, memory_space>("reprosgd::row_correct", rows);
    w->input_host = Kokkos::create_mirror_view(w->input);
    w->labels_host = Kokkos::create_mirror_view(w->labels);
    w->targets = Matrix<memory_space>("reprosgd::targets", rows, 0);
    w->targets_host = Kokkos::create_mirror_view(w->targets);
    w->rows = rows;
    w->params = static_cast<long>(model.parameter_count());
    return w;
  }
  template <class Model>
  static typename Model::Workspace& model_workspace(WorkspaceBase& w) {
    return static_cast<ModelWorkspace<Model>&>(w).model;
  }

  template <class Model, class Ctx, class Ws>
  static void forward(Par& par, const Model& model, const Ctx& ctx, Ws& ws, long rows) {
    if constexpr (ShardedParallelism<Par>)
      model.forward(ctx, ws, rows, par.model_group());
    else
      model.forward(ctx, ws, rows);
  }

  // The workspace's target rows sized for `data`'s T (0 for classification data): the first
  // micro-batch of a regression allocates them, once per workspace.
  template <class Data>
  static WorkspaceBase& size_targets(WorkspaceBase& w, const Data& data) {
    if (static_cast<int>(w.targets.extent(1)) != data.target_count()) {
      w.targets = Matrix<memory_space>("reprosgd::targets", w.rows, data.target_count());
      w.targets_host = Kokkos::create_mirror_view(w.targets);
    }
    return w;
  }

  // sum_ij (t_ij - mean_j)^2 over a data set's targets, in double, rows in order: R^2's denominator.
  template <class Targets>
  static double total_sum_of_squares(const Targets& targets) {
    const auto t = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), targets);
    const std::size_t n = t.extent(0), w = t.extent(1);
    std::vector<double> mean(w, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < w; ++j) mean[j] += static_cast<double>(t(i, j));
    for (std::size_t j = 0; j < w; ++j) mean[j] /= static_cast<double>(n);
    double sst = 0.0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < w; ++j) {
        const double d = static_cast<double>(t(i, j)) - mean[j];
        sst += d * d;
      }
    return sst;
  }

  static void compute_loss(const execution_space& space, WorkspaceBase& w, LossKind loss, bool regression, long rows,
                           float scale, bool want_grad) {
    const MatrixRef<memory_space> out(w.output.data(), rows, w.output.extent(1));
    const MatrixRef<memory_space> grad(w.grad_out.data(), want_grad ? rows : 0, w.grad_out.extent(1));
    if (regression)  // check_data_for: only with LossKind::mse, T = the model's outputs
      mse(space, out, w.targets, rows, scale, grad, w.row_loss, w.row_correct);
    else if (loss == LossKind::softmax_cross_entropy)
      softmax_cross_entropy(space, out, w.labels, rows, scale, grad, w.row_loss, w.row_correct);
    else
      mse_one_hot(space, out, w.labels, rows, scale, grad, w.row_loss, w.row_correct);
  }

  // Loss and correct count of a micro-batch, summed on the host in row order.
  void sum_rows(WorkspaceBase& w, long rows, double& loss, double& correct) {
    if (static_cast<long>(host_loss_.extent(0)) < w.rows) {
      host_loss_ = Kokkos::View<float*, Kokkos::HostSpace>("reprosgd::host_loss", w.rows);
      host_correct_ = Kokkos::View<std::int32_t*, Kokkos::HostSpace>("reprosgd::host_correct", w.rows);
    }
    Kokkos::deep_copy(Kokkos::subview(host_loss_, Kokkos::make_pair(0L, w.rows)), w.row_loss);
    Kokkos::deep_copy(Kokkos::subview(host_correct_, Kokkos::make_pair(0L, w.rows)), w.row_correct);
    double l = 0.0, c = 0.0;
    for (long i = 0; i < rows; ++i) {
      l += static_cast<double>(host_loss_(i));
      c += host_correct_(i);
    }
    loss = l;
    correct = c;
  }

  static BatchTotals add_in_order(const Kokkos::View<double*, Kokkos::HostSpace>& loss,
                                  const Kokkos::View<double*, Kokkos::HostSpace>& correct, long M) {
    BatchTotals t;
    for (long u = 0; u < M; ++u) {
      t.loss += loss(u);
      t.correct += correct(u);
    }
    return t;
  }

  /// DeferWeightGradients' callable: keeps a Dense layer's x and gy for the step's end.
  struct Recorder {
    DeferredWeightGradients<execution_space>* deferred;
    execution_space space;
    template <class X, class GY, class GW>
    void operator()(const X& x, const GY& gy, const GW& gw) const {
      deferred->record(space, x, gy, gw);
    }
  };
  /// Whether this pipeline's policy, reduction and space allow deferred weight gradients, and
  /// whether Model's backward can defer them too (see compute()).
  static constexpr bool defers_here = !ShardedParallelism<Par> && std::is_same_v<reduction_type, Exact> &&
                                      DeferredWeightGradients<execution_space>::available;
  template <class Model>
  static constexpr bool can_defer =
      defers_here &&
      requires(const Model& model, const LayerContext<execution_space, Rng>& ctx, typename Model::Workspace& ws,
               const BufferRef<memory_space>& row, const DeferWeightGradients<Recorder>& defer) {
        model.backward(ctx, ws, 1L, row, defer);
      };

  reduction_type reduction_{};
  DeferredWeightGradients<execution_space> deferred_;
  bool defer_enabled_ = true;
  bool deferring_ = false;  // this step's weight gradients are deferred (compute() to reduce())
  MicroBatchRange mine_{};
  std::unique_ptr<WorkspaceBase> train_, eval_;
  static constexpr long grad_row_align = detail::vector_alignment / sizeof(float);  // floats
  Matrix<memory_space> grad_rows_;  // one row per micro-batch this rank owns; rows grad_row_align-padded
  Buffer<memory_space> grad_sum_;   // the reduced gradient
  CanonicalBlocks<memory_space> grad_blocks_;  // sharded models: the reduction's blocks over this shard
  Kokkos::View<double*, Kokkos::HostSpace> mb_loss_, mb_correct_, all_loss_, all_correct_;
  Kokkos::View<float*, Kokkos::HostSpace> host_loss_;
  Kokkos::View<std::int32_t*, Kokkos::HostSpace> host_correct_;
  bool record_tensors_ = false;
  std::vector<Matrix<memory_space>> kept_input_gradients_;  // swapped into the workspace for micro-batch 0
  std::vector<TensorFingerprints> tensors_;
};

}  // namespace detail
REPROSGD_END_NAMESPACE
