// SPDX-License-Identifier: BSD-3-Clause
/// @file End-to-end training throughput and memory per rank of a wide ReLU MLP under data, model
/// and hybrid parallelism; one JSON line per run (printed by world rank 0).
///
///   mpiexec -n P build/bench/parallel_bench --parallel data|model|hybrid [--grid PDxPM]
///       [--layers 784,4096,4096,10] [--batch 128] [--micro-batch 32] [--optimizer adam|sgd]
///       [--feature-chunk 64] [--steps 5] [--repeats 5] [--kokkos-threads=N]
///       [--fault-tolerance none|shrink] [--buddy-every 50]
///   build/bench/parallel_bench --smoke     (tiny model; data, model and hybrid in turn on the
///                                           ranks it has, and their fingerprints must agree)
///
/// data is DataParallel<DefaultHostExecutionSpace, Exact> (every rank holds the whole model),
/// model is Hybrid on the 1 x P grid, hybrid is Hybrid on --grid (default: as square as P allows).
/// Timing as train_bench: the wall time at the end of every step (a callback), warm-up steps, then
/// the median and the best of --repeats segments of --steps steps. Memory: the parameters and
/// optimizer state buffers this rank holds (max over ranks), against the whole model's (what
/// every rank holds under data parallelism), and the peak RSS (max over ranks). The fingerprint
/// of the trained model is the same for every policy and grid (same seed, same steps).
///
/// --fault-tolerance shrink (model and hybrid; a build with ULFM, launched with
/// mpiexec --with-ft ulfm) trains with UlfmHybrid and ShrinkAndContinue, so the Trainer snapshots
/// every rank's shard to its buddy at the start of fit() (before the timing) and every
/// --buddy-every steps (TrainerOptions::buddy_every): the failure-free cost of being ready to lose
/// a rank. Instantiated for the 2-hidden-layer model (4 widths) with Adam only (compile time).
/// The JSON then also gives the mean rate over all timed steps (refreshes included) and the
/// median time of the steps that carried a refresh against the others.
#include <reprosgd/reprosgd.hpp>
#if REPROSGD_HAS_MPI
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/hybrid.hpp>
#include <reprosgd/parallel/mpi_environment.hpp>
#endif
#if REPROSGD_HAS_ULFM
#include <reprosgd/parallel/ulfm_hybrid.hpp>
#endif


#include "bench_common.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using reprosgd_bench::median_of;
using reprosgd_bench::StepClock;
using reprosgd_bench::world_rank;
using reprosgd_bench::world_size;

struct Args {
  std::string layers = "784,4096,4096,10";
  long batch = 128;
  long micro_batch = 32;
  std::string optimizer = "adam";
  std::string parallel = "data";
  std::string grid;
  int feature_chunk = reprosgd::default_feature_chunk;
  long steps = 5;
  int repeats = 5;
  long warmup = 3;
  bool smoke = false;
  std::string fault_tolerance = "none";
  long buddy_every = 50;
};

// Max (or min) over all ranks of the job.
void reduce_all(std::vector<long long>& v, bool max) {
#if REPROSGD_HAS_MPI
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_LONG_LONG, max ? MPI_MAX : MPI_MIN,
                MPI_COMM_WORLD);
#else
  (void)v;
  (void)max;
#endif
}

std::vector<int> parse_layers(const std::string& text) {
  std::vector<int> w;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const int x = std::atoi(item.c_str());
    if (x <= 0 || std::to_string(x) != item)
      throw reprosgd::config_error("parallel_bench: --layers: '" + item + "' is not a positive integer");
    w.push_back(x);
  }
  if (w.size() < 3 || w.size() > 5)
    throw reprosgd::config_error("parallel_bench: --layers needs 3 to 5 widths (input, 1 to 3 hidden, output)");
  return w;
}
std::string layers_text(const std::vector<int>& w) {
  std::string s;
  for (std::size_t i = 0; i < w.size(); ++i) s += (i ? "-" : "") + std::to_string(w[i]);
  return s;
}

// H hidden (Dense, ReLU) blocks and an output Dense.
template <std::size_t H>
auto make_mlp(const std::vector<int>& w, int chunk) {
  using namespace reprosgd;
  auto hidden = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple_cat(std::make_tuple(Dense{w[I], w[I + 1], Init::he_normal, chunk}, ReLU{})...);
  }(std::make_index_sequence<H>{});
  auto all = std::tuple_cat(hidden, std::make_tuple(Dense{w[H], w[H + 1], Init::he_normal, chunk}));
  return std::apply([](auto... layers) { return Sequential<decltype(layers)...>(layers...); }, all);
}

