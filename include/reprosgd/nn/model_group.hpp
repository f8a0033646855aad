// SPDX-License-Identifier: BSD-3-Clause
/// @file ModelGroup: the ranks that share one model replica's layers (model parallelism), and the
/// one-process group every non-model-parallel policy uses.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/reduction/exact.hpp>

#include <Kokkos_Core.hpp>

#include <concepts>
#include <reprosgd/concepts/parallelism.hpp>
#include <span>
#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

/**
 * What Sequential needs from the ranks that split its layers' output features among them.
 *
 * - gather_features: every rank passes its features' columns of a layer output (rows x its width,
 *   contiguous) and receives the whole output (rows x all features) — the ranks' `ranges` tile it.
 * - sum_input_gradient: the Exact sum of the chunk partials over the group (each rank passes the
 *   partials of the chunks it owns, possibly none), the same floats on every rank.
 * - share: copy `n` floats from model rank `root` to every rank of the group.
 * All three are collective over the group and deterministic.
 */
template <class G>
concept ModelGroup = requires(G& g, const G& cg, const float* local, long rows, std::span<const FeatureRange> ranges,
                              MatrixRef<Kokkos::DefaultExecutionSpace::memory_space> full,
                              Matrix<Kokkos::DefaultExecutionSpace::memory_space> partials,
                              BufferRef<Kokkos::DefaultExecutionSpace::memory_space> sum, float* data) {
  { cg.model_rank() } -> std::convertible_to<int>;
  { cg.model_size() } -> std::convertible_to<int>;
  g.gather_features(local, rows, ranges, full);
  g.sum_input_gradient(partials, 1, sum);
  g.share(data, rows, 0);
};

/// The model group of one process: it owns every feature; only the chunk sum has work to do (on
/// `exact`, whose workspace the caller keeps between steps).
template <class ExecSpace = Kokkos::DefaultExecutionSpace>
class LocalModelGroup {
 public:
  LocalModelGroup(const ExecSpace& space, Exact& exact) : serial_(space), exact_(&exact) {}

  [[nodiscard]] int model_rank() const noexcept { return 0; }
  [[nodiscard]] int model_size() const noexcept { return 1; }
  [[nodiscard]] const ExecSpace& space() const noexcept { return serial_.space(); }

  template <class Full>
  void gather_features(const float*, long, std::span<const FeatureRange> ranges, const Full&) const {
    if (ranges.size() != 1) throw config_error("reprosgd::LocalModelGroup: a one-process group owns every feature");
  }
  template <class Partials, class Sum>
  void sum_input_gradient(const Partials& partials, int chunks, const Sum& sum) {
    Dense::sum_chunk_partials(*exact_, serial_, partials, chunks, sum);
  }
  void share(float*, long, int) const noexcept {}

 private:
  Serial<ExecSpace> serial_;
  Exact* exact_;
};

static_assert(ModelGroup<LocalModelGroup<>>);

/**
 * A parallelism policy whose ranks split the model (Hybrid, ModelParallel): the Trainer shards
 * the model over model_group(), gathers the shards for checkpoints and fingerprints, reduces
 * gradients over the policy's own (data) dimension and checks configurations over world().
 */
template <class P>
concept ShardedParallelism = Parallelism<P> && requires(P& p) {
  { p.model_group() } -> ModelGroup;
  { p.world_rank() } -> std::convertible_to<int>;
  requires Parallelism<std::remove_cvref_t<decltype(p.world())>>;
  p.model_group().gather_to_root(static_cast<const float*>(nullptr), std::span<const long>(), static_cast<float*>(nullptr));
};

REPROSGD_END_NAMESPACE
