// SPDX-License-Identifier: BSD-3-Clause
/// @file The Optimizer concept: hyperparameters in the optimizer, per-run state explicit and separate.
///
/// Semantic requirements (docs/concepts/optimizer.md):
/// - step() updates each parameter from its own gradient and state only, with a fixed sequence of
///   IEEE operations (elementwise kernels): the result does not depend on threads or backend.
/// - All per-run state lives in state_type<MemSpace>: buffers (one element per parameter) and
///   scalars. visit() enumerates them in a canonical order (fingerprints, checkpoints); nothing else
///   carries state between steps, so a restored state continues bit for bit.
/// - check() throws config_error for invalid hyperparameters before anything runs.
///
/// Optionally (RangedStepOptimizer), step_ranges(): the same step over given element ranges on a
/// host execution space, calling back after each range; the built-in optimizers have it.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/kernels/views.hpp>

#include <Kokkos_Core.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
/// A visitor accepting every kind of state element an optimizer may have.
struct StateArchetypeVisitor {
  template <class V>
  void operator()(const char*, const V&) const {}
};
/// A callback accepting a range index (the archetype of step_ranges()' `after`).
struct RangeArchetypeCallback {
  void operator()(std::size_t) const {}
};
}  // namespace detail

/// Elements [begin, end) of the parameters.
struct ElementRange {
  std::size_t begin = 0, end = 0;
};

/// An optimizer usable by Trainer.
template <class O>
concept Optimizer =
    std::copy_constructible<O> &&
    requires(const O o, typename O::template state_type<Kokkos::DefaultExecutionSpace::memory_space> state,
             Buffer<Kokkos::DefaultExecutionSpace::memory_space> p, float lr, std::size_t n) {
      { O::name() } -> std::convertible_to<const char*>;
      { o.base_lr() } -> std::convertible_to<float>;
      { o.describe() } -> std::convertible_to<std::string>;
      o.check();
      { o.template init<Kokkos::DefaultExecutionSpace::memory_space>(n) } -> std::same_as<decltype(state)>;
      o.step(Kokkos::DefaultExecutionSpace(), state, p, p, lr);
      state.visit(detail::StateArchetypeVisitor{});
    };

/**
 * An Optimizer whose step can also run on a host execution space over given element `ranges`
 * (in order, together covering every parameter exactly once), one range per work item, calling
 * `after(r)` on the thread that updated range r once its last element is written — while the
 * range is still in that core's cache. Each element gets the same IEEE operations as in step(),
 * so the bits are step()'s, whatever the ranges. The Trainer hashes a traced step's fingerprint
 * chunks there (docs/diagnosis.md, "What a trace costs"); an optimizer without it is traced by
 * hashing after its step().
 */
template <class O>
concept RangedStepOptimizer =
    Optimizer<O> && requires(const O o, typename O::template state_type<Kokkos::HostSpace> state,
                             Buffer<Kokkos::HostSpace> p, float lr, std::span<const ElementRange> ranges) {
      o.step_ranges(Kokkos::DefaultHostExecutionSpace(), state, p, p, lr, ranges, detail::RangeArchetypeCallback{});
    };

REPROSGD_END_NAMESPACE