// One timed training run under `par` (with the fault policy `Fault`); prints its JSON line on
// world rank 0 and returns the fingerprint of the trained model.
template <class Fault = reprosgd::Abort, class Par, class Model, class Opt>
std::string run(const Args& a, const std::string& parallel, const std::string& grid, Par par, Model model,
                const Opt& opt, const reprosgd::Dataset<Kokkos::HostSpace>& data, const std::string& model_text) {
  using namespace reprosgd;
  const long steps = a.smoke ? 2 : a.steps;
  const int repeats = a.smoke ? 1 : a.repeats;
  const long warmup = a.smoke ? 1 : a.warmup;
  const long total = warmup + steps * repeats;
  TrainerOptions o;
  o.global_batch = a.batch;
  o.micro_batch = a.micro_batch;
  o.steps = total;
  o.seed = 1;
  o.evaluate_each_epoch = false;
  o.buddy_every = a.buddy_every;
  using T = Trainer<Par, PhiloxStream, PortableBinaryFormat, Fault>;
  T trainer(o, std::move(par));
  auto state = trainer.start(model, opt);  // a model-parallel policy makes `model` this rank's shard
  StepClock clock;
  trainer.fit(model, opt, state, data, clock);
  const auto rates = reprosgd_bench::segment_rates(clock, warmup, steps, repeats, a.batch);
  // The mean rate over all timed steps (a refresh every buddy_every steps falls in some segments
  // only, which the median segment may skip), and the step intervals that carried a buddy
  // refresh: the refresh after step s (s % buddy_every == 0 steps done) runs between the clock
  // entries s-1 and s.
  const double first = clock.t[static_cast<std::size_t>(warmup - 1)], last = clock.t.back();
  const double mean_rate = static_cast<double>(steps * repeats * a.batch) / (last - first);
  std::vector<double> plain_ms, refresh_ms;
  for (long k = warmup; k < total; ++k) {
    const double ms = 1e3 * (clock.t[static_cast<std::size_t>(k)] - clock.t[static_cast<std::size_t>(k - 1)]);
    (T::buddy_snapshots && k % a.buddy_every == 0 ? refresh_ms : plain_ms).push_back(ms);
  }
  const double plain = median_of(plain_ms), refresh = median_of(refresh_ms);
  auto num = [](bool valid, const char* format, double x) {  // a JSON number, or null
    char b[64] = "null";
    if (valid) std::snprintf(b, sizeof b, format, x);
    return std::string(b);
  };
  const bool both = !plain_ms.empty() && !refresh_ms.empty();
  char ft[512];
  if constexpr (T::buddy_snapshots)
    std::snprintf(ft, sizeof ft,
                  "\"fault_tolerance\":\"shrink\",\"buddy_every\":%ld,\"refreshes_timed\":%zu,\"plain_step_ms\":%s,"
                  "\"refresh_step_ms\":%s,\"refresh_extra_ms\":%s,\"refresh_overhead_est\":%s,",
                  a.buddy_every, refresh_ms.size(), num(!plain_ms.empty(), "%.2f", plain).c_str(),
                  num(!refresh_ms.empty(), "%.2f", refresh).c_str(), num(both, "%.2f", refresh - plain).c_str(),
                  num(both, "%.4f", (refresh - plain) / (static_cast<double>(a.buddy_every) * plain)).c_str());
  else
    std::snprintf(ft, sizeof ft, "\"fault_tolerance\":\"none\",\"plain_step_ms\":%.2f,", plain);

  // Parameters and optimizer state buffers held by this rank (floats), and the number of state
  // buffers per parameter (Adam 2, SGD with momentum 1).
  long long floats = static_cast<long long>(model.parameter_count()), buffers = 0;
  state.optimizer.visit([&](const char*, const auto& x) {
    if constexpr (requires { x.extent(0); }) {
      floats += static_cast<long long>(x.extent(0));
      if (x.extent(0) > 0) ++buffers;
    }
  });
  std::vector<long long> mx{floats * 4, static_cast<long long>(model.parameter_count()), reprosgd_bench::peak_rss_kib(),
                            buffers};
  std::vector<long long> mn{floats * 4};
  reduce_all(mx, true);
  reduce_all(mn, false);
  const long long whole =
      static_cast<long long>(model.canonical_parameter_count()) * (1 + mx[3]) * static_cast<long long>(sizeof(float));
  const std::string fp = trainer.fingerprint(model, state).hex();  // collective: the whole model's
  const auto ctx = reprosgd_bench::run_context<typename Par::execution_space>(world_size());
  if (world_rank() == 0)
    std::printf(
        "{\"bench\":\"parallel\",\"model\":\"%s\",\"batch\":%ld,\"micro_batch\":%ld,\"optimizer\":\"%s\","
        "\"feature_chunk\":%d,\"parallel\":\"%s\",\"grid\":\"%s\",\"ranks\":%d,\"backend\":\"%s\",\"threads\":%d,"
        "\"samples_per_s\":%.2f,\"samples_per_s_best\":%.2f,\"samples_per_s_mean\":%.2f,\"step_ms\":%.1f,"
        "\"repeats\":%d,\"steps_per_repeat\":%ld,\"warmup_steps\":%ld,%s\"params_per_rank\":%lld,\"params_whole\":%zu,\"state_bytes_per_rank\":%lld,"
        "\"state_bytes_per_rank_min\":%lld,\"state_bytes_whole\":%lld,\"state_bytes_ratio\":%.4f,"
        "\"peak_rss_mib\":%.1f,\"fingerprint\":\"%s\",\"git\":\"%s\"}\n",
        model_text.c_str(), a.batch, a.micro_batch, opt.name(), a.feature_chunk, parallel.c_str(), grid.c_str(),
        ctx.ranks, ctx.backend, ctx.threads, rates.median, rates.best, mean_rate,
        1e3 * static_cast<double>(a.batch) / rates.median, repeats, steps, warmup, ft, mx[1],
        model.canonical_parameter_count(), mx[0], mn[0], whole, static_cast<double>(mx[0]) / static_cast<double>(whole),
        reprosgd_bench::kib_to_mib(mx[2]), fp.c_str(), ctx.git);
  std::fflush(stdout);
  return fp;
}

