// SPDX-License-Identifier: BSD-3-Clause
/// @file GFLOP/s of reprosgd::gemm_nn/tn/nt on the training shapes against OpenBLAS sgemm, as JSON lines.
//
// Usage: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE gemm_bench [--smoke] [--repeats N]
//                                                          [--thread-counts 1,2] [--microbatch]
// See bench/README.md for the method.
#include <reprosgd/kernels/gemm.hpp>

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using reprosgd::detail::gemm_op;
using host_matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;

struct Case {
  gemm_op op;
  int m, n, k;
};

struct Options {
  bool smoke = false;
  int repeats = 9;                  // samples per measurement; the median is reported
  double min_sample_seconds = 2e-3;  // each sample repeats the call until it lasts this long
  std::vector<int> threads{1, 2};
  bool microbatch = false;  // also the micro-batch sizes 16 and 32
  std::string only;         // "nn,16,10,512": that shape alone (ours and OpenBLAS), for profiling one
};

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const auto pos = line.find(':');
      return pos == std::string::npos ? line : line.substr(pos + 2);
    }
  return "unknown";
}

const char* op_name(gemm_op op) { return op == gemm_op::nn ? "nn" : op == gemm_op::tn ? "tn" : "nt"; }

void fill(const host_matrix& v, std::uint32_t seed) {
  std::uint32_t s = seed * 2654435761u + 12345u;
  for (std::size_t i = 0; i < v.extent(0); ++i)
    for (std::size_t j = 0; j < v.extent(1); ++j) {
      s = s * 1664525u + 1013904223u;
      v(i, j) = static_cast<float>(static_cast<int>(s >> 8) - (1 << 23)) * 0x1p-23f;  // [-1, 1)
    }
}

/// Median and best of `repeats` samples of f, after warm-up; each sample is the mean over enough
/// calls to last min_sample_seconds. `fence` completes the asynchronous work before the timer stops.
template <class F, class Fence>
std::pair<double, double> time_call(const Options& opt, F&& f, Fence&& fence) {
  for (int w = 0; w < 3; ++w) f();  // warm-up: caches, page faults, thread pools spun up
  fence();
  int calls = 1;
  if (!opt.smoke) {
    Kokkos::Timer probe;
    f();
    fence();
    const double once = std::max(probe.seconds(), 1e-7);
    calls = std::max(1, static_cast<int>(opt.min_sample_seconds / once));
  }
  std::vector<double> samples;
  for (int r = 0; r < opt.repeats; ++r) {
    Kokkos::Timer timer;
    for (int c = 0; c < calls; ++c) f();
    fence();
    samples.push_back(timer.seconds() / calls);
  }
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front()};
}

