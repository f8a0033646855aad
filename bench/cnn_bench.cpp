// SPDX-License-Identifier: BSD-3-Clause
/// @file cnn_bench: training throughput of a small CNN on 1x28x28 images (Fashion-MNIST's shape)
/// through the Trainer, one JSON line; the peer is bench/torch_cnn_peer.py (the same network,
/// optimizer and batch in PyTorch), alternated by bench/torch_cnn_pairs.sh.
///
///   build/bench/cnn_bench [--micro-batch 128] [--steps 10] [--repeats 7] [--kokkos-threads=N] [--smoke]
///
/// conv(32, 3x3, pad 1) relu maxpool(2) conv(64, 3x3, pad 1) relu maxpool(2) flatten dense(128) relu
/// dropout(0.3) dense(10) (tests/cnn/fashion_mnist_cnn.cpp's network, the one that reaches 91% on
/// Fashion-MNIST), Adam 1e-3, global batch 128, on a synthetic set of
/// 6,400 images: samples/s as the median (and best) of --repeats segments of --steps steps after 3
/// warm-up steps, and the process's peak RSS. --smoke: 8x8 images, batch 16, 2 steps (CTest).
#include <reprosgd/reprosgd.hpp>

#include "bench_common.hpp"

#include <cstdio>
#include <string>

namespace {

struct Args {
  long micro_batch = 128, steps = 10;
  int repeats = 7;
  bool smoke = false;
};

template <class Mem>
auto cnn(int side) {
  using namespace reprosgd;
  const int half = side / 2, quarter = half / 2;
  return make_sequential<Mem>(Conv2D{{1, side, side}, 32, 3, 1, 1}, ReLU{}, MaxPool2D{{32, side, side}, 2},
                              Conv2D{{32, half, half}, 64, 3, 1, 1}, ReLU{}, MaxPool2D{{64, half, half}, 2},
                              Flatten{{64, quarter, quarter}}, Dense{64 * quarter * quarter, 128}, ReLU{},
                              Dropout{0.3f}, Dense{128, 10});
}

int run(const Args& a) {
  using namespace reprosgd;
  using Space = Kokkos::DefaultExecutionSpace;
  const int side = a.smoke ? 8 : 28;
  const long batch = a.smoke ? 16 : 128, mb = a.smoke ? 8 : a.micro_batch, steps = a.smoke ? 2 : a.steps;
  const long warmup = a.smoke ? 1 : 3;
  const int repeats = a.smoke ? 1 : a.repeats;
  auto data = make_synthetic_classification(1, static_cast<std::size_t>(batch * 50), side * side, 10, {.separation = 0.2f});
  TrainerOptions o;
  o.global_batch = batch;
  o.micro_batch = mb;
  o.steps = warmup + steps * repeats;
  o.seed = 1;
  o.evaluate_each_epoch = false;
  Trainer<Serial<Space>> trainer(o);
  auto model = cnn<Space::memory_space>(side);
  const Adam adam{{.lr = 1e-3f}};
  auto state = trainer.start(model, adam);
  reprosgd_bench::StepClock clock;
  trainer.fit(model, adam, state, data, clock);
  const auto rates = reprosgd_bench::segment_rates(clock, warmup, steps, repeats, batch);
  const auto ctx = reprosgd_bench::run_context<Space>(1);
  std::printf(
      "{\"bench\":\"train_cnn\",\"model\":\"conv32k3-pool-conv64k3-pool-dense128-dropout-dense10\",\"image\":\"1x%dx%d\",\"batch\":%ld,"
      "\"micro_batch\":%ld,\"optimizer\":\"adam\",\"backend\":\"%s\",\"threads\":%d,\"samples_per_s\":%.1f,"
      "\"samples_per_s_best\":%.1f,\"repeats\":%d,\"steps_per_repeat\":%ld,\"peak_rss_mib\":%.1f,\"git\":\"%s\"}\n",
      side, side, batch, mb, ctx.backend, ctx.threads, rates.median, rates.best, repeats, steps,
      reprosgd_bench::peak_rss_mib(), ctx.git);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  Args a;
  for (reprosgd_bench::CommandLine cl(argc, argv); cl.next();) {
    const std::string& s = cl.arg();
    if (s == "--smoke") a.smoke = true;
    else if (s == "--micro-batch") a.micro_batch = cl.long_value();
    else if (s == "--steps") a.steps = cl.long_value();
    else if (s == "--repeats") a.repeats = cl.int_value();
    else if (!cl.kokkos_option()) {
      std::fprintf(stderr, "cnn_bench: unknown option %s\n", s.c_str());
      return 2;
    }
  }
  if (a.steps <= 0 || a.repeats <= 0 || a.micro_batch <= 0 || 128 % a.micro_batch != 0) {
    std::fprintf(stderr, "cnn_bench: --steps and --repeats must be positive, --micro-batch a divisor of 128\n");
    return 2;
  }
  return run(a);
}
