// SPDX-License-Identifier: BSD-3-Clause
/// @file Loss kernels: numerically stable softmax cross-entropy and mean squared error.
///
/// Each row (sample) is handled by one thread in a fixed order. The gradient is scaled by
/// 1/global_batch here, so the gradient of a global batch is the plain (exact) sum of its
/// micro-batch gradients and no division happens after the cross-micro-batch reduction.
#pragma once

#include <reprosgd/kernels/views.hpp>
#include <reprosgd/math/elementary.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

REPROSGD_BEGIN_NAMESPACE

/// Which loss a Sequential model is trained with.
enum class LossKind { softmax_cross_entropy, mse };

/**
 * Per-row softmax cross-entropy of `logits` against integer `labels`, its gradient and whether the
 * row's argmax (first maximum on ties) is the label.
 *
 * loss_i = lse(x_i) - x_i[y_i];  grad_ij = (exp(x_ij - lse(x_i)) - [j == y_i]) * scale.
 *
 * @param rows   number of valid rows (the last evaluation micro-batch may be short)
 * @param scale  1 / global batch size, or 0 to skip the gradient (evaluation)
 * @deterministic @device
 */
template <class ExecSpace, class Logits, class Labels, class Grad, class RowLoss, class RowCorrect>
void softmax_cross_entropy(const ExecSpace& space, const Logits& logits, const Labels& labels, long rows,
                           float scale, const Grad& grad, const RowLoss& row_loss, const RowCorrect& row_correct) {
  const int classes = static_cast<int>(logits.extent(1));
  const bool want_grad = grad.extent(0) > 0;
  Kokkos::parallel_for(
      "reprosgd::softmax_cross_entropy", Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(const long i) {
        const float* x = &logits(i, 0);
        const float lse = math::log_sum_exp(x, classes, 1);
        const int y = labels(i);
        int best = 0;
        for (int j = 1; j < classes; ++j)
          if (x[j] > x[best]) best = j;
        row_loss(i) = lse - x[y];
        row_correct(i) = best == y ? 1 : 0;
        if (want_grad)
          for (int j = 0; j < classes; ++j) {
            const float p = math::exp(x[j] - lse);
            grad(i, j) = (p - (j == y ? 1.0f : 0.0f)) * scale;
          }
      });
}

/**
 * Per-row mean squared error against one-hot targets of `labels` (classification data trained with
 * a regression loss): loss_i = (1/C) sum_j (x_ij - t_ij)^2, grad_ij = (2/C)(x_ij - t_ij) * scale.
 * row_correct is the argmax test as for cross-entropy. @deterministic @device
 */
template <class ExecSpace, class Out, class Labels, class Grad, class RowLoss, class RowCorrect>
void mse_one_hot(const ExecSpace& space, const Out& out, const Labels& labels, long rows, float scale,
                 const Grad& grad, const RowLoss& row_loss, const RowCorrect& row_correct) {
  const int classes = static_cast<int>(out.extent(1));
  const bool want_grad = grad.extent(0) > 0;
  const float inv_c = 1.0f / static_cast<float>(classes);
  Kokkos::parallel_for(
      "reprosgd::mse_one_hot", Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(const long i) {
        const int y = labels(i);
        float acc = 0.0f;
        int best = 0;
        for (int j = 0; j < classes; ++j) {
          const float d = out(i, j) - (j == y ? 1.0f : 0.0f);
          acc = acc + d * d;
          if (out(i, j) > out(i, best)) best = j;
          if (want_grad) grad(i, j) = (2.0f * inv_c) * d * scale;
        }
        row_loss(i) = acc * inv_c;
        row_correct(i) = best == y ? 1 : 0;
      });
}

/**
 * Per-row mean squared error against float `targets` (regression, T = out.extent(1) targets per
 * row): loss_i = (1/T) sum_j (x_ij - t_ij)^2, grad_ij = (2/T)(x_ij - t_ij) * scale — with scale =
 * 1/B the gradient of PyTorch's `MSELoss()` (mean over the B x T elements). The sum runs over j in
 * order, one rounded operation at a time, as mse_one_hot's. row_correct is 0 (no classes).
 * @deterministic @device
 */
template <class ExecSpace, class Out, class Targets, class Grad, class RowLoss, class RowCorrect>
void mse(const ExecSpace& space, const Out& out, const Targets& targets, long rows, float scale, const Grad& grad,
         const RowLoss& row_loss, const RowCorrect& row_correct) {
  const int width = static_cast<int>(out.extent(1));
  const bool want_grad = grad.extent(0) > 0;
  const float inv_t = 1.0f / static_cast<float>(width);
  Kokkos::parallel_for(
      "reprosgd::mse", Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(const long i) {
        float acc = 0.0f;
        for (int j = 0; j < width; ++j) {
          const float d = out(i, j) - targets(i, j);
          acc = acc + d * d;
          if (want_grad) grad(i, j) = (2.0f * inv_t) * d * scale;
        }
        row_loss(i) = acc * inv_t;
        row_correct(i) = 0;
      });
}

REPROSGD_END_NAMESPACE