template <class Space>
void run_case(const Options& opt, const Case& cs, int threads, const std::string& device) {
  const std::string kernel = reprosgd::host_gemm_kernel_name();
  const int ar = cs.op == gemm_op::tn ? cs.k : cs.m, ac = cs.op == gemm_op::tn ? cs.m : cs.k;
  const int br = cs.op == gemm_op::nt ? cs.n : cs.k, bc = cs.op == gemm_op::nt ? cs.k : cs.n;
  using matrix = Kokkos::View<float**, Kokkos::LayoutRight, typename Space::memory_space>;
  host_matrix a("a", ar, ac), b("b", br, bc), c("c", cs.m, cs.n), c_blas("c_blas", cs.m, cs.n);
  fill(a, 1);
  fill(b, 2);
  matrix da("a", ar, ac), db("b", br, bc), dc("c", cs.m, cs.n);
  Kokkos::deep_copy(da, a);
  Kokkos::deep_copy(db, b);
  const Space space;

  auto ours = [&] {
    if (cs.op == gemm_op::nn) reprosgd::gemm_nn(space, da, db, dc);
    if (cs.op == gemm_op::tn) reprosgd::gemm_tn(space, da, db, dc);
    if (cs.op == gemm_op::nt) reprosgd::gemm_nt(space, da, db, dc);
  };
  auto openblas = [&] {
    cblas_sgemm(CblasRowMajor, cs.op == gemm_op::tn ? CblasTrans : CblasNoTrans,
                cs.op == gemm_op::nt ? CblasTrans : CblasNoTrans, cs.m, cs.n, cs.k, 1.0f, a.data(), ac, b.data(),
                bc, 0.0f, c_blas.data(), cs.n);
  };
  openblas_set_num_threads(threads);
  const auto [t_ours, best_ours] = time_call(opt, ours, [&] { space.fence(); });
  const auto [t_blas, best_blas] = time_call(opt, openblas, [] {});
  // Paired samples: ours and OpenBLAS alternate, each about 1 ms, and the ratio is taken per pair,
  // so that a neighbour's load changes both sides of a ratio alike (the medians above can be
  // minutes apart on a busy machine).
  std::vector<double> pair_ratios;
  {
    const double probe = std::max(t_ours, 1e-7);
    const int calls = opt.smoke ? 1 : std::max(1, static_cast<int>(1e-3 / probe));
    for (int r = 0; r < (opt.smoke ? 1 : 2 * opt.repeats + 1); ++r) {
      Kokkos::Timer t1;
      for (int c = 0; c < calls; ++c) ours();
      space.fence();
      const double o = t1.seconds();
      Kokkos::Timer t2;
      for (int c = 0; c < calls; ++c) openblas();
      pair_ratios.push_back(t2.seconds() / std::max(o, 1e-12));
    }
    std::sort(pair_ratios.begin(), pair_ratios.end());
  }

  // Sanity: both computed the same product up to rounding (relative to the row's magnitude).
  Kokkos::deep_copy(c, dc);
  double worst = 0.0;
  for (int i = 0; i < cs.m; ++i)
    for (int j = 0; j < cs.n; ++j) worst = std::max(worst, static_cast<double>(std::abs(c(i, j) - c_blas(i, j))));
  if (worst > 1e-3 * std::max(1, cs.k)) {
    std::fprintf(stderr, "gemm_bench: %s %dx%dx%d differs from OpenBLAS by %g\n", op_name(cs.op), cs.m, cs.n, cs.k,
                 worst);
    std::exit(1);
  }

  const double flop = 2.0 * cs.m * cs.n * cs.k;
  const double g = flop / t_ours * 1e-9, gb = flop / t_blas * 1e-9;
  std::printf(
      "{\"bench\":\"gemm\",\"op\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"threads\":%d,\"gflops\":%.2f,"
      "\"openblas_gflops\":%.2f,\"ratio\":%.3f,\"ratio_paired\":%.3f,\"gflops_best\":%.2f,\"openblas_gflops_best\":%.2f,"
      "\"backend\":\"%s\",\"repeats\":%d,\"ranks\":1,\"openblas_core\":\"%s\",\"kernel\":\"%s\",\"device\":\"%s\",\"git\":\"%s\"}\n",
      op_name(cs.op), cs.m, cs.n, cs.k, threads, g, gb, g / gb, pair_ratios[pair_ratios.size() / 2], flop / best_ours * 1e-9, flop / best_blas * 1e-9,
      Space::name(), opt.repeats, openblas_get_corename(), kernel.c_str(), device.c_str(), REPROSGD_GIT_SHA);
  std::fflush(stdout);
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    out.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p) break;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--smoke") {
      opt.smoke = true;
      opt.repeats = 1;
    } else if (arg == "--repeats" && i + 1 < argc) {
      opt.repeats = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--thread-counts" && i + 1 < argc) {
      opt.threads = parse_list(argv[++i]);
    } else if (arg == "--microbatch") {
      opt.microbatch = true;
    } else if (arg == "--only" && i + 1 < argc) {
      opt.only = argv[++i];
    } else if (arg.rfind("--kokkos", 0) != 0) {
      std::fprintf(stderr, "usage: %s [--smoke] [--repeats N] [--thread-counts 1,2] [--microbatch] [--only OP,M,N,K]\n", argv[0]);
      return 2;
    }
  }
  for (const char* var : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"})
    if (std::getenv(var))
      std::fprintf(stderr, "gemm_bench: warning: %s is set; OpenBLAS then does not pick its own kernel/blocking. "
                           "Run with `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` unless it does not know "
                           "this CPU (below).\n", var);
  // An OpenBLAS older than the CPU falls back to its SSE3 kernels: Debian 12's 0.3.21 does so on
  // Intel family 6 model 207 (Emerald Rapids), 4-5x slower than its AVX-512 ones there. Such a
  // reference measures nothing; say so, and how to name the CPU's kernels.
  const std::string core = openblas_get_corename();
  const std::string ours = reprosgd::host_gemm_kernel_name();
  const bool vector_cpu = ours.rfind("avx512", 0) == 0 || ours.rfind("avx2", 0) == 0;
  for (const char* old_core : {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai", "Coppermine", "Northwood"})
    if (vector_cpu && core == old_core)
      std::fprintf(stderr, "gemm_bench: warning: OpenBLAS chose its %s kernels (it does not know this CPU), while the CPU runs "
                           "%s: the OpenBLAS figures are not its best here; name the CPU's kernels for this run, "
                           "OPENBLAS_CORETYPE=%s\n",
                   core.c_str(), ours.c_str(), ours.rfind("avx512", 0) == 0 ? "SkylakeX" : "Haswell");

  // Forward 784-512-512-10, weight gradients X^T*dY, input gradients dY*W^T (whole, and per
  // feature chunk); batch 128.
  std::vector<int> batches{128};
  if (opt.microbatch) batches = {128, 32, 16};
  std::vector<Case> cases;
  for (const int bsz : batches)
    for (const Case cs : {Case{gemm_op::nn, bsz, 512, 784}, Case{gemm_op::nn, bsz, 512, 512}, Case{gemm_op::nn, bsz, 10, 512},
                          Case{gemm_op::tn, 784, 512, bsz}, Case{gemm_op::tn, 512, 512, bsz}, Case{gemm_op::tn, 512, 10, bsz},
                          Case{gemm_op::nt, bsz, 784, 512}, Case{gemm_op::nt, bsz, 512, 512}, Case{gemm_op::nt, bsz, 512, 10},
                          // the 512-wide layer's input gradient as Dense computes it: one GEMM per
                          // 64-feature chunk (default_feature_chunk), K = 64
                          Case{gemm_op::nt, bsz, 512, 64}})
      cases.push_back(cs);
  if (!opt.only.empty()) {
    char op[3] = {};
    Case one{gemm_op::nn, 0, 0, 0};
    if (std::sscanf(opt.only.c_str(), "%2[a-z],%d,%d,%d", op, &one.m, &one.n, &one.k) != 4 || one.m < 1 ||
        one.n < 1 || one.k < 1 || (std::string(op) != "nn" && std::string(op) != "tn" && std::string(op) != "nt")) {
      std::fprintf(stderr, "gemm_bench: --only wants OP,M,N,K with OP nn, tn or nt and positive sizes, not '%s'\n",
                   opt.only.c_str());
      return 2;
    }
    one.op = std::string(op) == "nn" ? gemm_op::nn : std::string(op) == "tn" ? gemm_op::tn : gemm_op::nt;
    cases = {one};
  }
  if (opt.smoke) cases = {Case{gemm_op::nn, 13, 17, 19}, Case{gemm_op::tn, 13, 17, 19}, Case{gemm_op::nt, 13, 17, 19}};

  const std::string device = cpu_model();
  using Parallel = Kokkos::DefaultHostExecutionSpace;
  for (const int threads : opt.threads) {
    for (const Case& cs : cases) {
      if (threads == 1) {
#if defined(KOKKOS_ENABLE_SERIAL)
        run_case<Kokkos::Serial>(opt, cs, 1, device);
#else
        std::fprintf(stderr, "gemm_bench: 1 thread needs Kokkos::Serial; skipped\n");
        break;
#endif
      } else if (reprosgd::detail::concurrency(Parallel()) == threads) {
        run_case<Parallel>(opt, cs, threads, device);
      } else {
        std::fprintf(stderr, "gemm_bench: %s runs %d threads, not %d: start with --kokkos-threads=%d; skipped\n",
                     Parallel::name(), reprosgd::detail::concurrency(Parallel()), threads, threads);
        break;
      }
    }
  }
  return 0;
}
