// SPDX-License-Identifier: BSD-3-Clause
/// @file LayerContext, vocabulary of the Layer concept: what a layer knows about the call it is in
/// (where it runs and its logical coordinates).
#pragma once

#include <reprosgd/config.hpp>

#include <cstdint>

REPROSGD_BEGIN_NAMESPACE

/**
 * The logical coordinates of a forward/backward call. Random decisions of a layer (dropout, its
 * initialisation) are pure functions of these coordinates, never of a thread, team or rank, which
 * is why the model does not change with the decomposition (contract L1, L3) and why there is no
 * generator state to checkpoint (L4).
 *
 * @tparam ExecSpace Kokkos execution space the layer's kernels run on.
 * @tparam Rng       a model of RngStream.
 */
template <class ExecSpace, class Rng>
struct LayerContext {
  ExecSpace space;
  Rng rng;
  std::uint32_t layer = 0;          ///< index of the layer in its Sequential
  std::uint64_t step = 0;           ///< global optimisation step
  std::uint64_t sample_offset = 0;  ///< position of row 0 of this micro-batch in its global batch
  bool training = false;            ///< dropout active, gradients wanted
  /// This micro-batch's share of the step's global batch (m / B): the weight with which a layer
  /// that keeps running statistics (BatchNorm) enters its micro-batch's statistics into the step's
  /// gradient row, so that the exact sum of the rows is their mean over the step (nn/normalization.hpp).
  float batch_share = 1.0f;
};

REPROSGD_END_NAMESPACE
