// SPDX-License-Identifier: BSD-3-Clause
/// @file Elementwise kernels of the layers: bias, activations and their derivatives, bias gradient.
///
/// Every kernel here writes each output element from one thread with a fixed sequence of IEEE
/// operations, so the result does not depend on the thread count or backend (contract level L1).
/// The only sum (the bias gradient) runs over rows in ascending order inside one thread per column.
#pragma once

#include <reprosgd/kernels/views.hpp>
#include <reprosgd/math/elementary.hpp>

#include <Kokkos_Core.hpp>

REPROSGD_BEGIN_NAMESPACE

/// Which elementwise nonlinearity a layer applies.
enum class Activation { relu, tanh, sigmoid };

namespace detail {
template <class ExecSpace, class F>
void for_each_element(const ExecSpace& space, const char* label, long rows, long cols, F f) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace>(space, 0, rows * cols), f);
}
}  // namespace detail

/// y(i,j) = y(i,j) + b(j). @deterministic @device
template <class ExecSpace, class Y, class B>
void add_bias(const ExecSpace& space, const Y& y, const B& b) {
  const long cols = static_cast<long>(y.extent(1));
  detail::for_each_element(space, "reprosgd::add_bias", static_cast<long>(y.extent(0)), cols,
                           KOKKOS_LAMBDA(const long e) {
                             const long i = e / cols, j = e - i * cols;
                             y(i, j) = y(i, j) + b(j);
                           });
}

/// db(j) = sum over rows i ascending of dy(i,j), one thread per column. @deterministic @device
template <class ExecSpace, class DY, class DB>
void bias_gradient(const ExecSpace& space, const DY& dy, const DB& db) {
  const long rows = static_cast<long>(dy.extent(0));
  Kokkos::parallel_for("reprosgd::bias_gradient", Kokkos::RangePolicy<ExecSpace>(space, 0, dy.extent(1)),
                       KOKKOS_LAMBDA(const long j) {
                         float acc = 0.0f;
                         for (long i = 0; i < rows; ++i) acc = acc + dy(i, j);
                         db(j) = acc;
                       });
}

/// The activation of x. @device
KOKKOS_INLINE_FUNCTION float activate(Activation a, float x) {
  switch (a) {
    case Activation::relu: return x > 0.0f ? x : 0.0f;
    case Activation::tanh: return math::tanh(x);
    case Activation::sigmoid: return math::sigmoid(x);
  }
  return x;
}

/// d activation / dx expressed through the activation's output y (all three allow it).
KOKKOS_INLINE_FUNCTION float activation_derivative(Activation a, float y) {
  switch (a) {
    case Activation::relu: return y > 0.0f ? 1.0f : 0.0f;
    case Activation::tanh: return 1.0f - y * y;
    case Activation::sigmoid: return y * (1.0f - y);
  }
  return 1.0f;
}

/// out = act(in), elementwise. @deterministic @device
template <class ExecSpace, class In, class Out>
void activation_forward(const ExecSpace& space, Activation a, const In& in, const Out& out) {
  const long cols = static_cast<long>(in.extent(1));
  detail::for_each_element(space, "reprosgd::activation_forward", static_cast<long>(in.extent(0)), cols,
                           KOKKOS_LAMBDA(const long e) {
                             const long i = e / cols, j = e - i * cols;
                             out(i, j) = activate(a, in(i, j));
                           });
}

/// gin = gout * act'(x), with act' taken from the forward output. @deterministic @device
template <class ExecSpace, class Out, class GOut, class GIn>
void activation_backward(const ExecSpace& space, Activation a, const Out& out, const GOut& gout, const GIn& gin) {
  const long cols = static_cast<long>(out.extent(1));
  detail::for_each_element(space, "reprosgd::activation_backward", static_cast<long>(out.extent(0)), cols,
                           KOKKOS_LAMBDA(const long e) {
                             const long i = e / cols, j = e - i * cols;
                             gin(i, j) = gout(i, j) * activation_derivative(a, out(i, j));
                           });
}

REPROSGD_END_NAMESPACE