// The one model type the shrink variant is instantiated for.
using Mlp2 = decltype(make_mlp<2>(std::vector<int>{}, 0));

template <class Model, class Opt>
int with_model(const Args& a, const Model& model, const Opt& opt, const std::string& model_text,
               const reprosgd::Dataset<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  using Space = Kokkos::DefaultHostExecutionSpace;
  const int p = world_size();
#if REPROSGD_HAS_MPI
  using Data = DataParallel<Space, Exact>;
  using Grid = Hybrid<Space, Exact>;
  auto one = [&](const std::string& parallel) {
    if (parallel == "data") return run(a, parallel, GridShape{p, 1}.text(), Data{}, model, opt, data, model_text);
    const GridShape g = parallel == "model" ? GridShape{1, p}
                        : a.grid.empty()    ? GridShape::balanced(p)
                                            : GridShape::parse(a.grid);
    if (a.fault_tolerance == "shrink") {
#if REPROSGD_HAS_ULFM
      // Only this model and optimizer type: every Trainer instantiation costs compile time.
      if constexpr (std::is_same_v<Model, Mlp2> && std::is_same_v<Opt, Adam>)
        return run<ShrinkAndContinue>(a, parallel, g.text(), UlfmHybrid<Space, Exact>(g), model, opt, data, model_text);
      else
        throw config_error("parallel_bench: --fault-tolerance shrink is built for --optimizer adam and 4 --layers "
                           "widths (2 hidden layers) only");
#else
      throw config_error("parallel_bench: --fault-tolerance shrink needs an MPI with ULFM");
#endif
    }
    return run(a, parallel, g.text(), Grid(g), model, opt, data, model_text);
  };
  if (!a.smoke) {
    (void)one(a.parallel);
    return 0;
  }
  // Smoke: every policy on the ranks at hand; the trained models must be the same bits.
  const std::string fd = one("data"), fm = one("model"), fh = one("hybrid");
  if (fd != fm || fd != fh) {
    if (world_rank() == 0)
      std::fprintf(stderr, "parallel_bench: fingerprints differ: data %s, model %s, hybrid %s\n", fd.c_str(),
                   fm.c_str(), fh.c_str());
    return 1;
  }
  return 0;
#else
  if (a.parallel != "data")
    throw config_error("parallel_bench: --parallel " + a.parallel + " needs a build with MPI");
  (void)run(a, "data", "1x1", Serial<Space, Exact>{}, model, opt, data, model_text);
  return 0;
#endif
}

