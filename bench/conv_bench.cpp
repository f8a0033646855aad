// SPDX-License-Identifier: BSD-3-Clause
/// @file conv_bench: GFLOP/s of the convolution kernels (Conv2D's forward, weight gradient and
/// input gradient) on the training shapes of the Fashion-MNIST CNN (bench/cnn_bench.cpp), each
/// against the deterministic GEMM call it makes, alone on the same operands, timed in the same run
/// (alternating samples): the "roofline" of that pass. One JSON line per (layer, micro-batch, pass).
///
///   build/bench/conv_bench [--micro-batch 32,128] [--repeats 9] [--iterations N] [--kokkos-threads=N] [--smoke]
///
/// Layers: conv1 = Conv2D{{1,28,28},32,3,1,1}, conv2 = Conv2D{{32,14,14},64,3,1,1}. Passes, as
/// Conv2D::forward / Conv2D::backward run them (one channel chunk: 32 and 64 <= 64):
///   forward      im2col + gemm_nn_bias(patches, W, b)      roofline gemm_nn_bias alone  (M x N x K)
///   weight_grad  im2col + gemm_tn(patches, dY) + db        roofline gemm_tn alone       (K x N over M)
///   input_grad   gemm_nt(dY, W) into dpatches + col2im     roofline gemm_nt alone       (M x K over N)
/// with M = m*OH*OW, N = out_channels, K = k*k*C; useful FLOPs 2*M*N*K for each pass. (conv1 is
/// the first layer: training never runs its input gradient; it is measured for completeness and its
/// line says "in_training":false.)
///
/// Method: 3 warm-up calls of the pass and of its GEMM, then --repeats rounds, each timing
/// --iterations calls of the pass then --iterations calls of the GEMM, the execution space fenced
/// before each timer stops; medians (and best) of the rounds, and the median of the per-round
/// ratios. --iterations 0 (default) picks the count once so that a sample lasts about 2 ms.
/// The outputs of the pass and of its GEMM alone are compared bit for bit (exit 1 if they differ).
/// --smoke: two tiny layers, micro-batch 2, 1 warm-up call and 1 round of 1 call (CTest).
#include <reprosgd/reprosgd.hpp>

#include "bench_common.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Space = Kokkos::DefaultExecutionSpace;
using Mem = Space::memory_space;

struct Args {
  std::vector<long> micro_batches{32, 128};
  int repeats = 9;
  long iterations = 0;  // 0: about 2 ms per sample
  bool smoke = false;
};

struct Layer {
  const char* name;
  reprosgd::Conv2D conv;
  bool first;  // the model's first layer: no input gradient in training
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

/// Deterministic values in [-1, 1) (a linear congruential sequence), copied to the space's memory.
void fill(const reprosgd::Buffer<Mem>& v, std::uint32_t seed) {
  auto h = Kokkos::create_mirror_view(v);
  std::uint32_t s = seed * 2654435761u + 12345u;
  for (std::size_t i = 0; i < h.extent(0); ++i) {
    s = s * 1664525u + 1013904223u;
    h(i) = static_cast<float>(static_cast<int>(s >> 8) - (1 << 23)) * 0x1p-23f;
  }
  Kokkos::deep_copy(v, h);
}

/// True when the n floats at a and b (in the space's memory) have the same bits.
bool same_bits(const float* a, const float* b, long n) {
  using U = Kokkos::View<const float*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  auto ha = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), U(a, n));
  auto hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), U(b, n));
  return std::memcmp(ha.data(), hb.data(), static_cast<std::size_t>(n) * sizeof(float)) == 0;
}

struct Timing {
  double median = 0, best = 0, gemm_median = 0, gemm_best = 0, ratio_paired = 0;
  long iterations = 0;
};

/// Rounds of `iters` calls of the pass, then `iters` calls of its GEMM, fenced; see the file comment.
template <class Kernel, class Gemm>
Timing time_pair(const Args& a, const Space& space, Kernel&& kernel, Gemm&& gemm) {
  const int warmup = a.smoke ? 1 : 3;
  for (int w = 0; w < warmup; ++w) kernel();
  for (int w = 0; w < warmup; ++w) gemm();
  space.fence();
  Timing t;
  t.iterations = a.iterations;
  if (t.iterations <= 0) {
    if (a.smoke) {
      t.iterations = 1;
    } else {
      Kokkos::Timer probe;
      kernel();
      space.fence();
      t.iterations = std::max(1L, static_cast<long>(2e-3 / std::max(probe.seconds(), 1e-7)));
    }
  }
  std::vector<double> ks, gs, ratios;
  for (int r = 0; r < a.repeats; ++r) {
    Kokkos::Timer tk;
    for (long c = 0; c < t.iterations; ++c) kernel();
    space.fence();
    const double k = tk.seconds() / static_cast<double>(t.iterations);
    Kokkos::Timer tg;
    for (long c = 0; c < t.iterations; ++c) gemm();
    space.fence();
    const double g = tg.seconds() / static_cast<double>(t.iterations);
    ks.push_back(k);
    gs.push_back(g);
    ratios.push_back(g / std::max(k, 1e-12));  // kernel GFLOP/s over GEMM GFLOP/s
  }
  t.median = reprosgd_bench::median_of(ks);
  t.best = *std::min_element(ks.begin(), ks.end());
  t.gemm_median = reprosgd_bench::median_of(gs);
  t.gemm_best = *std::min_element(gs.begin(), gs.end());
  t.ratio_paired = reprosgd_bench::median_of(ratios);
  return t;
}

