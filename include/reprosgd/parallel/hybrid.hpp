// SPDX-License-Identifier: BSD-3-Clause
/// @file Hybrid and ModelParallel: a P_data x P_model grid — data-parallel replicas, each a model
/// group splitting every Dense layer's output features.
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_MPI
#error "reprosgd/parallel/hybrid.hpp needs MPI: build with REPROSGD_ENABLE_MPI=ON and link ReproSGD::reprosgd."
#endif

#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/process_grid.hpp>
#include <reprosgd/reduction/exact.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <climits>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/**
 * The ranks of one model replica over MPI (a ModelGroup): activation gathers with
 * MPI_Allgatherv, the input-gradient chunk sums with the Exact reduction, and broadcasts, on a
 * duplicate of the replica's communicator with MPI_ERRORS_RETURN (failures throw comm_error).
 *
 * MPI receives host buffers: on a device backend the activations would need staging (or a
 * CUDA-aware MPI); this policy is for host memory, which the static_assert states. So its
 * default execution space (and Hybrid's, ModelParallel's and UlfmHybrid's) is the default *host*
 * space: the same as the default space in a host build, and usable in a CUDA build.
 *
 * @tparam Comm the communicator wrapper whose error semantics apply (DataParallel: comm_error;
 *         UlfmDataParallel: a dead peer revokes and throws process_failure).
 */
template <class ExecSpace = Kokkos::DefaultHostExecutionSpace, class Comm = DataParallel<ExecSpace, Exact>>
class MpiModelGroup {
  static_assert(Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible,
                "reprosgd::MpiModelGroup: model parallelism exchanges activations through host memory");

 public:
  MpiModelGroup(MPI_Comm model_comm, const ExecSpace& space) : comm_(model_comm, space) {}

  [[nodiscard]] int model_rank() const noexcept { return comm_.rank(); }
  [[nodiscard]] int model_size() const noexcept { return comm_.size(); }
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_.comm(); }
  [[nodiscard]] const ExecSpace& space() const noexcept { return comm_.space(); }
  /// The group as a Parallelism (for the Exact chunk sums and the checkpoint gathers).
  [[nodiscard]] Comm& parallelism() noexcept { return comm_; }

  /// Every rank's columns of a layer output into the whole output (rows x features). @collective
  template <class Full>
  void gather_features(const float* local, long rows, std::span<const FeatureRange> ranges, const Full& full) {
    const int p = model_size();
    if (static_cast<int>(ranges.size()) != p)
      throw config_error("reprosgd::MpiModelGroup::gather_features: " + std::to_string(ranges.size()) +
                         " feature ranges for " + std::to_string(p) + " ranks");
    std::vector<int> counts(static_cast<std::size_t>(p)), displs(static_cast<std::size_t>(p));
    long total = 0;
    for (int q = 0; q < p; ++q) {
      const long c = rows * ranges[static_cast<std::size_t>(q)].size();
      if (total + c > INT_MAX) throw config_error("reprosgd::MpiModelGroup::gather_features: more than 2^31 floats");
      counts[static_cast<std::size_t>(q)] = static_cast<int>(c);
      displs[static_cast<std::size_t>(q)] = static_cast<int>(total);
      total += c;
    }
    if (static_cast<long>(staging_.extent(0)) < total)
      staging_ = Kokkos::View<float*, typename ExecSpace::memory_space>(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::MpiModelGroup::staging"), total);
    const int me = model_rank();
    comm_.check(MPI_Allgatherv(local, counts[static_cast<std::size_t>(me)], MPI_FLOAT, staging_.data(), counts.data(),
                               displs.data(), MPI_FLOAT, comm()),
                "reprosgd::MpiModelGroup::gather_features", "MPI_Allgatherv");
    // Rank q's block is rows x width_q, row-major: put its columns in place, all ranks' in one
    // kernel, one work item per (row, rank). The placement of rank q is (first feature, width,
    // offset in the staging buffer): memory the host can write (the static_assert above).
    if (static_cast<long>(placement_.extent(0)) < 3L * p)
      placement_ = Kokkos::View<long*, typename ExecSpace::memory_space>("reprosgd::MpiModelGroup::placement", 3L * p);
    for (int q = 0; q < p; ++q) {
      placement_(3 * q) = ranges[static_cast<std::size_t>(q)].begin;
      placement_(3 * q + 1) = ranges[static_cast<std::size_t>(q)].size();
      placement_(3 * q + 2) = displs[static_cast<std::size_t>(q)];
    }
    const auto staging = staging_;
    const auto placement = placement_;
    const long ranks = p;
    Kokkos::parallel_for(
        "reprosgd::MpiModelGroup::place_features", Kokkos::RangePolicy<ExecSpace>(space(), 0, rows * ranks),
        KOKKOS_LAMBDA(const long i) {
          const long r = i / ranks, q = i % ranks;
          const long f0 = placement(3 * q), w = placement(3 * q + 1), at = placement(3 * q + 2);
          for (long j = 0; j < w; ++j) full(r, f0 + j) = staging(at + r * w + j);
        });
    space().fence();
  }

  /// The Exact sum of the group's chunk partials (this rank's rows). @collective
  template <class Partials, class Sum>
  void sum_input_gradient(const Partials& partials, int chunks, const Sum& sum) {
    sum_input_gradient(comm_, partials, chunks, sum);
  }
  /// The same sum with its exchange carried by `via`, a group over this one's ranks that forwards
  /// to parallelism() (FailureInjection's, which can stop the process inside it). Every rank
  /// calls it, those owning no chunk with zero rows. A NaN or Inf partial (or an overflowing sum)
  /// makes the sum NaN, so the step's gradient check reports it. @collective
  template <class Via, class Partials, class Sum>
  void sum_input_gradient(Via& via, const Partials& partials, int chunks, const Sum& sum) {
    if (!exact_.reduce(via, partials, chunks, sum).finite)
      Kokkos::deep_copy(via.space(), sum, std::numeric_limits<float>::quiet_NaN());
  }

  /// Every rank's `counts[rank]` floats at `local`, concatenated in rank order into `all` on model
  /// rank 0 (`all` is ignored elsewhere). @collective
  void gather_to_root(const float* local, std::span<const long> counts, float* all) {
    const int p = model_size();
    std::vector<int> c(static_cast<std::size_t>(p)), d(static_cast<std::size_t>(p));
    long total = 0;
    for (int q = 0; q < p; ++q) {
      if (total + counts[static_cast<std::size_t>(q)] > INT_MAX)
        throw config_error("reprosgd::MpiModelGroup::gather_to_root: more than 2^31 floats");
      c[static_cast<std::size_t>(q)] = static_cast<int>(counts[static_cast<std::size_t>(q)]);
      d[static_cast<std::size_t>(q)] = static_cast<int>(total);
      total += counts[static_cast<std::size_t>(q)];
    }
    comm_.check(MPI_Gatherv(local, c[static_cast<std::size_t>(model_rank())], MPI_FLOAT, all, c.data(), d.data(),
                            MPI_FLOAT, 0, comm()),
                "reprosgd::MpiModelGroup::gather_to_root", "MPI_Gatherv");
  }

  /// `n` floats from model rank `root` to every rank. @collective
  void share(float* data, long n, int root) {
    if (n > INT_MAX) throw config_error("reprosgd::MpiModelGroup::share: more than 2^31 floats");
    comm_.check(MPI_Bcast(data, static_cast<int>(n), MPI_FLOAT, root, comm()), "reprosgd::MpiModelGroup::share",
                "MPI_Bcast");
  }

 private:
  Comm comm_;
  Exact exact_{};
  Kokkos::View<float*, typename ExecSpace::memory_space> staging_;
  Kokkos::View<long*, typename ExecSpace::memory_space> placement_;  // gather_features: per rank (f0, width, offset)
};

static_assert(ModelGroup<MpiModelGroup<>>);

/**
 * Hybrid parallelism on a P_data x P_model ProcessGrid: P_data data-parallel replicas, each a
 * model group of P_model ranks that split every Dense layer's output features (whole feature
 * chunks, Dense::features_of) and hold only their shard of parameters and optimizer state.
 *
 * As a Parallelism it is the data dimension: rank()/size()/micro_batch_range() and the integer
 * all-reduces (the gradient reduction of this rank's shard) run on data_comm — the ranks at the
 * same model position in every replica. agree() and barrier() span the whole grid (a stop or an
 * error anywhere stops everyone). model_group() connects the replica's ranks.
 *
 * The determinism contract holds for every grid: forward outputs and weight gradients are owned
 * (serial bits), the input gradient is an Exact sum over feature chunks, the gradient reduction
 * across replicas is the Exact one — so the trained model has the one-process bits
 * (docs/parallelism.md).
 *
 * **Example**:
 * @code
 * reprosgd::Hybrid<> par(reprosgd::GridShape::parse("2x2"));    // 4 ranks: 2 replicas of 2
 * reprosgd::Trainer<reprosgd::Hybrid<>> trainer(options, std::move(par));
 * auto state = trainer.start(model, adam);                      // shards the model
 * @endcode
 *
 * @tparam CommT the communicator wrapper of all three dimensions (DataParallel here;
 *         UlfmHybrid uses UlfmDataParallel).
 */
template <class ExecSpace, class Red, template <class, class> class CommT>
class BasicHybrid : public CommT<ExecSpace, Red> {
  using base = CommT<ExecSpace, Red>;

 public:
  using model_group_type = MpiModelGroup<ExecSpace, CommT<ExecSpace, Exact>>;

  /**
   * @param shape P_data x P_model; must multiply to the communicator's size (checked and agreed
   *        on every rank before anything is split)
   * @throws config_error on every rank for a grid that does not fit; comm_error
   * @collective over `comm`
   */
  explicit BasicHybrid(GridShape shape, MPI_Comm comm = MPI_COMM_WORLD, const ExecSpace& space = ExecSpace())
      : BasicHybrid(ProcessGrid(comm, shape), comm, space) {}

  static constexpr const char* name() noexcept { return "hybrid"; }

  [[nodiscard]] const GridShape& grid() const noexcept { return shape_; }
  [[nodiscard]] int world_rank() const noexcept { return world_.rank(); }
  [[nodiscard]] int world_size() const noexcept { return world_.size(); }
  /// The whole grid as a Parallelism (configuration checks, checkpoint verdicts).
  [[nodiscard]] base& world() noexcept { return world_; }
  [[nodiscard]] model_group_type& model_group() noexcept { return *model_; }
  [[nodiscard]] const model_group_type& model_group() const noexcept { return *model_; }

  /// Logical AND over the whole grid. @collective
  [[nodiscard]] bool agree(bool flag) const { return world_.agree(flag); }
  void barrier() const { world_.barrier(); }

 protected:
  /// Split world() again as `shape` (after the world communicator changed). @collective over world()
  void regrid(GridShape shape) {
    ProcessGrid grid(world_.comm(), shape);
    static_cast<base&>(*this) = base(grid.data_comm(), this->space());
    model_ = std::make_unique<model_group_type>(grid.model_comm(), this->space());
    shape_ = grid.shape();
  }
  [[nodiscard]] const base& world_policy() const noexcept { return world_; }

 private:
  BasicHybrid(ProcessGrid grid, MPI_Comm comm, const ExecSpace& space)
      : base(grid.data_comm(), space),
        world_(comm, space),
        model_(std::make_unique<model_group_type>(grid.model_comm(), space)),
        shape_(grid.shape()) {}

  base world_;
  std::unique_ptr<model_group_type> model_;  // stable address across moves
  GridShape shape_;
};

/// Hybrid parallelism with MPI errors as comm_error (see BasicHybrid).
template <class ExecSpace = Kokkos::DefaultHostExecutionSpace, class Red = Exact>
class Hybrid : public BasicHybrid<ExecSpace, Red, DataParallel> {
 public:
  using BasicHybrid<ExecSpace, Red, DataParallel>::BasicHybrid;
};

/**
 * Model parallelism: one replica of all P ranks (the 1 x P grid of Hybrid). Every Dense layer's
 * output features are split across the ranks; parameters and optimizer state are sharded.
 */
template <class ExecSpace = Kokkos::DefaultHostExecutionSpace, class Red = Exact>
class ModelParallel : public Hybrid<ExecSpace, Red> {
 public:
  explicit ModelParallel(MPI_Comm comm = MPI_COMM_WORLD, const ExecSpace& space = ExecSpace())
      : Hybrid<ExecSpace, Red>(GridShape{1, comm_size(comm)}, comm, space) {}
  static constexpr const char* name() noexcept { return "model_parallel"; }

 private:
  static int comm_size(MPI_Comm comm) {
    int size = 0;
    detail::mpi_check(MPI_Comm_size(comm, &size), "reprosgd::ModelParallel: MPI_Comm_size");
    return size;
  }
};

static_assert(Parallelism<Hybrid<>>);
static_assert(ShardedParallelism<Hybrid<>>);
static_assert(ShardedParallelism<ModelParallel<>>);

REPROSGD_END_NAMESPACE
