// SPDX-License-Identifier: BSD-3-Clause
/// @file End-to-end training throughput (samples/s) of a 784-512-512-10 ReLU MLP, batch 128, SGD
/// with momentum, and the peak memory of the process; JSON lines.
///
///   build/bench/train_bench [--micro-batch 128] [--steps 20] [--repeats 7] [--reduction exact|native]
///                           [--feature-chunk 64] [--trace off|step|layer] [--kokkos-threads=N]
///                           (under mpiexec -n P with MPI)
///
/// --feature-chunk sets the Dense layers' feature chunk: the input gradient is an Exact sum over
/// chunks, so 64 (the default) costs 8 chunk GEMMs and grid passes per 512-wide layer, 512 one
/// plain GEMM (a different model numerically: the chunk width is part of the model).
/// --trace step|layer writes the determinism trace (TrainerOptions::trace) to a temporary file,
/// removed at the end: the step times then include its fingerprints (docs/diagnosis.md).
#include <reprosgd/reprosgd.hpp>
#include <reprosgd/reduction/native.hpp>
#if REPROSGD_HAS_MPI
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/mpi_environment.hpp>
#endif


#include "bench_common.hpp"

#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace {

using reprosgd_bench::StepClock;

struct Args {
  long micro_batch = 128;
  long steps = 20;
  int repeats = 7;
  std::string reduction = "exact";
  int feature_chunk = reprosgd::default_feature_chunk;
  std::string trace = "off";
  bool smoke = false;
};

template <class Par>
int run(const Args& a) {
  using namespace reprosgd;
  const long batch = a.smoke ? 16 : 128;
  const long mb = a.smoke ? 8 : a.micro_batch;
  const long steps = a.smoke ? 2 : a.steps;
  const int repeats = a.smoke ? 1 : a.repeats;
  const long warmup = a.smoke ? 1 : 3;
  const long total = warmup + steps * repeats;
  const auto data = make_synthetic_classification(1, static_cast<std::size_t>(batch * 50), 784, 10, {.separation = 0.2f});
  TrainerOptions o;
  o.global_batch = batch;
  o.micro_batch = mb;
  o.steps = total;
  o.seed = 1;
  o.evaluate_each_epoch = false;
  if (a.trace != "off") {
    o.trace = (std::filesystem::temp_directory_path() /
               ("reprosgd_train_bench_" + std::to_string(::getpid()) + ".trace")).string();
    o.trace_level = a.trace == "layer" ? TraceLevel::layer : TraceLevel::step;
  }
  Trainer<Par> trainer(o);
  const int h = a.smoke ? 32 : 512, fc = a.feature_chunk;
  Sequential model{Dense{784, h, Init::he_normal, fc}, ReLU{}, Dense{h, h, Init::he_normal, fc}, ReLU{},
                   Dense{h, 10, Init::he_normal, fc}};
  const Sgd sgd{{.lr = 0.01f, .momentum = 0.9f}};
  auto state = trainer.start(model, sgd);
  StepClock clock;
  trainer.fit(model, sgd, state, data, clock);
  const auto rates = reprosgd_bench::segment_rates(clock, warmup, steps, repeats, batch);
  if (!o.trace.empty() && trainer.parallelism().rank() == 0) std::filesystem::remove(o.trace);
  const auto ctx = reprosgd_bench::run_context<typename Par::execution_space>(trainer.parallelism().size());
  if (trainer.parallelism().rank() == 0)
    std::printf(
        "{\"bench\":\"train\",\"model\":\"%s\",\"batch\":%ld,\"micro_batch\":%ld,\"optimizer\":\"sgd-momentum\","
        "\"backend\":\"%s\",\"threads\":%d,\"ranks\":%d,\"reduction\":\"%s\",\"feature_chunk\":%d,\"trace\":\"%s\","
        "\"samples_per_s\":%.1f,\"samples_per_s_best\":%.1f,\"repeats\":%d,\"steps_per_repeat\":%ld,"
        "\"peak_rss_mib\":%.1f,\"git\":\"%s\"}\n",
        a.smoke ? "784-32-32-10" : "784-512-512-10", batch, mb, ctx.backend, ctx.threads, ctx.ranks,
        Par::reduction_type::name(), a.feature_chunk, a.trace.c_str(), rates.median, rates.best, repeats, steps,
        reprosgd_bench::peak_rss_mib(), ctx.git);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
#if REPROSGD_HAS_MPI
  reprosgd::MpiEnvironment mpi(argc, argv);
#endif
  Kokkos::ScopeGuard kokkos(argc, argv);
  Args a;
  for (reprosgd_bench::CommandLine cl(argc, argv); cl.next();) {
    const std::string& s = cl.arg();
    if (s == "--smoke") a.smoke = true;
    else if (s == "--micro-batch") a.micro_batch = cl.long_value();
    else if (s == "--steps") a.steps = cl.long_value();
    else if (s == "--repeats") a.repeats = cl.int_value();
    else if (s == "--reduction") a.reduction = cl.value();
    else if (s == "--feature-chunk") a.feature_chunk = cl.int_value();
    else if (s == "--trace") a.trace = cl.value();
    else if (!cl.kokkos_option()) {
      std::fprintf(stderr, "train_bench: unknown option %s\n", s.c_str());
      return 2;
    }
  }
  if (a.feature_chunk <= 0) {
    std::fprintf(stderr, "train_bench: --feature-chunk must be a positive integer\n");
    return 2;
  }
  if (a.trace != "off" && a.trace != "step" && a.trace != "layer") {
    std::fprintf(stderr, "train_bench: --trace must be off, step or layer\n");
    return 2;
  }
  using Space = Kokkos::DefaultExecutionSpace;
#if REPROSGD_HAS_MPI
  if (a.reduction == "native") return run<reprosgd::DataParallel<Space, reprosgd::Native>>(a);
  return run<reprosgd::DataParallel<Space, reprosgd::Exact>>(a);
#else
  if (a.reduction == "native") return run<reprosgd::Serial<Space, reprosgd::Native>>(a);
  return run<reprosgd::Serial<Space, reprosgd::Exact>>(a);
#endif
}
