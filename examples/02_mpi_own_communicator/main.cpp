// SPDX-License-Identifier: BSD-3-Clause
/// @file An MPI simulation that hands ReproSGD its own communicator, trains a surrogate from every
/// rank's subdomain in-situ, checkpoints, restarts (on another rank count if it likes) and gets the
/// same model as a run that never stopped.
///
/// The simulation: u_t = D Δu + R(u, v) on a periodic 40 x 32 grid, explicit Euler, the rows split
/// into one slab per rank (halo rows exchanged with MPI_Sendrecv). R, the expensive term, is
/// computed where the cells live. The program owns MPI (MPI_Init_thread / MPI_Finalize) and splits
/// MPI_COMM_WORLD into the communicator its physics uses — here every rank, numbered in reverse,
/// which shows that ReproSGD uses neither MPI_COMM_WORLD nor the rank numbers.
///
///  1. Time steps 0 .. 29: each rank computes R on its cells; append_from_every_rank() gathers the
///     step's samples (logical id = time step x cells + global cell) into the stream every rank
///     holds; the trainer (DataParallel over the same communicator) runs 8 steps on it.
///  2. The surrogate's error on fresh samples (time step 30's, never trained on): Trainer::evaluate.
///  3. Time steps 30 .. 41: R from the surrogate (Inference::predict on each rank's own cells).
///
/// `--checkpoint FILE --stop-after T` writes a checkpoint after time step T (model, optimizer,
/// stream and the simulation's field) and exits; `--restart FILE` continues from it. The test runs
/// 2 ranks, 3 ranks, and 2 ranks stopped then restarted on 3: the same `fingerprint` line each time.
#include <reprosgd/reprosgd.hpp>
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/data/gather_samples.hpp>

#include <cereal/types/vector.hpp>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

constexpr int rows = 40, cols = 32;
constexpr std::uint64_t cells = rows * cols;
constexpr int train_until = 30, time_steps = 42;
constexpr float dt = 0.05f, diffusion = 0.2f;

using Space = Kokkos::DefaultHostExecutionSpace;
using Memory = Space::memory_space;
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Memory>;

// The expensive pointwise term (reprosgd::math: the same bits with every compiler and backend).
KOKKOS_INLINE_FUNCTION float reaction(float u, float v) {
  float r = 0.0f;
  for (int k = 1; k <= 48; ++k)
    r += reprosgd::math::cospi(static_cast<float>(k) * u * v) * reprosgd::math::exp(-0.05f * static_cast<float>(k) * u) /
         static_cast<float>(k * k);
  return 0.5f * r - u * v;
}
KOKKOS_INLINE_FUNCTION float initial_u(int g, int j) {
  return 0.5f + 0.5f * reprosgd::math::sinpi(0.4f * static_cast<float>(g)) * reprosgd::math::cospi(0.3f * static_cast<float>(j));
}
KOKKOS_INLINE_FUNCTION float field_v(int g, int j) { return 0.5f + 0.25f * reprosgd::math::cospi(0.2f * static_cast<float>(g + j)); }

/// What the simulation adds to the checkpoint: the stream, the whole field u and the time step.
struct SimulationState {
  reprosgd::SampleStream<Memory> stream;
  std::vector<float> u;  // rows x cols, global row order (any rank count can restart from it)
  int time_step = 0;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(CEREAL_NVP(time_step), CEREAL_NVP(u), CEREAL_NVP(stream));
  }
};

struct Options {
  std::string checkpoint, restart;
  int stop_after = -1;
};

class Slab {  // this rank's rows [first, first + n) of the grid, with one halo row on each side
 public:
  explicit Slab(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    first = rows * rank_ / size_;
    n = rows * (rank_ + 1) / size_ - first;
    u = Matrix("u", n + 2, cols);
    u_next = Matrix("u_next", n + 2, cols);
    features = Matrix("features", static_cast<std::size_t>(n) * cols, 3);
    term = Matrix("term", static_cast<std::size_t>(n) * cols, 1);
    ids = Kokkos::View<std::uint64_t*, Memory>("ids", static_cast<std::size_t>(n) * cols);
  }
  int first = 0, n = 0;
  Matrix u, u_next, features, term;
  Kokkos::View<std::uint64_t*, Memory> ids;

