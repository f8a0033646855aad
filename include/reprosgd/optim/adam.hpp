// SPDX-License-Identifier: BSD-3-Clause
/// @file Adam and AdamW (decoupled weight decay), with bias correction from running products.
#pragma once

#include <reprosgd/concepts/optimizer.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/optim/describe.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
/// Adam's update; Decoupled selects AdamW (Loshchilov & Hutter, ICLR 2019).
template <bool Decoupled>
struct AdamImpl {
  struct Options {
    float lr = 1e-3f;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float eps = 1e-8f;
    float weight_decay = 0.0f;  ///< Adam: added to the gradient (L2); AdamW: decoupled decay
  };
  Options options;

  /// Per-run state: first and second moments, step count and the running products beta^t. The
  /// products are kept (not recomputed with pow) so that bias correction is a fixed sequence of
  /// multiplications, the same on every platform and after a restart.
  template <class MemSpace>
  struct state_type {
    Buffer<MemSpace> m, v;
    std::uint64_t steps = 0;
    double beta1_power = 1.0, beta2_power = 1.0;
    template <class F>
    void visit(F&& f) const {
      f("m", m);
      f("v", v);
      f("steps", steps);
      f("beta1_power", beta1_power);
      f("beta2_power", beta2_power);
    }
    template <class F>
    void visit(F&& f) {
      f("m", m);
      f("v", v);
      f("steps", steps);
      f("beta1_power", beta1_power);
      f("beta2_power", beta2_power);
    }
  };

  static constexpr const char* name() noexcept { return Decoupled ? "adamw" : "adam"; }
  [[nodiscard]] float base_lr() const noexcept { return options.lr; }
  [[nodiscard]] std::string describe() const {
    return describe_fields(name(), {{"lr", options.lr}, {"beta1", options.beta1}, {"beta2", options.beta2},
                                    {"eps", options.eps}, {"weight_decay", options.weight_decay}});
  }
  void check() const {
    const char* who = Decoupled ? "reprosgd::AdamW" : "reprosgd::Adam";
    check_positive(who, "lr", options.lr);
    check_in_range(who, "beta1", options.beta1, 0.0f, 1.0f, false);
    check_in_range(who, "beta2", options.beta2, 0.0f, 1.0f, false);
    check_positive(who, "eps", options.eps);
    check_non_negative(who, "weight_decay", options.weight_decay);
  }
  template <class MemSpace>
  [[nodiscard]] state_type<MemSpace> init(std::size_t n) const {
    return {Buffer<MemSpace>("reprosgd::Adam::m", n), Buffer<MemSpace>("reprosgd::Adam::v", n), 0, 1.0, 1.0};
  }

  /// What one step applies to every element: the hyperparameters and the bias corrections.
  struct Coefficients {
    float c1, c2, b1, b2, eps, wd, one_minus_b1, one_minus_b2, lr;
  };
  /// Advance the state's scalars by one step and return the step's coefficients.
  template <class MemSpace>
  Coefficients advance(state_type<MemSpace>& state, float lr) const {
    state.beta1_power *= static_cast<double>(options.beta1);
    state.beta2_power *= static_cast<double>(options.beta2);
    ++state.steps;
    // Host-side scalars in double, rounded once to float; IEEE sqrt is correctly rounded everywhere.
    return {static_cast<float>(1.0 / (1.0 - state.beta1_power)), static_cast<float>(1.0 / (1.0 - state.beta2_power)),
            options.beta1, options.beta2, options.eps, options.weight_decay, 1.0f - options.beta1,
            1.0f - options.beta2, lr};
  }
  /// The update of element i (the one sequence of IEEE operations of step() and step_ranges()).
  template <class P, class G, class M>
  KOKKOS_INLINE_FUNCTION static void update(const Coefficients& k, long i, const P& params, const G& grads, const M& m,
                                            const M& v) {
    float p = params(i);
    float g = grads(i);
    // A plain `if` on the template constant (it folds away): nvcc refuses a device lambda whose
    // first use of a captured variable (wd, lr) is inside `if constexpr`.
    if (Decoupled) {
      if (k.wd != 0.0f) p = p - k.lr * k.wd * p;
    } else {
      if (k.wd != 0.0f) g = g + k.wd * p;
    }
    const float mi = k.b1 * m(i) + k.one_minus_b1 * g;
    const float vi = k.b2 * v(i) + k.one_minus_b2 * (g * g);
    m(i) = mi;
    v(i) = vi;
    const float m_hat = mi * k.c1;
    const float v_hat = vi * k.c2;
    params(i) = p - k.lr * m_hat / (detail::sqrt(v_hat) + k.eps);
  }

  template <class ExecSpace, class MemSpace, class P, class G>
  void step(const ExecSpace& space, state_type<MemSpace>& state, const P& params, const G& grads, float lr) const {
    const Coefficients k = advance(state, lr);
    auto m = state.m;
    auto v = state.v;
    Kokkos::parallel_for(
        "reprosgd::Adam::step", Kokkos::RangePolicy<ExecSpace>(space, 0, params.extent(0)),
        KOKKOS_LAMBDA(const long i) { update(k, i, params, grads, m, v); });
  }
  /// step() over `ranges` on a host execution space, calling `after(r)` once range r is updated
  /// (RangedStepOptimizer).
  template <class ExecSpace, class MemSpace, class P, class G, class After>
  void step_ranges(const ExecSpace& space, state_type<MemSpace>& state, const P& params, const G& grads, float lr,
                   std::span<const ElementRange> ranges, After after) const {
    static_assert(is_host_space_v<ExecSpace>, "reprosgd::Adam::step_ranges runs on a host execution space");
    const Coefficients k = advance(state, lr);
    auto m = state.m;
    auto v = state.v;
    const ElementRange* r = ranges.data();
    Kokkos::parallel_for("reprosgd::Adam::step", Kokkos::RangePolicy<ExecSpace>(space, 0, ranges.size()),
                         [=](const std::size_t c) {
                           for (auto i = static_cast<long>(r[c].begin); i < static_cast<long>(r[c].end); ++i)
                             update(k, i, params, grads, m, v);
                           after(c);
                         });
  }
};
}  // namespace detail

/// Adam (Kingma & Ba, ICLR 2015); weight_decay is L2 added to the gradient.
using Adam = detail::AdamImpl<false>;
/// AdamW: Adam with decoupled weight decay p -= lr * wd * p.
using AdamW = detail::AdamImpl<true>;

static_assert(RangedStepOptimizer<Adam>);
static_assert(RangedStepOptimizer<AdamW>);

REPROSGD_END_NAMESPACE
