// SPDX-License-Identifier: BSD-3-Clause
/// @file Elementwise kernels of the layers: bias, activations and their derivatives, bias gradient.
///
/// Every kernel here writes each output element from one thread with a fixed sequence of IEEE
/// operations, so the result does not depend on the thread count or backend (contract level L1).
/// The only sum (the bias gradient) runs over rows in ascending order inside one thread per column.
#pragma once

#include <reprosgd/detail/kernels/elementwise_host.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/math/elementary.hpp>

#include <Kokkos_Core.hpp>

#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

/// Which elementwise nonlinearity a layer applies.
enum class Activation { relu, tanh, sigmoid };

namespace detail {
template <class ExecSpace, class F>
void for_each_element(const ExecSpace& space, const char* label, long rows, long cols, F f) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace>(space, 0, rows * cols), f);
}
// Host spaces run one work item per row: the inner loop over a row's contiguous columns has no
// index division and vectorises (each element still gets the same operations as the reference).
template <class ExecSpace, class F>
void for_each_row(const ExecSpace& space, const char* label, long rows, F f) {
  Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace>(space, 0, rows), f);
}
/// Host spaces with row-major (LayoutRight) views take the row-wise paths; anything else (device
/// spaces, other layouts) the element-wise ones. Both give the same bits.
template <class ExecSpace, class... V>
inline constexpr bool row_wise_v =
    is_host_space_v<ExecSpace> && (std::is_same_v<typename V::array_layout, Kokkos::LayoutRight> && ...);
/// Columns per work item of the host bias gradient.
inline constexpr long bias_gradient_chunk = 64;
}  // namespace detail

/// y(i,j) = y(i,j) + b(j). @deterministic @device
template <class ExecSpace, class Y, class B>
void add_bias(const ExecSpace& space, const Y& y, const B& b) {
  const long rows = static_cast<long>(y.extent(0)), cols = static_cast<long>(y.extent(1));
  if (rows == 0 || cols == 0) return;
  if constexpr (detail::row_wise_v<ExecSpace, Y>) {
    detail::for_each_row(space, "reprosgd::add_bias", rows, KOKKOS_LAMBDA(const long i) {
      float* KOKKOS_RESTRICT yr = &y(i, 0);
      for (long j = 0; j < cols; ++j) yr[j] = yr[j] + b(j);
    });
  } else {
    detail::for_each_element(space, "reprosgd::add_bias", rows, cols, KOKKOS_LAMBDA(const long e) {
      const long i = e / cols, j = e - i * cols;
      y(i, j) = y(i, j) + b(j);
    });
  }
}