  void exchange_halo() {  // periodic in the rows
    Kokkos::fence();
    const int up = (rank_ + size_ - 1) % size_, down = (rank_ + 1) % size_;
    MPI_Sendrecv(&u(1, 0), cols, MPI_FLOAT, up, 0, &u(n + 1, 0), cols, MPI_FLOAT, down, 0, comm_, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u(n, 0), cols, MPI_FLOAT, down, 1, &u(0, 0), cols, MPI_FLOAT, up, 1, comm_, MPI_STATUS_IGNORE);
  }
  // Each local cell's features (u, v, the mean of its 4 neighbours) and logical id at time step t.
  void gather_features(int t) {
    exchange_halo();
    auto u_ = u;
    auto f = features;
    auto id = ids;
    const int first_ = first;
    Kokkos::parallel_for("features", Kokkos::MDRangePolicy<Space, Kokkos::Rank<2>>({1, 0}, {n + 1, cols}),
                         KOKKOS_LAMBDA(int i, int j) {
                           const int g = first_ + i - 1;
                           const std::size_t c = static_cast<std::size_t>(i - 1) * cols + j;
                           f(c, 0) = u_(i, j);
                           f(c, 1) = field_v(g, j);
                           f(c, 2) = 0.25f * (u_(i - 1, j) + u_(i + 1, j) + u_(i, (j + 1) % cols) + u_(i, (j + cols - 1) % cols));
                           id(c) = static_cast<std::uint64_t>(t) * cells + static_cast<std::uint64_t>(g) * cols + j;
                         });
  }
  void true_term(const Matrix& out) {
    auto f = features;
    Kokkos::parallel_for("reaction", Kokkos::RangePolicy<Space>(0, f.extent(0)),
                         KOKKOS_LAMBDA(std::size_t c) { out(c, 0) = reaction(f(c, 0), f(c, 1)); });
  }
  void advance() {  // u += dt (D Δu + R)
    auto u_ = u, un = u_next, f = features, r = term;
    Kokkos::parallel_for("advance", Kokkos::MDRangePolicy<Space, Kokkos::Rank<2>>({1, 0}, {n + 1, cols}),
                         KOKKOS_LAMBDA(int i, int j) {
                           const std::size_t c = static_cast<std::size_t>(i - 1) * cols + j;
                           un(i, j) = u_(i, j) + dt * (diffusion * 4.0f * (f(c, 2) - u_(i, j)) + r(c, 0));
                         });
    Kokkos::deep_copy(u, u_next);
  }
  // The whole field, global row order, on every rank (for the checkpoint).
  std::vector<float> whole_field() const {
    Kokkos::fence();
    std::vector<int> counts(static_cast<std::size_t>(size_)), displs(static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      displs[static_cast<std::size_t>(r)] = rows * r / size_ * cols;
      counts[static_cast<std::size_t>(r)] = rows * (r + 1) / size_ * cols - displs[static_cast<std::size_t>(r)];
    }
    std::vector<float> all(cells);
    MPI_Allgatherv(&u(1, 0), n * cols, MPI_FLOAT, all.data(), counts.data(), displs.data(), MPI_FLOAT, comm_);
    return all;
  }
  void set_field(const std::vector<float>& all) {
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < cols; ++j) u(i + 1, j) = all[static_cast<std::size_t>(first + i) * cols + j];
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

int run(MPI_Comm comm, const Options& opt) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  Slab slab(comm);
  {
    auto u = slab.u;
    const int first = slab.first;
    Kokkos::parallel_for("init", Kokkos::MDRangePolicy<Space, Kokkos::Rank<2>>({1, 0}, {slab.n + 1, cols}),
                         KOKKOS_LAMBDA(int i, int j) { u(i, j) = initial_u(first + i - 1, j); });
  }

  // The surrogate: 3 -> 32 -> 32 -> 1, tanh, Adam, MSE; batches of 128 in micro-batches of 32 (the
  // micro-batches are what the ranks share: the model does not depend on how many ranks there are).
  reprosgd::Trainer<reprosgd::DataParallel<Space>> trainer(
      {.global_batch = 128, .micro_batch = 32, .seed = 2027, .loss = reprosgd::LossKind::mse},
      reprosgd::DataParallel<Space>(comm));
  auto model = reprosgd::make_sequential<Memory>(reprosgd::Dense{3, 32}, reprosgd::Tanh{}, reprosgd::Dense{32, 32},
                                                 reprosgd::Tanh{}, reprosgd::Dense{32, 1});
  const reprosgd::Adam adam{{.lr = 1e-2f}};
  auto state = trainer.start(model, adam);
  SimulationState sim{reprosgd::SampleStream<Memory>({.capacity = 4096, .features = 3, .targets = 1,
                                                      .replacement = reprosgd::Replacement::reservoir, .seed = 11}),
                      {}, 0};
  if (!opt.restart.empty()) {
    const reprosgd::SnapshotInfo info = trainer.load_checkpoint(opt.restart, model, adam, state, sim.stream, sim);
    slab.set_field(sim.u);
    if (rank == 0)
      std::printf("restarted from %s: time step %d, training step %llu, %zu samples held\n", opt.restart.c_str(),
                  sim.time_step, static_cast<unsigned long long>(info.step), sim.stream.size());
  }

