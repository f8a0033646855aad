// SPDX-License-Identifier: BSD-3-Clause
/// @file A Kokkos Tools library that times every parallel_for, parallel_reduce and parallel_scan by
/// its label and prints the totals to stderr when Kokkos finalizes: where a training step's time
/// goes, kernel by kernel (bench/README.md, "Where the micro-batch-32 step goes").
///
///     KOKKOS_PROFILE_LIBRARY=build/bench/libreprosgd_kernel_times.so \
///     REPROSGD_KERNEL_TIMES_SPLIT='reprosgd::gemm(host)=15,reprosgd::Exact::speculate=5' \
///         build/bench/train_bench --kokkos-threads=1 --micro-batch 32
///
/// REPROSGD_KERNEL_TIMES_SPLIT (optional) gives labels called in a fixed cycle (15 GEMMs per
/// micro-batch of the 784-512-512-10 MLP): their calls are reported apart, as "LABEL #i" for the
/// call index modulo the period. Host backends only (the clock is read at the kernel's launch and
/// end, which on a device are asynchronous). Not linked into anything: a plain shared library.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

struct Totals {
  double seconds = 0.0;
  long calls = 0;
};

std::map<std::string, Totals>& totals() {
  static std::map<std::string, Totals> t;
  return t;
}
std::map<std::string, std::pair<long, long>>& splits() {  // label -> (period, calls so far)
  static std::map<std::string, std::pair<long, long>> s;
  return s;
}
std::vector<std::pair<std::string, clock_type::time_point>>& open_kernels() {
  static std::vector<std::pair<std::string, clock_type::time_point>> k;
  return k;
}

void begin(const char* name, std::uint64_t* id) {
  std::string key = name;
  if (const auto it = splits().find(key); it != splits().end())
    key += " #" + std::to_string(it->second.second++ % it->second.first);
  open_kernels().emplace_back(std::move(key), clock_type::now());
  *id = open_kernels().size();
}

void end(std::uint64_t) {
  const auto now = clock_type::now();
  auto& [key, start] = open_kernels().back();
  Totals& t = totals()[key];
  t.seconds += std::chrono::duration<double>(now - start).count();
  ++t.calls;
  open_kernels().pop_back();
}

}  // namespace

extern "C" void kokkosp_init_library(int, std::uint64_t, std::uint32_t, void*) {
  const char* spec = std::getenv("REPROSGD_KERNEL_TIMES_SPLIT");
  for (std::string rest = spec ? spec : ""; !rest.empty();) {
    const std::size_t comma = rest.find(',');
    const std::string item = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const std::size_t eq = item.rfind('=');
    const long period = eq == std::string::npos ? 0 : std::atol(item.c_str() + eq + 1);
    if (period > 0) splits()[item.substr(0, eq)] = {period, 0};
  }
}
extern "C" void kokkosp_begin_parallel_for(const char* name, std::uint32_t, std::uint64_t* id) { begin(name, id); }
extern "C" void kokkosp_end_parallel_for(std::uint64_t id) { end(id); }
extern "C" void kokkosp_begin_parallel_reduce(const char* name, std::uint32_t, std::uint64_t* id) { begin(name, id); }
extern "C" void kokkosp_end_parallel_reduce(std::uint64_t id) { end(id); }
extern "C" void kokkosp_begin_parallel_scan(const char* name, std::uint32_t, std::uint64_t* id) { begin(name, id); }
extern "C" void kokkosp_end_parallel_scan(std::uint64_t id) { end(id); }

extern "C" void kokkosp_finalize_library() {
  std::vector<std::pair<double, std::string>> order;
  double all = 0.0;
  for (const auto& [key, t] : totals()) {
    order.emplace_back(t.seconds, key);
    all += t.seconds;
  }
  std::sort(order.rbegin(), order.rend());
  std::fprintf(stderr, "kernel_times: %.4f s in kernels\n", all);
  for (const auto& [seconds, key] : order) {
    const Totals& t = totals()[key];
    std::fprintf(stderr, "kernel_times: %9.4f s %5.1f%% %8ld calls %9.4f ms/call  %s\n", seconds,
                 all > 0 ? 100.0 * seconds / all : 0.0, t.calls, 1e3 * seconds / static_cast<double>(t.calls), key.c_str());
  }
}
