// SPDX-License-Identifier: BSD-3-Clause
/// @file testing::find_nondeterminism: run a few training steps of a user's model under several
/// execution variants (Serial and a threaded host space, 1 and N threads, a GPU) and name the first
/// layer whose forward output, input gradient or parameter gradient differs between them, or
/// between two runs of the same variant — the layer that breaks the contract (a float atomic, a
/// `parallel_reduce`, a thread-count-dependent loop). docs/diagnosis.md, "Find the layer".
///
/// Each variant trains its own copy of the model (made by the user's factory in the variant's
/// memory space, initialised from the same seed) on the same synthetic micro-batches, with plain
/// SGD on the summed micro-batch gradient: everything but the model's own layers is this library's
/// deterministic arithmetic, so any difference comes from a layer. Within a step the comparison
/// follows the computation: forward outputs from the first layer to the last (the first that
/// differs had equal inputs), then, when every output agrees, backward from the last layer to the
/// first (the first whose gradients differ had an equal output gradient).
#pragma once

#include <reprosgd/concepts/layer_context.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/loss.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace testing {

/// How find_nondeterminism exercises the model.
struct NondeterminismOptions {
  long rows = 32;            ///< samples per micro-batch
  long micro_batches = 2;    ///< micro-batches per step, their gradients summed in order
  long steps = 3;            ///< steps (forward, backward, SGD update)
  int repeats = 2;           ///< runs of each variant, compared with each other (run-to-run nondeterminism)
  std::uint64_t seed = 0;    ///< parameters, inputs, labels and dropout
  float learning_rate = 0.05f;
};

/// The first difference found: which run, where in the step, which tensor, which elements.
struct Divergence {
  std::string variant_a, variant_b;  ///< the two runs that differ ("serial", "openmp #2")
  std::uint64_t step = 0;
  long micro_batch = 0;              ///< within the step
  std::size_t layer = 0;
  std::string layer_description;     ///< Sequential::describe()
  std::string pass;                  ///< "forward" or "backward"
  std::string tensor;                ///< "output", "input gradient" or "parameter gradient"
  std::size_t first = 0;             ///< the first differing element (row-major)
  std::size_t count = 0;             ///< how many elements differ
  std::size_t size = 0;              ///< of how many
  float a = 0.0f, b = 0.0f;          ///< the first differing element's values
};

/// What find_nondeterminism found.
struct NondeterminismReport {
  std::vector<std::string> runs;         ///< every run compared, in order
  std::optional<Divergence> divergence;  ///< none: every layer agreed in every run
  std::uint64_t steps = 0;
  std::size_t layers = 0;

  [[nodiscard]] bool deterministic() const noexcept { return !divergence.has_value(); }
  /// One paragraph: "no layer differs ..." or the layer, the pass, the tensor and the elements.
  [[nodiscard]] std::string message() const {
    std::string who;
    for (const auto& r : runs) who += (who.empty() ? "" : ", ") + r;
    if (!divergence)
      return "reprosgd::testing::find_nondeterminism: no layer differs: " + std::to_string(layers) + " layers, " +
             std::to_string(steps) + " steps, runs " + who;
    const Divergence& d = *divergence;
    auto value = [](float v) {
      std::uint32_t u;
      std::memcpy(&u, &v, sizeof u);
      char buf[64];
      std::snprintf(buf, sizeof buf, "0x%08x (%.9g)", static_cast<unsigned>(u), static_cast<double>(v));
      return std::string(buf);
    };
    const std::string where = ", micro-batch " + std::to_string(d.micro_batch);
    return "reprosgd::testing::find_nondeterminism: layer " + std::to_string(d.layer) + " (" + d.layer_description +
           ") is not deterministic: its " + d.tensor + " differs in the " + d.pass + " pass between " + d.variant_a +
           " and " + d.variant_b + " (step " + std::to_string(d.step) + where + "; " + std::to_string(d.count) + " of " +
           std::to_string(d.size) + " elements, the first, element " + std::to_string(d.first) + ", is " + value(d.a) +
           " vs " + value(d.b) + "); every layer before it in this pass agreed";
  }
};

