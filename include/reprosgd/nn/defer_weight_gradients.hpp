// SPDX-License-Identifier: BSD-3-Clause
/// @file DeferWeightGradients: a layer's weight gradient handed to the caller instead of computed
/// (the Trainer's deferred weight gradients, trainer/deferred_weight_gradients.hpp).
#pragma once

#include <reprosgd/config.hpp>

REPROSGD_BEGIN_NAMESPACE

/**
 * Passed to a model's backward: every layer that can (Dense) computes its bias gradient and its
 * input gradient as usual, and instead of its weight gradient dW = x^T gy calls
 * `record(x, gy, gw)` with its input x (rows x in), its output gradient gy (rows x out, the
 * columns of the features it holds) and the place of dW in the gradient row (gw, in x out). The
 * caller must compute dW = x^T gy with reprosgd::gemm_tn's bits before gw is read. Layers that
 * cannot defer compute their weight gradients as always.
 */
template <class F>
struct DeferWeightGradients {
  F record;
};
template <class F>
DeferWeightGradients(F) -> DeferWeightGradients<F>;

/// A layer whose group backward takes a DeferWeightGradients as its last argument (Dense): it says
/// so with `static constexpr bool defers_weight_gradients = true`.
template <class L>
concept DefersWeightGradients = requires {
  requires L::defers_weight_gradients;
};

REPROSGD_END_NAMESPACE
