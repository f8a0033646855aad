// SPDX-License-Identifier: BSD-3-Clause
/// @file A Kokkos simulation that trains a surrogate of its own expensive term while it runs, then
/// switches to it.
///
/// The simulation: a 2-D reaction–diffusion equation u_t = D Δu + R(u, v) on a periodic grid,
/// explicit Euler, where the reaction term R is expensive (a 64-term series standing in for a
/// detailed chemistry model; reprosgd::math functions: the same bits with every compiler and
/// backend). The simulation owns its ScopeGuard, execution space and Views.
///
///  1. Time steps 0 .. 39: the true R. After each, the step's cells are appended to a
///     SampleStream (logical id = time step x cells + cell: never the thread or rank that computed
///     them), and the trainer runs 4 steps on it (Trainer::train_steps, in-situ).
///  2. Time steps 40 .. 79: R from the surrogate (Inference::predict, inside the time loop, no
///     allocation per call); the true R is computed on the side once every 10 steps to report the
///     surrogate's error.
///
/// Prints the surrogate's error, the time per step with the true term and with the surrogate, and
/// `fingerprint <32 hex>` of the trained model and optimizer state: the same on 1 and 2 threads
/// (tests/examples runs both) and with the whole run on Kokkos::Serial, which the example does
/// itself when the build has Serial besides its default host backend.
#include <reprosgd/reprosgd.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