namespace detail {

/// What one run recorded, on the host: per step, micro-batch and layer the forward output, the
/// input gradient (empty for layer 0) and the parameter gradient (empty for a layer without parameters).
struct RunRecord {
  std::string name;
  struct Step {
    std::vector<std::vector<std::vector<float>>> output, input_gradient, parameter_gradient;  // [micro-batch][layer]
  };
  std::vector<Step> steps;
};

template <class View>
std::vector<float> to_host(const View& v, std::size_t count) {
  std::vector<float> out(count);
  if (count == 0) return out;
  const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::memcpy(out.data(), host.data(), count * sizeof(float));
  return out;
}

/// A float in [-1, 1) from a counter: splitmix64, the same on every machine and compiler.
inline float synthetic_value(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed * 0x9e3779b97f4a7c15ULL + i + 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<float>(static_cast<std::int64_t>(z >> 40) - (1LL << 23)) * (1.0f / static_cast<float>(1 << 23));
}

// The kernels live in functions templated on the space and Views alone: nvcc refuses a device lambda
// in a function template instantiated with a closure type (the user's make_model lambda).

/// sum += g, element by element. @deterministic
template <class ExecSpace, class Sum, class Grad>
void add_into(const ExecSpace& space, const Sum& sum, const Grad& g) {
  Kokkos::parallel_for(
      "reprosgd::testing::add", Kokkos::RangePolicy<ExecSpace>(space, 0, g.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { sum(i) += g(i); });
  space.fence();
}

/// Plain SGD, p = p - lr * g: one multiply and one subtract per element, the same on every backend.
template <class ExecSpace, class Params, class Grad>
void sgd_update(const ExecSpace& space, const Params& params, const Grad& g, float lr) {
  Kokkos::parallel_for(
      "reprosgd::testing::sgd", Kokkos::RangePolicy<ExecSpace>(space, 0, g.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { params(i) = params(i) - lr * g(i); });
  space.fence();
}

template <class ExecSpace, class MakeModel>
RunRecord record_run(std::string name, const ExecSpace& space, MakeModel& make_model, const NondeterminismOptions& o,
                     std::vector<std::string>& descriptions) {
  using memory_space = typename ExecSpace::memory_space;
  auto model = make_model(space);
  static_assert(std::is_same_v<typename decltype(model)::memory_space, memory_space>,
                "reprosgd::testing::find_nondeterminism: make_model(space) must return a model in space's memory "
                "space (make_sequential<typename decltype(space)::memory_space>(...))");
  const std::size_t depth = model.layer_count();
  descriptions = model.describe();
  const PhiloxStream rng(o.seed);
  model.initialize(space, rng);
  auto ws = model.make_workspace(o.rows);
  model.keep_input_gradients(ws);
  const long in = model.input_width(), classes = model.output_width(), rows = o.rows;
  const std::size_t n_params = model.parameter_count();
  Buffer<memory_space> grads("reprosgd::testing::grads", n_params), sum("reprosgd::testing::sum", n_params);
  Kokkos::View<std::int32_t*, memory_space> labels("reprosgd::testing::labels", rows);
  Kokkos::View<float*, memory_space> row_loss("reprosgd::testing::row_loss", rows);
  Kokkos::View<std::int32_t*, memory_space> row_correct("reprosgd::testing::row_correct", rows);
  auto input_host = Kokkos::create_mirror_view(ws.act[0]);
  auto labels_host = Kokkos::create_mirror_view(labels);

  RunRecord rec;
  rec.name = std::move(name);
  for (long s = 0; s < o.steps; ++s) {
    RunRecord::Step st;
    Kokkos::deep_copy(space, sum, 0.0f);
    for (long u = 0; u < o.micro_batches; ++u) {
      const auto sample0 = static_cast<std::uint64_t>((s * o.micro_batches + u) * rows);
      space.fence();
      for (long r = 0; r < rows; ++r) {
        for (long j = 0; j < in; ++j)
          input_host(r, j) = synthetic_value(o.seed, (sample0 + static_cast<std::uint64_t>(r)) * static_cast<std::uint64_t>(in) +
                                                         static_cast<std::uint64_t>(j));
        labels_host(r) = static_cast<std::int32_t>((sample0 + static_cast<std::uint64_t>(r)) % static_cast<std::uint64_t>(classes));
      }
      Kokkos::deep_copy(space, ws.act[0], input_host);
      Kokkos::deep_copy(space, labels, labels_host);
      const LayerContext<ExecSpace, PhiloxStream> ctx{space, rng, 0, static_cast<std::uint64_t>(s),
                                                      static_cast<std::uint64_t>(u * rows), true};
      model.forward(ctx, ws, rows);
      const MatrixRef<memory_space> out(ws.act[depth].data(), rows, classes), grad(ws.grad_out.data(), rows, classes);
      softmax_cross_entropy(space, out, labels, rows, 1.0f / static_cast<float>(rows * o.micro_batches), grad, row_loss,
                            row_correct);
      model.backward(ctx, ws, rows, grads);
      add_into(space, sum, grads);  // the step's gradient: the micro-batches' added in order
      const std::vector<float> g = to_host(grads, n_params);
      std::vector<std::vector<float>> outs, gins, pgs;
      for (std::size_t l = 0; l < depth; ++l) {
        outs.push_back(to_host(ws.act[l + 1], static_cast<std::size_t>(rows * model.width(l + 1))));
        gins.push_back(l == 0 ? std::vector<float>{}
                              : to_host(ws.input_gradients[l], static_cast<std::size_t>(rows * model.width(l))));
        pgs.emplace_back(g.begin() + static_cast<long>(model.parameter_offset(l)),
                         g.begin() + static_cast<long>(model.parameter_offset(l + 1)));
      }
      st.output.push_back(std::move(outs));
      st.input_gradient.push_back(std::move(gins));
      st.parameter_gradient.push_back(std::move(pgs));
    }
    sgd_update(space, model.parameters(), sum, o.learning_rate);
    rec.steps.push_back(std::move(st));
  }
  return rec;
}

/// The first differing element of two equally long arrays (bitwise), as (index, count); count 0: equal.
inline std::pair<std::size_t, std::size_t> bitwise_difference(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t first = 0, count = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      if (count == 0) first = i;
      ++count;
    }
  return {first, count};
}

/// The first divergence between two runs of the same model, in the order the steps computed them.
inline std::optional<Divergence> first_divergence(const RunRecord& A, const RunRecord& B,
                                                  const std::vector<std::string>& descriptions) {
  auto make = [&](std::uint64_t s, long u, std::size_t l, const char* pass, const char* tensor,
                  const std::vector<float>& a, const std::vector<float>& b) -> std::optional<Divergence> {
    const auto [first, count] = bitwise_difference(a, b);
    if (count == 0) return std::nullopt;
    return Divergence{A.name, B.name, s, u, l, descriptions[l], pass, tensor, first, count, a.size(), a[first], b[first]};
  };
  for (std::size_t s = 0; s < A.steps.size(); ++s) {
    const auto& a = A.steps[s];
    const auto& b = B.steps[s];
    for (std::size_t u = 0; u < a.output.size(); ++u) {
      for (std::size_t l = 0; l < a.output[u].size(); ++l)
        if (auto d = make(s, static_cast<long>(u), l, "forward", "output", a.output[u][l], b.output[u][l])) return d;
      for (std::size_t l = a.output[u].size(); l-- > 0;) {
        // Backward computes a layer's parameter gradient and its input gradient from the same output gradient.
        if (auto d = make(s, static_cast<long>(u), l, "backward", "parameter gradient", a.parameter_gradient[u][l],
                          b.parameter_gradient[u][l]))
          return d;
        if (auto d = make(s, static_cast<long>(u), l, "backward", "input gradient", a.input_gradient[u][l],
                          b.input_gradient[u][l]))
          return d;
      }
    }
  }
  return std::nullopt;
}

/// A variant's name: the execution space's, numbered for repeats.
template <class ExecSpace>
std::string run_name(const ExecSpace& space, int repeat, int repeats) {
  std::string name = ExecSpace::name();
  const int threads = reprosgd::detail::concurrency(space);
  name += " (" + std::to_string(threads) + (threads == 1 ? " thread)" : " threads)");
  if (repeats > 1) name += " run " + std::to_string(repeat + 1);
  return name;
}

}  // namespace detail

/**
 * Train `make_model`'s model for a few steps under each execution-space instance in `variants`
 * (each `repeats` times) and report the first layer whose forward output, input gradient or
 * parameter gradient differs between any run and the first, bit for bit — or that none does.
 *
 * @code
 * auto report = reprosgd::testing::find_nondeterminism(
 *     [](auto space) {
 *       return reprosgd::make_sequential<typename decltype(space)::memory_space>(
 *           reprosgd::Dense{16, 32}, MyLayer{}, reprosgd::Dense{32, 4});
 *     },
 *     {}, Kokkos::Serial(), Kokkos::DefaultExecutionSpace());
 * CHECK_MESSAGE(report.deterministic(), report.message());
 * @endcode
 *
 * Differences between backends are only found in what the variants run: compare a one-thread
 * space with a threaded one (Serial against OpenMP or Threads with 2 or more threads), and a GPU
 * space where there is one. Rank counts are the trace's job (train_mlp --trace on 1, 2 and 3
 * ranks, reprosgd_diff: docs/diagnosis.md).
 *
 * @param make_model callable as make_model(space) for each variant's space, returning a
 *                   BasicSequential in that space's memory space (the same layers every time)
 * @param options    rows, micro-batches, steps, repeats, seed, learning rate
 * @param variants   Kokkos execution-space instances (at least one; with one, only repeats are compared)
 * @throws config_error on invalid options
 */
template <class MakeModel, class... Spaces>
[[nodiscard]] NondeterminismReport find_nondeterminism(MakeModel&& make_model, const NondeterminismOptions& options,
                                                       const Spaces&... variants) {
  static_assert(sizeof...(Spaces) > 0, "reprosgd::testing::find_nondeterminism: give at least one execution space");
  static_assert((Kokkos::is_execution_space<Spaces>::value && ...),
                "reprosgd::testing::find_nondeterminism: every variant must be a Kokkos execution-space instance");
  const std::string who = "reprosgd::testing::find_nondeterminism: ";
  if (options.rows <= 0) throw config_error(who + "rows must be > 0, got " + std::to_string(options.rows));
  if (options.micro_batches <= 0)
    throw config_error(who + "micro_batches must be > 0, got " + std::to_string(options.micro_batches));
  if (options.steps <= 0) throw config_error(who + "steps must be > 0, got " + std::to_string(options.steps));
  if (options.repeats <= 0) throw config_error(who + "repeats must be > 0, got " + std::to_string(options.repeats));
  if (!(options.learning_rate >= 0.0f) || options.learning_rate > 1e30f)
    throw config_error(who + "learning_rate must be finite and >= 0");
  NondeterminismReport report;
  report.steps = static_cast<std::uint64_t>(options.steps);
  std::vector<std::string> descriptions;
  std::optional<detail::RunRecord> reference;
  auto run_variant = [&](const auto& space) {
    for (int r = 0; r < options.repeats && !report.divergence; ++r) {
      detail::RunRecord rec = detail::record_run(detail::run_name(space, r, options.repeats), space, make_model, options,
                                                 descriptions);
      report.runs.push_back(rec.name);
      report.layers = descriptions.size();
      if (!reference)
        reference = std::move(rec);
      else
        report.divergence = detail::first_divergence(*reference, rec, descriptions);
    }
  };
  (run_variant(variants), ...);
  return report;
}

/**
 * find_nondeterminism() on the variants every build has: Kokkos::Serial (one thread; where the
 * build has no Serial, a second instance of the host space, so that only repeats are compared),
 * the default host space with the threads Kokkos was given, and the default execution space when
 * it is a device (a GPU build).
 */
template <class MakeModel>
[[nodiscard]] NondeterminismReport find_nondeterminism_on_every_space(MakeModel&& make_model,
                                                                      const NondeterminismOptions& options) {
#if defined(KOKKOS_ENABLE_SERIAL)
  const Kokkos::Serial one_thread;
#else
  const Kokkos::DefaultHostExecutionSpace one_thread;
#endif
  if constexpr (std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>)
    return find_nondeterminism(make_model, options, one_thread, Kokkos::DefaultHostExecutionSpace());
  else
    return find_nondeterminism(make_model, options, one_thread, Kokkos::DefaultHostExecutionSpace(),
                               Kokkos::DefaultExecutionSpace());
}

}  // namespace testing
REPROSGD_END_NAMESPACE