void print(const Args& a, const Layer& l, long m, const char* pass, const char* kernels, const char* gemm_name,
           long M, long N, long K, const Timing& t, const std::string& device, const std::string& gemm_kernel) {
  const auto& c = l.conv;
  const double flop = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const double g = flop / t.median * 1e-9, gg = flop / t.gemm_median * 1e-9;
  const auto ctx = reprosgd_bench::run_context<Space>(1);
  std::printf(
      "{\"bench\":\"conv_bench\",\"layer\":\"%s\",\"shape\":\"%dx%dx%d->%d k%d s%d p%d\",\"micro_batch\":%ld,"
      "\"pass\":\"%s\",\"kernels\":\"%s\",\"gemm\":\"%s\",\"in_training\":%s,\"M\":%ld,\"N\":%ld,\"K\":%ld,"
      "\"gflops\":%.2f,\"gemm_gflops\":%.2f,\"ratio\":%.3f,\"ratio_paired\":%.3f,\"ms\":%.4f,\"gemm_ms\":%.4f,"
      "\"gflops_best\":%.2f,\"gemm_gflops_best\":%.2f,\"repeats\":%d,\"iterations\":%ld,\"backend\":\"%s\","
      "\"threads\":%d,\"ranks\":%d,\"gemm_kernel\":\"%s\",\"device\":\"%s\",\"git\":\"%s\"}\n",
      l.name, c.input.channels, c.input.height, c.input.width, c.out_channels, c.kernel, c.stride, c.padding, m, pass,
      kernels, gemm_name, std::strcmp(pass, "input_grad") == 0 && l.first ? "false" : "true", M, N, K, g, gg, g / gg,
      t.ratio_paired, t.median * 1e3, t.gemm_median * 1e3, flop / t.best * 1e-9, flop / t.gemm_best * 1e-9, a.repeats,
      t.iterations, ctx.backend, ctx.threads, ctx.ranks, gemm_kernel.c_str(), device.c_str(), ctx.git);
  std::fflush(stdout);
}

