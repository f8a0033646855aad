// SPDX-License-Identifier: BSD-3-Clause
/// @file BatchCentre: a layer a user might write, y = x - mean(x) over the whole micro-batch, in the
/// three ways its sum can be written. Only the owner-computes loop keeps the contract:
/// - Sum::owner:  one thread adds the elements in index order (a fixed sequence of IEEE operations);
/// - Sum::reduce: Kokkos::parallel_reduce, whose partial sums follow the thread count and backend;
/// - Sum::atomic: Kokkos::atomic_add into one float, whose order follows the scheduler as well
///   (it can look deterministic on a quiet CPU and differs on a GPU).
/// The example and the unit test (tests/unit/nn/find_nondeterminism_test.cpp) hand these to
/// reprosgd::testing::find_nondeterminism.
#pragma once

#include <reprosgd/concepts/layer.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <string>

namespace batch_centre {

/// How a BatchCentre adds up a micro-batch.
enum class Sum { owner, reduce, atomic };

/// The sum of the first n elements of the contiguous `v` on `space`, written the `how` way.
template <class Space, class V>
float sum(const Space& space, Sum how, const V& v, long n) {
  float total = 0.0f;
  if (how == Sum::reduce) {
    Kokkos::parallel_reduce(
        "batch_centre::reduce", Kokkos::RangePolicy<Space>(space, 0, n),
        KOKKOS_LAMBDA(const long i, float& acc) { acc += v[i]; }, total);
    return total;
  }
  Kokkos::View<float, typename Space::memory_space> out("batch_centre::sum");
  if (how == Sum::atomic) {
    Kokkos::parallel_for(
        "batch_centre::atomic", Kokkos::RangePolicy<Space>(space, 0, n),
        KOKKOS_LAMBDA(const long i) { Kokkos::atomic_add(&out(), v[i]); });
  } else {  // Sum::owner: one thread, index order
    Kokkos::parallel_for(
        "batch_centre::owner", Kokkos::RangePolicy<Space>(space, 0, 1), KOKKOS_LAMBDA(const long) {
          float acc = 0.0f;
          for (long i = 0; i < n; ++i) acc += v[i];
          out() = acc;
        });
  }
  Kokkos::deep_copy(total, out);
  return total;
}

/// y = x - mean(x) over every element of x (rows x cols, contiguous), the sum written the `how` way.
/// A free function: nvcc refuses a device lambda in a private member function.
template <class Space, class In, class Out>
void centre(const Space& space, Sum how, const In& x, const Out& y) {
  const long rows = static_cast<long>(x.extent(0)), cols = static_cast<long>(x.extent(1)), n = rows * cols;
  const float mean = sum(space, how, x.data(), n) / static_cast<float>(n);
  Kokkos::parallel_for(
      "batch_centre::centre", Kokkos::RangePolicy<Space>(space, 0, n),
      KOKKOS_LAMBDA(const long i) { y.data()[i] = x.data()[i] - mean; });
}

/// y = x - mean(x), the mean over every element of the micro-batch; dx = dy - mean(dy).
/// Forward adds up the way `Forward` says, backward the way `Backward` says.
template <Sum Forward, Sum Backward = Forward>
struct BatchCentre {
  static constexpr const char* name() noexcept { return "batch_centre"; }
  [[nodiscard]] int output_width(int width) const noexcept { return width; }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 0; }
  [[nodiscard]] std::string describe(int) const {
    auto text = [](Sum s) { return s == Sum::owner ? "owner" : s == Sum::reduce ? "reduce" : "atomic"; };
    return std::string("batch_centre(") + text(Forward) + "," + text(Backward) + ")";
  }
  template <class Ctx, class P>
  void initialize(const Ctx&, const P&, int) const noexcept {}

  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P&, const In& x, const Out& y) const {
    centre(ctx.space, Forward, x, y);
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P&, const In&, const Out&, const GOut& gy, const GIn& gx, const GP&) const {
    if (gx.extent(0) > 0) centre(ctx.space, Backward, gy, gx);
  }
};

static_assert(reprosgd::Layer<BatchCentre<Sum::owner>>);

}  // namespace batch_centre