namespace {

constexpr int grid = 32;                  // grid x grid cells
constexpr std::uint64_t cells = grid * grid;
constexpr int train_until = 40, time_steps = 80;
constexpr float dt = 0.05f, diffusion = 0.2f;

// The expensive pointwise term: a truncated series in (u, v).
KOKKOS_INLINE_FUNCTION float reaction(float u, float v) {
  float r = 0.0f;
  for (int k = 1; k <= 64; ++k) r += reprosgd::math::sinpi(static_cast<float>(k) * u) * reprosgd::math::exp(-0.1f * static_cast<float>(k) * v) / static_cast<float>(k);
  return 0.5f * r - u * v;
}

using Field = Kokkos::View<float**, Kokkos::LayoutRight>;

struct Result {
  reprosgd::Fingerprint fingerprint;
  double rmse = 0.0, true_ms = 0.0, train_ms = 0.0, surrogate_ms = 0.0;
};

template <class Space>
Result run() {
  using Memory = typename Space::memory_space;
  using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Memory>;
  const Space space;
  // The simulation's state: u and v on the grid; the features of each cell (u, v, its neighbours' mean)
  // and the reaction term, laid out one cell per row so that the stream reads them in place.
  Matrix u("u", grid, grid), u_next("u_next", grid, grid), v("v", grid, grid);
  Matrix features("features", cells, 3), term("term", cells, 1);
  Kokkos::parallel_for("init", Kokkos::MDRangePolicy<Space, Kokkos::Rank<2>>(space, {0, 0}, {grid, grid}),
                       KOKKOS_LAMBDA(int i, int j) {
                         u(i, j) = 0.5f + 0.5f * reprosgd::math::sinpi(0.4f * static_cast<float>(i)) * reprosgd::math::cospi(0.3f * static_cast<float>(j));
                         v(i, j) = 0.5f + 0.25f * reprosgd::math::cospi(0.2f * static_cast<float>(i + j));
                       });
  auto gather_features = [&] {
    Kokkos::parallel_for("features", Kokkos::MDRangePolicy<Space, Kokkos::Rank<2>>(space, {0, 0}, {grid, grid}),
                         KOKKOS_LAMBDA(int i, int j) {
                           const int c = i * grid + j;
                           features(c, 0) = u(i, j);
                           features(c, 1) = v(i, j);
                           features(c, 2) = 0.25f * (u((i + 1) % grid, j) + u((i + grid - 1) % grid, j) +
                                                     u(i, (j + 1) % grid) + u(i, (j + grid - 1) % grid));
                         });
  };
  auto true_term = [&](const Matrix& out) {
    Kokkos::parallel_for("reaction", Kokkos::RangePolicy<Space>(space, 0, cells),
                         KOKKOS_LAMBDA(std::uint64_t c) { out(c, 0) = reaction(features(c, 0), features(c, 1)); });
  };
  auto advance = [&] {  // u += dt (D Δu + R)
    Kokkos::parallel_for("advance", Kokkos::MDRangePolicy<Space, Kokkos::Rank<2>>(space, {0, 0}, {grid, grid}),
                         KOKKOS_LAMBDA(int i, int j) {
                           const int c = i * grid + j;
                           const float lap = 4.0f * (features(c, 2) - u(i, j));
                           u_next(i, j) = u(i, j) + dt * (diffusion * lap + term(c, 0));
                         });
    Kokkos::deep_copy(space, u, u_next);
  };

  // The surrogate: 3 -> 32 -> 32 -> 1, tanh, Adam, MSE; batches of 128 in micro-batches of 32.
  reprosgd::Trainer<reprosgd::Serial<Space>> trainer(
      {.global_batch = 128, .micro_batch = 32, .seed = 2026, .loss = reprosgd::LossKind::mse});
  auto model = reprosgd::make_sequential<Memory>(reprosgd::Dense{3, 32}, reprosgd::Tanh{}, reprosgd::Dense{32, 32},
                                                 reprosgd::Tanh{}, reprosgd::Dense{32, 1});
  const reprosgd::Adam adam{{.lr = 3e-3f}};
  auto state = trainer.start(model, adam);
  reprosgd::SampleStream<Memory> stream({.capacity = 8192, .features = 3, .targets = 1,
                                         .replacement = reprosgd::Replacement::reservoir, .seed = 7});

  Result result;
  using clock = std::chrono::steady_clock;
  for (int t = 0; t < train_until; ++t) {  // the true term, and training in-situ
    const auto t0 = clock::now();
    gather_features();
    true_term(term);
    advance();
    space.fence();
    result.true_ms += std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    stream.append(space, static_cast<std::uint64_t>(t) * cells, features, term);  // ids t*cells + cell
    const auto t1 = clock::now();
    if (stream.size() >= 128) trainer.train_steps(model, adam, state, stream, 4);
    result.train_ms += std::chrono::duration<double, std::milli>(clock::now() - t1).count();
  }
  result.true_ms /= train_until;
  result.train_ms /= train_until;

  reprosgd::Inference<decltype(model), Space> surrogate(model, {.batch = static_cast<long>(cells)});
  Matrix check("check", cells, 1);
  double squared = 0.0;
  long compared = 0;
  for (int t = train_until; t < time_steps; ++t) {  // the surrogate in the time loop
    const auto t0 = clock::now();
    gather_features();
    surrogate.predict(space, features, term);
    advance();
    space.fence();
    result.surrogate_ms += std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (t % 10 == 0) {  // the true term on the side, for the error report
      true_term(check);
      surrogate.predict(space, features, term);
      double local = 0.0;
      Kokkos::parallel_reduce("error", Kokkos::RangePolicy<Space>(space, 0, cells),
                              KOKKOS_LAMBDA(std::uint64_t c, double& s) {
                                const double d = static_cast<double>(term(c, 0)) - check(c, 0);
                                s += d * d;
                              },
                              local);
      squared += local;
      compared += static_cast<long>(cells);
    }
  }
  result.surrogate_ms /= time_steps - train_until;
  result.rmse = std::sqrt(squared / static_cast<double>(compared));
  result.fingerprint = reprosgd::fingerprint(model, state.optimizer);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  try {
    reprosgd::check_fp_environment();
    const Result r = run<Kokkos::DefaultHostExecutionSpace>();
    std::printf("surrogate rmse %.4f against the true reaction term (time steps %d..%d)\n", r.rmse, train_until,
                time_steps - 1);
    std::printf("time per step: true term %.3f ms (+ %.3f ms training 4 steps in-situ), "
                "surrogate %.3f ms (%.1fx faster than the true term)\n",
                r.true_ms, r.train_ms, r.surrogate_ms, r.true_ms / r.surrogate_ms);
#if defined(KOKKOS_ENABLE_SERIAL)
    if constexpr (!std::is_same_v<Kokkos::DefaultHostExecutionSpace, Kokkos::Serial>) {
      const Result serial = run<Kokkos::Serial>();
      if (serial.fingerprint != r.fingerprint) {
        std::fprintf(stderr, "kokkos_app_surrogate: Kokkos::Serial trained %s, %s trained %s\n",
                     serial.fingerprint.hex().c_str(), Kokkos::DefaultHostExecutionSpace::name(),
                     r.fingerprint.hex().c_str());
        return 1;
      }
      std::printf("Kokkos::Serial: the same fingerprint\n");
    }
#endif
    std::printf("fingerprint %s\n", r.fingerprint.hex().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kokkos_app_surrogate: error: %s\n", e.what());
    return 1;
  }
}
