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
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/kernels/views.hpp>

#include <Kokkos_Core.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
/// A visitor accepting every kind of state element an optimizer may have.
struct StateArchetypeVisitor {
  template <class V>
  void operator()(const char*, const V&) const {}
};
}  // namespace detail

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

REPROSGD_END_NAMESPACE