template <class Model>
int with_optimizer(const Args& a, const Model& model, const std::string& model_text,
                   const reprosgd::Dataset<Kokkos::HostSpace>& data) {
  using namespace reprosgd;
  if (a.optimizer == "sgd") return with_model(a, model, Sgd{{.lr = 0.01f, .momentum = 0.9f}}, model_text, data);
  return with_model(a, model, Adam{{.lr = 1e-3f}}, model_text, data);
}

int bench(Args a) {
  using namespace reprosgd;
  if (a.smoke) {
    // Two chunks per hidden layer, so a model-parallel run on 2+ ranks really splits them.
    // Micro-batches of 4, at least one per rank.
    a.layers = "784,96,96,10";
    a.micro_batch = 4;
    a.batch = 4L * std::max(4, world_size());
  }
  if (a.parallel != "data" && a.parallel != "model" && a.parallel != "hybrid")
    throw config_error("parallel_bench: --parallel must be data, model or hybrid, got " + a.parallel);
  if (!a.grid.empty() && a.parallel != "hybrid")
    throw config_error("parallel_bench: --grid needs --parallel hybrid (data is Px1, model 1xP)");
  if (a.optimizer != "adam" && a.optimizer != "sgd")
    throw config_error("parallel_bench: --optimizer must be adam or sgd, got " + a.optimizer);
  if (a.fault_tolerance != "none" && a.fault_tolerance != "shrink")
    throw config_error("parallel_bench: --fault-tolerance must be none or shrink, got " + a.fault_tolerance);
  if (a.fault_tolerance == "shrink" && a.parallel == "data" && !a.smoke)
    throw config_error("parallel_bench: --fault-tolerance shrink needs --parallel model or hybrid (buddy snapshots "
                       "are for sharded state; bench/recovery_bench.sh measures data parallelism's)");
  if (a.buddy_every <= 0) throw config_error("parallel_bench: --buddy-every must be positive");
  if (a.feature_chunk <= 0) throw config_error("parallel_bench: --feature-chunk must be positive");
  if (a.steps <= 0 || a.repeats <= 0 || a.warmup <= 0)
    throw config_error("parallel_bench: --steps, --repeats and --warmup must be positive");
  const std::vector<int> w = parse_layers(a.layers);
  const std::string text = layers_text(w);
  const auto data = make_synthetic_classification(1, static_cast<std::size_t>(a.batch * 50), w.front(), w.back(),
                                                  {.separation = 0.2f});
  switch (w.size() - 2) {
    case 1: return with_optimizer(a, make_mlp<1>(w, a.feature_chunk), text, data);
    case 2: return with_optimizer(a, make_mlp<2>(w, a.feature_chunk), text, data);
    default: return with_optimizer(a, make_mlp<3>(w, a.feature_chunk), text, data);
  }
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
    else if (s == "--layers") a.layers = cl.value();
    else if (s == "--batch") a.batch = cl.long_value();
    else if (s == "--micro-batch") a.micro_batch = cl.long_value();
    else if (s == "--optimizer") a.optimizer = cl.value();
    else if (s == "--parallel") a.parallel = cl.value();
    else if (s == "--grid") a.grid = cl.value();
    else if (s == "--feature-chunk") a.feature_chunk = cl.int_value();
    else if (s == "--steps") a.steps = cl.long_value();
    else if (s == "--repeats") a.repeats = cl.int_value();
    else if (s == "--warmup") a.warmup = cl.long_value();
    else if (s == "--fault-tolerance") a.fault_tolerance = cl.value();
    else if (s == "--buddy-every") a.buddy_every = cl.long_value();
    else if (!cl.kokkos_option()) {
      if (world_rank() == 0) std::fprintf(stderr, "parallel_bench: unknown option %s\n", s.c_str());
      return 2;
    }
  }
  try {
    return bench(a);
  } catch (const reprosgd::error& e) {
    if (world_rank() == 0) std::fprintf(stderr, "parallel_bench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    if (world_rank() == 0) std::fprintf(stderr, "parallel_bench: error: %s\n", e.what());
    return 1;
  }
}
