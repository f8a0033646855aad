// SPDX-License-Identifier: BSD-3-Clause
/// @file ProcessGrid: P ranks as a P_data x P_model grid of communicators, validated before use.
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_MPI
#error "reprosgd/parallel/process_grid.hpp needs MPI: build with REPROSGD_ENABLE_MPI=ON and link ReproSGD::reprosgd (it defines REPROSGD_HAS_MPI=1)."
#endif

#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/error.hpp>

#include <mpi.h>

#include <charconv>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

REPROSGD_BEGIN_NAMESPACE

/**
 * The shape of a process grid: `data` data-parallel groups of `model` ranks each (the model-parallel
 * replicas). 4x1 is pure data parallelism, 1x4 pure model parallelism, 2x2 hybrid.
 */
struct GridShape {
  int data = 1;   ///< P_data: replicas of the model (the gradient reduction runs across them)
  int model = 1;  ///< P_model: ranks sharing one replica's layers

  friend bool operator==(const GridShape&, const GridShape&) = default;

  [[nodiscard]] int ranks() const noexcept { return data * model; }
  /// "2x2".
  [[nodiscard]] std::string text() const { return std::to_string(data) + "x" + std::to_string(model); }

  /**
   * Parse "PDxPM" (e.g. "2x2", "1x4"): two positive decimal integers and an 'x', nothing else.
   * @throws config_error "reprosgd::GridShape::parse: "<text>" is not a grid (expected PDxPM with
   *         positive integers, e.g. 2x2)"
   */
  static GridShape parse(std::string_view text) {
    const auto fail = [&] {
      return config_error("reprosgd::GridShape::parse: \"" + std::string(text) +
                          "\" is not a grid (expected PDxPM with positive integers, e.g. 2x2)");
    };
    const std::size_t x = text.find('x');
    if (x == std::string_view::npos) throw fail();
    GridShape g;
    if (!parse_positive(text.substr(0, x), g.data) || !parse_positive(text.substr(x + 1), g.model)) throw fail();
    return g;
  }

  /// The default for P ranks: pure data parallelism (P x 1), the fastest choice whenever one
  /// replica of the model and its optimizer state fits in one rank's memory.
  static constexpr GridShape default_for(int ranks) noexcept { return {ranks, 1}; }
  /// The most square grid of `ranks` with P_data >= P_model (2 -> 2x1, 4 -> 2x2, 6 -> 3x2, 8 -> 4x2).
  static constexpr GridShape balanced(int ranks) noexcept {
    int model = 1;
    for (int m = 1; m * m <= ranks; ++m)
      if (ranks % m == 0) model = m;
    return {ranks / model, model};
  }

  /// "" when the shape fits `ranks` ranks, else the reason, naming the shapes that would.
  [[nodiscard]] std::string check(int ranks) const {
    if (data < 1 || model < 1)
      return "reprosgd::ProcessGrid: grid " + text() + " needs positive sizes";
    if (static_cast<long>(data) * model == ranks) return {};
    std::string fits;
    for (int m = 1; m <= ranks; ++m)
      if (ranks % m == 0) fits += (fits.empty() ? "" : ", ") + GridShape{ranks / m, m}.text();
    return "reprosgd::ProcessGrid: grid " + text() + " has " + std::to_string(static_cast<long>(data) * model) +
           " ranks but the communicator has " + std::to_string(ranks) + " (grids that fit: " + fits + ")";
  }

 private:
  static bool parse_positive(std::string_view s, int& v) {
    if (s.empty() || s.front() < '0' || s.front() > '9') return false;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size() && v >= 1;
  }
};

/**
 * P ranks arranged as a P_data x P_model grid: rank r of the parent communicator sits in data
 * group d = r / P_model at model position q = r % P_model. `model_comm()` joins the P_model ranks
 * of one replica (same d, ordered by q): the model-parallel collectives (activation gathers,
 * input-gradient sums) run on it. `data_comm()` joins the P_data ranks at the same model position
 * (same q, ordered by d): the exact gradient reduction of that position's shard runs on it.
 *
 * The shape is checked on every rank and the verdict agreed before any communicator is split, so
 * a wrong grid (or ranks that were given different grids) throws the same config_error on every
 * rank instead of hanging. Both communicators get MPI_ERRORS_RETURN.
 *
 * Move-only; owns both communicators (freed by the destructor). Create it after MPI_Init.
 * @collective over `comm` (constructor)
 *
 * **Example**:
 * @code
 * reprosgd::ProcessGrid grid(MPI_COMM_WORLD, reprosgd::GridShape::parse("2x2"));
 * // grid.model_rank(), grid.model_size(), grid.model_comm(); grid.data_rank(), ...
 * @endcode
 */
