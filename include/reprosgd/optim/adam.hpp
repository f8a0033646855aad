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

  template <class ExecSpace, class MemSpace, class P, class G>
  void step(const ExecSpace& space, state_type<MemSpace>& state, const P& params, const G& grads, float lr) const {
    state.beta1_power *= static_cast<double>(options.beta1);
    state.beta2_power *= static_cast<double>(options.beta2);
    ++state.steps;
    // Host-side scalars in double, rounded once to float; IEEE sqrt is correctly rounded everywhere.
    const float c1 = static_cast<float>(1.0 / (1.0 - state.beta1_power));
    const float c2 = static_cast<float>(1.0 / (1.0 - state.beta2_power));
    const float b1 = options.beta1, b2 = options.beta2, eps = options.eps, wd = options.weight_decay;
    const float one_minus_b1 = 1.0f - b1, one_minus_b2 = 1.0f - b2;
    auto m = state.m;
    auto v = state.v;
    Kokkos::parallel_for(
        "reprosgd::Adam::step", Kokkos::RangePolicy<ExecSpace>(space, 0, params.extent(0)), KOKKOS_LAMBDA(const long i) {
          float p = params(i);
          float g = grads(i);
          // A plain `if` on the template constant (it folds away): nvcc refuses a device lambda whose
          // first use of a captured variable (wd, lr) is inside `if constexpr`.
          if (Decoupled) {
            if (wd != 0.0f) p = p - lr * wd * p;
          } else {
            if (wd != 0.0f) g = g + wd * p;
          }
          const float mi = b1 * m(i) + one_minus_b1 * g;
          const float vi = b2 * v(i) + one_minus_b2 * (g * g);
          m(i) = mi;
          v(i) = vi;
          const float m_hat = mi * c1;
          const float v_hat = vi * c2;
          params(i) = p - lr * m_hat / (detail::sqrt(v_hat) + eps);
        });
  }
};
}  // namespace detail

/// Adam (Kingma & Ba, ICLR 2015); weight_decay is L2 added to the gradient.
using Adam = detail::AdamImpl<false>;
/// AdamW: Adam with decoupled weight decay p -= lr * wd * p.
using AdamW = detail::AdamImpl<true>;

static_assert(Optimizer<Adam>);
static_assert(Optimizer<AdamW>);

REPROSGD_END_NAMESPACE
