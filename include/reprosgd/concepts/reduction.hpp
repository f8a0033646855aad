// SPDX-License-Identifier: BSD-3-Clause
/// @file The Reduction concept: how the gradients of a global batch's micro-batches become one sum.
///
/// Semantic requirements (docs/concepts/parallelism.md):
/// - reduce() is collective over the Parallelism group. Each rank passes the gradients of the
///   micro-batches it owns (one row each, in micro-batch order) and every rank receives the same sum
///   of all M rows of the global batch.
/// - A reduction that claims rank independence (Exact) must give the same bits for any number of
///   ranks, any owner map and any MPI reduction algorithm. One that does not (Native) documents that
///   its result is reproducible only for a fixed rank count and MPI library.
/// - A NaN or Inf in any row is reported through ReductionResult::finite == false on every rank.
/// - Under a ShardedParallelism each rank holds a shard of the parameter vector. A rank-independent
///   reduction then also offers reduce(par, rows, M, sum, CanonicalBlocks, group) and lays every
///   rounding decision over the whole (canonical) vector, agreed over the model group too, so a
///   shard's sums have the one-process bits (docs/reproducibility.md, "Model parallelism"); the
///   Trainer refuses a rank-independent reduction without it at compile time.
#pragma once

#include <reprosgd/concepts/parallelism.hpp>

#include <Kokkos_Core.hpp>

#include <concepts>

REPROSGD_BEGIN_NAMESPACE

/// What a gradient reduction found, identical on every rank.
struct ReductionResult {
  bool finite = true;  ///< false when any micro-batch gradient held a NaN or an Inf
};

/// A gradient reduction usable with the parallelism policy Par.
template <class R, class Par>
concept Reduction =
    Parallelism<Par> &&
    requires(R& r, Par& par, long total_micro_batches,
             Kokkos::View<float**, Kokkos::LayoutRight, typename Par::execution_space::memory_space> rows,
             Kokkos::View<float*, typename Par::execution_space::memory_space> sum) {
      { R::name() } -> std::convertible_to<const char*>;
      { R::rank_independent } -> std::convertible_to<bool>;
      { r.reduce(par, rows, total_micro_batches, sum) } -> std::same_as<ReductionResult>;
    };

REPROSGD_END_NAMESPACE
