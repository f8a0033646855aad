// SPDX-License-Identifier: BSD-3-Clause
/// @file AnyOptimizer: one of the built-in optimizers chosen at run time, as Network is a model
/// chosen at run time.
#pragma once

#include <reprosgd/concepts/optimizer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/optim/adam.hpp>
#include <reprosgd/optim/sgd.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <variant>

REPROSGD_BEGIN_NAMESPACE

/**
 * Sgd, Adam or AdamW, chosen at run time (a command line, an input file). It *is* the optimizer it
 * holds for everything the contract sees: its state has the held optimizer's elements, names and
 * order (so the same checkpoints, fingerprints and traces), describe() is the held one's (the
 * configuration hash), and step() runs the held one's kernels (the same bits). A checkpoint written
 * with `Adam` resumes with an `AnyOptimizer` holding the same `Adam`, and the other way round.
 *
 * What it buys is compile time: a Trainer is one type for all three, so a program offering the
 * choice instantiates its training path once instead of once per optimizer (train_mlp's policy
 * files compile in about half the time). The price is one dispatch per step, on the host.
 *
 * **Example**: `AnyOptimizer opt = use_adam ? AnyOptimizer(Adam{{.lr = 1e-3f}}) : AnyOptimizer(Sgd{{.lr = 0.1f}});`
 */
class AnyOptimizer {
 public:
  using choice_type = std::variant<Sgd, Adam, AdamW>;

  /// The held optimizer's state: a variant of theirs, visited as the held one visits its own.
  template <class MemSpace>
  struct state_type {
    std::variant<Sgd::state_type<MemSpace>, Adam::state_type<MemSpace>, AdamW::state_type<MemSpace>> held;
    template <class F>
    void visit(F&& f) const {
      std::visit([&](const auto& s) { s.visit(f); }, held);
    }
    template <class F>
    void visit(F&& f) {
      std::visit([&](auto& s) { s.visit(f); }, held);
    }
  };

  AnyOptimizer(Sgd o) : held_(std::move(o)) {}
  AnyOptimizer(Adam o) : held_(std::move(o)) {}
  AnyOptimizer(AdamW o) : held_(std::move(o)) {}

  static constexpr const char* name() noexcept { return "any"; }
  /// The held optimizer's name: "sgd", "adam" or "adamw".
  [[nodiscard]] const char* held_name() const noexcept {
    return std::visit([](const auto& o) { return o.name(); }, held_);
  }
  [[nodiscard]] float base_lr() const noexcept {
    return std::visit([](const auto& o) { return o.base_lr(); }, held_);
  }
  [[nodiscard]] std::string describe() const {
    return std::visit([](const auto& o) { return o.describe(); }, held_);
  }
  void check() const {
    std::visit([](const auto& o) { o.check(); }, held_);
  }
  template <class MemSpace>
  [[nodiscard]] state_type<MemSpace> init(std::size_t n) const {
    return std::visit([&](const auto& o) { return state_type<MemSpace>{o.template init<MemSpace>(n)}; }, held_);
  }

  template <class ExecSpace, class MemSpace, class P, class G>
  void step(const ExecSpace& space, state_type<MemSpace>& state, const P& params, const G& grads, float lr) const {
    with_state(state, [&](const auto& o, auto& s) { o.step(space, s, params, grads, lr); });
  }
  /// The held optimizer's step_ranges() (RangedStepOptimizer: every built-in one has it).
  template <class ExecSpace, class MemSpace, class P, class G, class After>
  void step_ranges(const ExecSpace& space, state_type<MemSpace>& state, const P& params, const G& grads, float lr,
                   std::span<const ElementRange> ranges, After after) const {
    with_state(state, [&](const auto& o, auto& s) { o.step_ranges(space, s, params, grads, lr, ranges, after); });
  }

 private:
  /// f(held optimizer, its state); a state another optimizer made is a programming error, refused.
  template <class MemSpace, class F>
  void with_state(state_type<MemSpace>& state, F&& f) const {
    std::visit(
        [&]<class O>(const O& o) {
          using S = typename O::template state_type<MemSpace>;
          S* s = std::get_if<S>(&state.held);
          if (s == nullptr)
            throw config_error(std::string("reprosgd::AnyOptimizer: the state was made by another optimizer than ") +
                               o.name() + " (use the state this optimizer's init() made)");
          f(o, *s);
        },
        held_);
  }

  choice_type held_;
};

static_assert(RangedStepOptimizer<AnyOptimizer>);

REPROSGD_END_NAMESPACE