class ProcessGrid {
 public:
  /**
   * @throws config_error on every rank if the shape does not fit the communicator's size or the
   *         ranks passed different shapes; comm_error if an MPI call fails
   */
  ProcessGrid(MPI_Comm comm, GridShape shape) : shape_(shape) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized || detail::mpi_finalized())
      throw config_error("reprosgd::ProcessGrid: MPI is not initialised (create a reprosgd::MpiEnvironment first)");
    const detail::ErrorsReturnScope returning(comm);  // a rank lost meanwhile: a comm_error, not an abort
    int size = 0;
    detail::mpi_check(MPI_Comm_rank(comm, &rank_), "reprosgd::ProcessGrid: MPI_Comm_rank");
    detail::mpi_check(MPI_Comm_size(comm, &size), "reprosgd::ProcessGrid: MPI_Comm_size");
    const std::string problem = shape.check(size);
    // Agree on the verdict and on the shape itself (its negation too, so MAX compares both ways).
    int local[3] = {problem.empty() ? 0 : 1, shape.data * 65536 + shape.model, -(shape.data * 65536 + shape.model)};
    int global[3] = {0, 0, 0};
    detail::mpi_check(MPI_Allreduce(local, global, 3, MPI_INT, MPI_MAX, comm), "reprosgd::ProcessGrid: MPI_Allreduce");
    if (!problem.empty()) throw config_error(problem);
    if (global[0] != 0) throw config_error("reprosgd::ProcessGrid: grid " + shape.text() + " was refused on another rank");
    if (global[1] != -global[2])
      throw config_error("reprosgd::ProcessGrid: the ranks were given different grids (this rank: " + shape.text() + ")");
    const int d = rank_ / shape.model, q = rank_ % shape.model;
    MPI_Comm model = MPI_COMM_NULL, data = MPI_COMM_NULL;
    detail::mpi_check(MPI_Comm_split(comm, d, q, &model), "reprosgd::ProcessGrid: MPI_Comm_split (model)");
    model_ = detail::CommHandle(model);
    detail::mpi_check(MPI_Comm_split(comm, q, d, &data), "reprosgd::ProcessGrid: MPI_Comm_split (data)");
    data_ = detail::CommHandle(data);
    detail::mpi_check(MPI_Comm_set_errhandler(model, MPI_ERRORS_RETURN), "reprosgd::ProcessGrid: MPI_Comm_set_errhandler");
    detail::mpi_check(MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN), "reprosgd::ProcessGrid: MPI_Comm_set_errhandler");
  }

  [[nodiscard]] const GridShape& shape() const noexcept { return shape_; }
  /// This rank in the parent communicator.
  [[nodiscard]] int rank() const noexcept { return rank_; }
  /// d: which replica (data group) this rank belongs to, 0 .. P_data-1.
  [[nodiscard]] int data_rank() const noexcept { return rank_ / shape_.model; }
  /// q: this rank's position within its replica, 0 .. P_model-1.
  [[nodiscard]] int model_rank() const noexcept { return rank_ % shape_.model; }
  [[nodiscard]] int data_size() const noexcept { return shape_.data; }
  [[nodiscard]] int model_size() const noexcept { return shape_.model; }
  /// The P_model ranks of this replica, ordered by model_rank().
  [[nodiscard]] MPI_Comm model_comm() const noexcept { return model_.get(); }
  /// The P_data ranks at this model position, ordered by data_rank().
  [[nodiscard]] MPI_Comm data_comm() const noexcept { return data_.get(); }

 private:
  GridShape shape_;
  int rank_ = 0;
  detail::CommHandle model_, data_;
};

REPROSGD_END_NAMESPACE