/// db(j) = sum over rows i ascending of dy(i,j), from +0.0f, each column owned by one thread.
/// @deterministic @device
template <class ExecSpace, class DY, class DB>
void bias_gradient(const ExecSpace& space, const DY& dy, const DB& db) {
  const long rows = static_cast<long>(dy.extent(0)), cols = static_cast<long>(dy.extent(1));
  if (cols == 0) return;
  if constexpr (detail::row_wise_v<ExecSpace, DY>) {
    // A work item owns a chunk of columns and walks the rows in order: every column's sum is the
    // same chain as below, while the inner loop runs over contiguous memory and vectorises.
    constexpr long chunk = detail::bias_gradient_chunk;
    Kokkos::parallel_for("reprosgd::bias_gradient", Kokkos::RangePolicy<ExecSpace>(space, 0, (cols + chunk - 1) / chunk),
                         KOKKOS_LAMBDA(const long c) {
                           const long j0 = c * chunk, w = cols - j0 < chunk ? cols - j0 : chunk;
                           float acc[chunk];
                           for (long j = 0; j < chunk; ++j) acc[j] = 0.0f;
                           for (long i = 0; i < rows; ++i) {
                             const float* KOKKOS_RESTRICT d = &dy(i, j0);
                             for (long j = 0; j < w; ++j) acc[j] = acc[j] + d[j];
                           }
                           for (long j = 0; j < w; ++j) db(j0 + j) = acc[j];
                         });
  } else {
    Kokkos::parallel_for("reprosgd::bias_gradient", Kokkos::RangePolicy<ExecSpace>(space, 0, cols),
                         KOKKOS_LAMBDA(const long j) {
                           float acc = 0.0f;
                           for (long i = 0; i < rows; ++i) acc = acc + dy(i, j);
                           db(j) = acc;
                         });
  }
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

namespace detail {
// The kind is a template parameter here, so the switch folds away inside the loops.
template <Activation A, class ExecSpace, class In, class Out>
void activation_forward_as(const ExecSpace& space, const In& in, const Out& out) {
  const long rows = static_cast<long>(in.extent(0)), cols = static_cast<long>(in.extent(1));
  if (rows == 0 || cols == 0) return;
  if constexpr (row_wise_v<ExecSpace, In, Out>) {
    for_each_row(space, "reprosgd::activation_forward", rows, KOKKOS_LAMBDA(const long i) {
      const float* KOKKOS_RESTRICT x = &in(i, 0);
      float* KOKKOS_RESTRICT y = &out(i, 0);
      for (long j = 0; j < cols; ++j) y[j] = activate(A, x[j]);
    });
  } else {
    for_each_element(space, "reprosgd::activation_forward", rows, cols, KOKKOS_LAMBDA(const long e) {
      const long i = e / cols, j = e - i * cols;
      out(i, j) = activate(A, in(i, j));
    });
  }
}
template <Activation A, class ExecSpace, class Out, class GOut, class GIn>
void activation_backward_as(const ExecSpace& space, const Out& out, const GOut& gout, const GIn& gin) {
  const long rows = static_cast<long>(out.extent(0)), cols = static_cast<long>(out.extent(1));
  if (rows == 0 || cols == 0) return;
#if REPROSGD_IMPL_ELEMENTWISE_HOST
  if constexpr (A == Activation::relu && row_wise_v<ExecSpace, Out, GOut, GIn>) {
    // A host-only lambda: the row helper is not device code.
    for_each_row(space, "reprosgd::activation_backward", rows, [=](const long i) {
      elementwise_host::relu_backward_row(&out(i, 0), &gout(i, 0), &gin(i, 0), cols);
    });
    return;
  }
#endif
  if constexpr (row_wise_v<ExecSpace, Out, GOut, GIn>) {
    for_each_row(space, "reprosgd::activation_backward", rows, KOKKOS_LAMBDA(const long i) {
      const float* KOKKOS_RESTRICT y = &out(i, 0);
      const float* KOKKOS_RESTRICT g = &gout(i, 0);
      float* KOKKOS_RESTRICT gi = &gin(i, 0);
      for (long j = 0; j < cols; ++j) gi[j] = g[j] * activation_derivative(A, y[j]);
    });
  } else {
    for_each_element(space, "reprosgd::activation_backward", rows, cols, KOKKOS_LAMBDA(const long e) {
      const long i = e / cols, j = e - i * cols;
      gin(i, j) = gout(i, j) * activation_derivative(A, out(i, j));
    });
  }
}
}  // namespace detail

/// out = act(in), elementwise. @deterministic @device
template <class ExecSpace, class In, class Out>
void activation_forward(const ExecSpace& space, Activation a, const In& in, const Out& out) {
  switch (a) {
    case Activation::relu: return detail::activation_forward_as<Activation::relu>(space, in, out);
    case Activation::tanh: return detail::activation_forward_as<Activation::tanh>(space, in, out);
    case Activation::sigmoid: return detail::activation_forward_as<Activation::sigmoid>(space, in, out);
  }
}

/// gin = gout * act'(x), with act' taken from the forward output. @deterministic @device
template <class ExecSpace, class Out, class GOut, class GIn>
void activation_backward(const ExecSpace& space, Activation a, const Out& out, const GOut& gout, const GIn& gin) {
  switch (a) {
    case Activation::relu: return detail::activation_backward_as<Activation::relu>(space, out, gout, gin);
    case Activation::tanh: return detail::activation_backward_as<Activation::tanh>(space, out, gout, gin);
    case Activation::sigmoid: return detail::activation_backward_as<Activation::sigmoid>(space, out, gout, gin);
  }
}

/// out[e] = a[e] + b[e] for e in [0, n): one rounded sum per element (Residual's shortcut).
/// `out` may be `a` or `b`. @deterministic @device
template <class ExecSpace>
void add_elements(const ExecSpace& space, long n, const float* a, const float* b, float* out) {
  Kokkos::parallel_for("reprosgd::add_elements", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
                       KOKKOS_LAMBDA(const long e) { out[e] = a[e] + b[e]; });
}

REPROSGD_END_NAMESPACE