int run_layer(const Args& a, const Layer& l, long m, const std::string& device, const std::string& gemm_kernel) {
  using namespace reprosgd;
  const Conv2D& conv = l.conv;
  const Space space;
  const int width = conv.input_width();
  const long M = conv.patch_rows(m), N = conv.out_channels, K = static_cast<long>(conv.kernel) * conv.kernel * conv.input.channels;
  const Dense d = conv.patch_layer();
  if (d.chunks() != 1 || conv.pointwise()) {
    std::fprintf(stderr, "conv_bench: %s: expected one channel chunk and a non-pointwise kernel\n", l.name);
    return 1;
  }

  const Buffer<Mem> x("x", static_cast<std::size_t>(m * width)), y("y", static_cast<std::size_t>(M * N)),
      y_gemm("y_gemm", static_cast<std::size_t>(M * N)), gy("gy", static_cast<std::size_t>(M * N)),
      gx("gx", static_cast<std::size_t>(m * width)), params("params", conv.parameter_count(width)),
      gparams("gparams", conv.parameter_count(width)), gw_gemm("gw_gemm", static_cast<std::size_t>(K * N)),
      scratch("scratch", conv.scratch_size(width, m)), gpatch("gpatch", static_cast<std::size_t>(M * K)),
      gpatch_gemm("gpatch_gemm", static_cast<std::size_t>(M * K));
  fill(x, 1);
  fill(gy, 2);
  const LayerContext<Space, PhiloxStream> ctx{space, PhiloxStream(7), 0, 0, 0, true};
  conv.initialize(ctx, params, width);
  space.fence();

  const MatrixRef<Mem> patches(scratch.data(), M, K), w(params.data(), K, N), gyp(gy.data(), M, N),
      gw(gw_gemm.data(), K, N), gp(gpatch.data(), M, K), gp_gemm(gpatch_gemm.data(), M, K),
      ym(y_gemm.data(), M, N), xm(x.data(), m, width), yo(y.data(), m, M / m * N);
  const BufferRef<Mem> b(params.data() + K * N, N);
  // The patch matrix the GEMMs alone read: im2col's, as the passes compute it.
  im2col(space, conv.geometry(), m, x.data(), scratch.data());
  space.fence();

  // (a) forward: im2col + gemm_nn_bias, through Conv2D::forward itself.
  const Timing tf = time_pair(
      a, space, [&] { conv.forward(ctx, params, xm, yo, scratch); }, [&] { gemm_nn_bias(space, patches, w, b, ym); });
  // (b) weight gradient: im2col + Dense::weight_gradients (gemm_tn, then the bias gradient).
  const Timing tw = time_pair(
      a, space,
      [&] {
        im2col(space, conv.geometry(), m, x.data(), scratch.data());
        d.weight_gradients(space, patches, gyp, gparams);
      },
      [&] { gemm_tn(space, patches, gyp, gw); });
  // (c) input gradient: gemm_nt of dY and W into the patch gradient, then col2im.
  const Timing ti = time_pair(
      a, space,
      [&] {
        gemm_nt(space, gyp, w, gp);
        col2im(space, conv.geometry(), m, gpatch.data(), gx.data());
      },
      [&] { gemm_nt(space, gyp, w, gp_gemm); });
  space.fence();

  // The pass and its GEMM alone computed the same floats (the bench times what it claims to).
  if (!same_bits(y.data(), y_gemm.data(), M * N) || !same_bits(gparams.data(), gw_gemm.data(), K * N) ||
      !same_bits(gpatch.data(), gpatch_gemm.data(), M * K)) {
    std::fprintf(stderr, "conv_bench: %s m=%ld: a pass and its GEMM alone give different bits\n", l.name, m);
    return 1;
  }

  print(a, l, m, "forward", "im2col+gemm_nn_bias", "gemm_nn_bias", M, N, K, tf, device, gemm_kernel);
  print(a, l, m, "weight_grad", "im2col+gemm_tn+bias_gradient", "gemm_tn", M, N, K, tw, device, gemm_kernel);
  print(a, l, m, "input_grad", "gemm_nt+col2im", "gemm_nt", M, N, K, ti, device, gemm_kernel);
  return 0;
}

std::vector<long> parse_list(const std::string& s) {
  std::vector<long> out;
  for (const char* p = s.c_str(); *p;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p) return {};
    out.push_back(v);
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  Args a;
  for (reprosgd_bench::CommandLine cl(argc, argv); cl.next();) {
    const std::string& s = cl.arg();
    if (s == "--smoke") a.smoke = true;
    else if (s == "--micro-batch") a.micro_batches = parse_list(cl.value());
    else if (s == "--repeats") a.repeats = cl.int_value();
    else if (s == "--iterations") a.iterations = cl.long_value();
    else if (!cl.kokkos_option()) {
      std::fprintf(stderr, "conv_bench: unknown option %s\nusage: %s [--micro-batch 32,128] [--repeats 9] "
                           "[--iterations N] [--smoke]\n", s.c_str(), argv[0]);
      return 2;
    }
  }
  const bool bad_batch = a.micro_batches.empty() ||
                         std::any_of(a.micro_batches.begin(), a.micro_batches.end(), [](long m) { return m <= 0; });
  if (a.repeats <= 0 || a.iterations < 0 || bad_batch) {
    std::fprintf(stderr, "conv_bench: --repeats and --micro-batch (a comma-separated list) must be positive, "
                         "--iterations not negative\n");
    return 2;
  }
  std::vector<Layer> layers{{"conv1", reprosgd::Conv2D{{1, 28, 28}, 32, 3, 1, 1}, true},
                            {"conv2", reprosgd::Conv2D{{32, 14, 14}, 64, 3, 1, 1}, false}};
  if (a.smoke) {
    a.repeats = 1;
    a.micro_batches = {2};
    layers = {{"conv1", reprosgd::Conv2D{{1, 6, 6}, 4, 3, 1, 1}, true},
              {"conv2", reprosgd::Conv2D{{4, 3, 3}, 8, 3, 1, 1}, false}};
  }
  const std::string device = cpu_model(), gemm_kernel = reprosgd::host_gemm_kernel_name();
  for (const Layer& l : layers)
    for (const long m : a.micro_batches)
      if (const int rc = run_layer(a, l, m, device, gemm_kernel)) return rc;
  return 0;
}
