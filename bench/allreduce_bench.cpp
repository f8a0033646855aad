// SPDX-License-Identifier: BSD-3-Clause
/// @file What the rank-independent Exact gradient sum costs next to a native float MPI_Allreduce.
//
// Run under mpiexec, e.g.
//   OMP_NUM_THREADS=1 mpiexec -n 4 --oversubscribe build/bench/allreduce_bench [--smoke] [--repeats N]
// Each rank holds one gradient row (M = P micro-batches). For each vector length the same run
// times, with a barrier before each call and the slowest rank's time kept:
//   native_allreduce  MPI_Allreduce(MPI_IN_PLACE, MPI_FLOAT, MPI_SUM) of the row
//   native_reduce     reprosgd::Native::reduce (local sum, the same allreduce, NaN/Inf agreement)
//   exact_reduce      reprosgd::Exact::reduce (block exponent MAX, int64 quantise, MPI_INT64_T
//                     reduce-scatter, back to float, float allgather)
// The three are interleaved (one call of each per repetition, the order rotating), so a load that
// comes and goes (other processes on a shared machine) hits all three alike. After 2 warm-up
// rounds the median of the repetitions (default 11) is reported with the ratio to
// native_allreduce, one JSON line per (method, length) from rank 0; `ratio_median_of_rounds` is
// the median over repetitions of exact/native_allreduce measured in the same round.
//   --n N  time only vectors of N floats (repeatable) instead of 669,706 and 10,000,000
#include <reprosgd/config.hpp>

#include <Kokkos_Core.hpp>

#include <cstdio>

#if !REPROSGD_HAS_MPI
int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::printf("{\"bench\":\"allreduce\",\"skipped\":\"this build has no MPI (REPROSGD_HAS_MPI=0)\"}\n");
  return 0;
}
#else

#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/mpi_environment.hpp>
#include <reprosgd/reduction/exact.hpp>
#include <reprosgd/reduction/native.hpp>

#include <mpi.h>

#include "bench_common.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using reprosgd_bench::median_of;
using Space = Kokkos::DefaultExecutionSpace;
using Mem = Space::memory_space;

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Gradient-like values: random sign and mantissa, magnitudes 2^-20 .. 2^-1.
float value(int rank, long i) {
  const std::uint64_t h = mix64((static_cast<std::uint64_t>(rank) << 40) ^ static_cast<std::uint64_t>(i));
  const std::uint32_t bits = (static_cast<std::uint32_t>(h >> 63) << 31) |
                             ((107u + static_cast<std::uint32_t>((h >> 32) % 20)) << 23) |
                             (static_cast<std::uint32_t>(h) & 0x7FFFFFu);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// Time one call of `op` (after `reset`), fenced and behind a barrier; the slowest rank's time.
template <class Op, class Reset>
double time_once(const reprosgd::DataParallel<Space>& par, Reset reset, Op op) {
  reset();
  Kokkos::fence();
  par.barrier();
  Kokkos::Timer timer;
  op();
  Kokkos::fence();
  double t = timer.seconds(), slowest = 0.0;
  MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, par.comm());  // timing only, not training data
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  reprosgd::MpiEnvironment mpi(argc, argv);
  Kokkos::ScopeGuard guard(argc, argv);
  bool smoke = false;
  int repeats = 11;
  std::vector<long> only;
  std::string profile;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke") smoke = true;
    else if (a == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
    else if (a == "--n" && i + 1 < argc) only.push_back(std::max(1L, std::atol(argv[++i])));
    else if (a == "--profile" && i + 1 < argc) profile = argv[++i];
  }
  // --profile exact|native|mpi: run that method alone, repeats times, and print nothing (for perf).
  const int profiled = profile.empty() ? -1 : profile == "mpi" ? 0 : profile == "native" ? 1 : profile == "exact" ? 2 : -2;
  if (profiled == -2) {
    std::fprintf(stderr, "allreduce_bench: --profile takes exact, native or mpi, not '%s'\n", profile.c_str());
    return 2;
  }
  if (smoke) repeats = 3;
  const std::vector<long> sizes = smoke            ? std::vector<long>{4096}
                                  : !only.empty() ? only
                                                  : std::vector<long>{669706, 10000000};
  {
    reprosgd::DataParallel<Space> par;
    const long m = par.size();  // one micro-batch row per rank
    for (const long n : sizes) {
      Kokkos::View<float**, Kokkos::LayoutRight, Mem> rows("rows", 1, n);
      Kokkos::View<float*, Mem> sum("sum", n), buffer("buffer", n);
      {
        auto host = Kokkos::create_mirror_view(rows);
        for (long i = 0; i < n; ++i) host(0, i) = value(par.rank(), i);
        Kokkos::deep_copy(rows, host);
      }
      auto row = Kokkos::subview(rows, 0, Kokkos::ALL);
      auto buffer_host = Kokkos::create_mirror_view(buffer);
      reprosgd::Exact exact;
      reprosgd::Native native;
      bool finite = true;

      std::vector<double> t_mpi, t_native, t_exact, ratio_native, ratio_exact;
      for (int r = -2; r < repeats; ++r) {
        double t[3] = {0.0, 0.0, 0.0};
        for (int j = 0; j < 3; ++j) {
          const int method = (j + (r + 2)) % 3;  // rotate the order between rounds
          if (profiled >= 0 && method != profiled) continue;
          if (method == 0)
            t[0] = time_once(
                par, [&] { Kokkos::deep_copy(buffer, row); },
                [&] {
                  Kokkos::deep_copy(buffer_host, buffer);
                  reprosgd::detail::mpi_check(MPI_Allreduce(MPI_IN_PLACE, buffer_host.data(), static_cast<int>(n),
                                                            MPI_FLOAT, MPI_SUM, par.comm()),
                                              "allreduce_bench: MPI_Allreduce");
                  Kokkos::deep_copy(buffer, buffer_host);
                });
          else if (method == 1)
            t[1] = time_once(par, [] {}, [&] { finite = native.reduce(par, rows, m, sum).finite && finite; });
          else
            t[2] = time_once(par, [] {}, [&] { finite = exact.reduce(par, rows, m, sum).finite && finite; });
        }
        if (r < 0) continue;
        t_mpi.push_back(t[0]);
        t_native.push_back(t[1]);
        t_exact.push_back(t[2]);
        ratio_native.push_back(t[1] / t[0]);
        ratio_exact.push_back(t[2] / t[0]);
      }

      const double base = median_of(t_mpi);
      if (par.rank() == 0 && profiled < 0) {
        const struct {
          const char* name;
          const std::vector<double>* t;
          double round_ratio;
        } rowsout[] = {{"native_allreduce", &t_mpi, 1.0},
                       {"native_reduce", &t_native, median_of(ratio_native)},
                       {"exact_reduce", &t_exact, median_of(ratio_exact)}};
        for (const auto& r : rowsout)
          std::printf(
              "{\"bench\":\"allreduce\",\"method\":\"%s\",\"n\":%ld,\"ranks\":%d,\"backend\":\"%s\","
              "\"device\":\"cpu\",\"git\":\"%s\",\"repeats\":%d,\"median_ms\":%.4f,\"min_ms\":%.4f,"
              "\"ratio_to_native_allreduce\":%.3f,\"ratio_median_of_rounds\":%.3f,\"finite\":%s}\n",
              r.name, n, par.size(), Space::name(), REPROSGD_GIT_SHA, repeats, 1e3 * median_of(*r.t),
              1e3 * *std::min_element(r.t->begin(), r.t->end()), median_of(*r.t) / base, r.round_ratio, finite ? "true" : "false");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
#endif