  using clock = std::chrono::steady_clock;
  double true_ms = 0.0, train_ms = 0.0, surrogate_ms = 0.0;
  int true_steps = 0;
  for (int t = sim.time_step; t < train_until; ++t) {  // the true term, and training in-situ
    const auto t0 = clock::now();
    slab.gather_features(t);
    slab.true_term(slab.term);
    slab.advance();
    Kokkos::fence();
    const auto t1 = clock::now();
    reprosgd::append_from_every_rank(trainer.parallelism(), sim.stream, Space(), slab.ids, slab.features, slab.term);
    if (sim.stream.size() >= 128) trainer.train_steps(model, adam, state, sim.stream, 8);
    true_ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
    train_ms += std::chrono::duration<double, std::milli>(clock::now() - t1).count();
    ++true_steps;
    if (t == opt.stop_after) {  // the job ends here: a later one continues from the file
      sim.u = slab.whole_field();
      sim.time_step = t + 1;
      trainer.save_checkpoint(opt.checkpoint, model, adam, state, sim.stream, sim);
      if (rank == 0) std::printf("checkpoint %s written after time step %d\n", opt.checkpoint.c_str(), t);
      return 0;
    }
  }

  // The error on fresh samples: the true term at the first time step the surrogate replaces
  // (never trained on).
  reprosgd::SampleStream<Memory> fresh({.capacity = cells, .features = 3, .targets = 1});
  slab.gather_features(train_until);
  slab.true_term(slab.term);
  reprosgd::append_from_every_rank(trainer.parallelism(), fresh, Space(), slab.ids, slab.features, slab.term);
  const reprosgd::EvalMetrics error = trainer.evaluate(model, fresh.contents());


  reprosgd::Inference<decltype(model), Space> surrogate(model, {.batch = static_cast<long>(slab.features.extent(0))});
  for (int t = train_until; t < time_steps; ++t) {  // the surrogate in the time loop, on each rank's cells
    const auto t0 = clock::now();
    slab.gather_features(t);
    surrogate.predict(Space(), slab.features, slab.term);
    slab.advance();
    Kokkos::fence();
    surrogate_ms += std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  }

  const reprosgd::Fingerprint fp = reprosgd::fingerprint(model, state.optimizer);
  if (rank == 0) {
    std::printf("%d ranks, rows %d..%d on rank 0 of the split communicator\n", size, slab.first, slab.first + slab.n - 1);
    std::printf("surrogate on fresh samples (time step %d): rmse %.6f, r2 %.6f\n", train_until, error.rmse, error.r2);
    if (true_steps > 0)
      std::printf("time per step on rank 0: true term %.3f ms (+ %.3f ms gathering and training 8 steps), "
                  "surrogate %.3f ms\n", true_ms / true_steps, train_ms / true_steps, surrogate_ms / (time_steps - train_until));
    std::printf("fingerprint %s\n", fp.hex().c_str());
  }
  return 0;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--checkpoint" && has_value)
      o.checkpoint = argv[++i];
    else if (a == "--restart" && has_value)
      o.restart = argv[++i];
    else if (a == "--stop-after" && has_value)
      o.stop_after = std::stoi(argv[++i]);
    else
      throw reprosgd::config_error("unknown argument '" + a +
                                   "' (usage: mpi_own_communicator [--checkpoint FILE --stop-after T] [--restart FILE])");
  }
  if ((o.stop_after >= 0) != !o.checkpoint.empty())
    throw reprosgd::config_error("--checkpoint and --stop-after go together");
  if (o.stop_after >= train_until)
    throw reprosgd::config_error("--stop-after must be a training time step, below " + std::to_string(train_until));
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  // The physics' communicator: every rank, numbered in reverse.
  MPI_Comm physics = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - 1 - world_rank, &physics);
  int status = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    try {
      reprosgd::check_fp_environment();
      status = run(physics, parse(argc, argv));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mpi_own_communicator (rank %d): error: %s\n", world_rank, e.what());
      status = 1;
    }
  }
  MPI_Comm_free(&physics);
  MPI_Finalize();
  return status;
}
