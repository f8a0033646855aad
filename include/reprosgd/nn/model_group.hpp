// SPDX-License-Identifier: BSD-3-Clause
/// @file LocalModelGroup: the ModelGroup of one process (every non-model-parallel run), which owns
/// every feature; its chunk sums are LocalExactSum's, so nn/ needs no parallelism policy.
#pragma once

#include <reprosgd/concepts/model_group.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/reduction/local_sum.hpp>

#include <Kokkos_Core.hpp>

#include <limits>
#include <span>

REPROSGD_BEGIN_NAMESPACE

/**
 * The model group of one process: it owns every feature, so gathers and shares have nothing to
 * move; only the chunk sum has work to do, on `sum` (whose workspace the caller keeps between
 * steps). The sums are the bits of the Exact reduction with a Serial policy.
 */
template <class ExecSpace = Kokkos::DefaultExecutionSpace>
class LocalModelGroup {
 public:
  LocalModelGroup(const ExecSpace& space, LocalExactSum<ExecSpace>& sum) : space_(space), sum_(&sum) {}

  [[nodiscard]] int model_rank() const noexcept { return 0; }
  [[nodiscard]] int model_size() const noexcept { return 1; }
  [[nodiscard]] const ExecSpace& space() const noexcept { return space_; }

  template <class Full>
  void gather_features(const float*, long, std::span<const FeatureRange> ranges, const Full&) const {
    if (ranges.size() != 1) throw config_error("reprosgd::LocalModelGroup: a one-process group owns every feature");
  }
  /// sum = the exact sum of the `chunks` rows of `partials`; NaN everywhere when a partial holds a
  /// NaN or an Inf (or the sum overflows), so the step's gradient check reports it.
  template <class Partials, class Sum>
  void sum_input_gradient(const Partials& partials, int chunks, const Sum& sum) {
    if (!sum_->sum(space_, partials, chunks, sum).finite)
      Kokkos::deep_copy(space_, sum, std::numeric_limits<float>::quiet_NaN());
  }
  void share(float*, long, int) const noexcept {}

 private:
  ExecSpace space_;
  LocalExactSum<ExecSpace>* sum_;
};

static_assert(ModelGroup<LocalModelGroup<>>);

REPROSGD_END_NAMESPACE
