// SPDX-License-Identifier: BSD-3-Clause
/// @file predict_bench: reprosgd::Inference latency and throughput on the 784-512-512-10 ReLU MLP
/// for batches of 1, 32 and 1024 rows, as JSON lines (bench/README.md).
///
/// Usage: predict_bench [--smoke] [--repeats N] [--batches 1,32,1024] [--kokkos-threads=N]
///
/// Method: one Inference per batch size (its workspace allocated once, before timing); 5 warm-up
/// calls; then `repeats` segments, each of enough calls to last about 50 ms; a call is
/// predict(space, x, y) + space.fence(). latency_us is the median over the segments of a call's
/// mean time in the segment, samples_per_s = batch / latency; *_best from the fastest segment.
/// bench/torch_predict_peer.py times PyTorch's model(x) under torch.no_grad() the same way.
#include "bench_common.hpp"

#include <reprosgd/inference/predict.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto c = line.find(':');
      std::string m = line.substr(c + 1);
      while (!m.empty() && m.front() == ' ') m.erase(m.begin());
      return m;
    }
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  using Space = Kokkos::DefaultHostExecutionSpace;
  int repeats = 15;
  double segment_s = 0.05;
  std::vector<long> batches{1, 32, 1024};
  for (reprosgd_bench::CommandLine cl(argc, argv); cl.next();) {
    if (cl.arg() == "--smoke") {
      repeats = 3;
      segment_s = 0.005;
    } else if (cl.arg() == "--repeats") {
      repeats = cl.int_value();
    } else if (cl.arg() == "--batches") {
      batches.clear();
      std::stringstream ss(cl.value());
      for (std::string b; std::getline(ss, b, ',');) batches.push_back(std::stol(b));
    } else if (!cl.kokkos_option()) {
      std::fprintf(stderr, "usage: predict_bench [--smoke] [--repeats N] [--batches 1,32,1024] [--kokkos-threads=N]\n");
      return 2;
    }
  }
  using reprosgd::Dense;
  auto model = reprosgd::Sequential{Dense{784, 512}, reprosgd::ReLU{}, Dense{512, 512}, reprosgd::ReLU{}, Dense{512, 10}};
  model.initialize(Space(), reprosgd::PhiloxStream(1));
  const auto ctx = reprosgd_bench::run_context<Space>(1);
  const std::string cpu = cpu_model();
  const Space space;
  for (const long batch : batches) {
    Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> x("x", batch, 784), y("y", batch, 10);
    for (long i = 0; i < batch; ++i)
      for (int j = 0; j < 784; ++j) x(i, j) = static_cast<float>((i * 131 + j * 7) % 256) / 255.0f;
    reprosgd::Inference<decltype(model), Space> inference(model, {}, {.batch = batch});
    const auto call = [&] {
      inference.predict(space, x, y);
      space.fence();
    };
    for (int w = 0; w < 5; ++w) call();
    // Calls per segment: enough for segment_s, from a timed probe of 10 calls.
    double t0 = reprosgd_bench::seconds_now();
    for (int w = 0; w < 10; ++w) call();
    const double probe = (reprosgd_bench::seconds_now() - t0) / 10.0;
    const long calls = std::max(1L, static_cast<long>(segment_s / std::max(probe, 1e-9)));
    std::vector<double> latency;
    for (int r = 0; r < repeats; ++r) {
      t0 = reprosgd_bench::seconds_now();
      for (long k = 0; k < calls; ++k) call();
      latency.push_back((reprosgd_bench::seconds_now() - t0) / static_cast<double>(calls));
    }
    const double med = reprosgd_bench::median_of(latency);
    const double best = *std::min_element(latency.begin(), latency.end());
    std::printf(
        "{\"bench\":\"predict\",\"model\":\"784-512-512-10\",\"batch\":%ld,\"backend\":\"%s\",\"threads\":%d,"
        "\"latency_us\":%.2f,\"latency_us_best\":%.2f,\"samples_per_s\":%.0f,\"samples_per_s_best\":%.0f,"
        "\"calls_per_segment\":%ld,\"repeats\":%d,\"cpu\":\"%s\",\"git\":\"%s\"}\n",
        batch, ctx.backend, ctx.threads, med * 1e6, best * 1e6, static_cast<double>(batch) / med,
        static_cast<double>(batch) / best, calls, repeats, cpu.c_str(), ctx.git);
    std::fflush(stdout);
  }
  return 0;
}
