// SPDX-License-Identifier: BSD-3-Clause
/// @file Normalisation kernels: the moments of groups of elements (a channel of a micro-batch for
/// batch normalisation, a sample's features for layer normalisation), the normalise-and-scale
/// forward pass, and the backward passes. Every group's moments are summed by one thread in
/// ascending element order, in double and rounded once; every output element is written by one
/// thread with a fixed sequence of float operations. No atomics, nothing that depends on the
/// thread count or the backend.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>

#include <Kokkos_Core.hpp>

REPROSGD_BEGIN_NAMESPACE

/**
 * Groups of `count` elements of a row-major buffer: element k of group g is at
 * g * group_step + k * element_step. A batch-norm channel of an (N x C) NHWC micro-batch is
 * {C, N, 1, C}; a layer-norm row of an (rows x F) matrix is {rows, F, F, 1}.
 */
struct ElementGroups {
  long groups = 0;
  long count = 0;
  long group_step = 0;
  long element_step = 0;
};

/**
 * mean[g] = float(sum_k x / count) and invstd[g] = float(1 / sqrt(var + eps)), var the biased
 * variance sum_k (x - mean)^2 / count about the double mean; the sums in double, k ascending, each
 * value rounded to float once. `unbiased` (may be null) receives float(var * count / (count - 1))
 * (var itself when count == 1): what running statistics average. One thread per group.
 * @deterministic @device
 */
template <class ExecSpace>
void group_moments(const ExecSpace& space, const ElementGroups& g, const float* x, double eps, float* mean,
                   float* invstd, float* unbiased) {
  Kokkos::parallel_for("reprosgd::group_moments", Kokkos::RangePolicy<ExecSpace>(space, 0, g.groups),
                       KOKKOS_LAMBDA(const long grp) {
                         const float* xs = x + grp * g.group_step;
                         double s = 0.0;
                         for (long k = 0; k < g.count; ++k) s += static_cast<double>(xs[k * g.element_step]);
                         const double mu = s / static_cast<double>(g.count);
                         double q = 0.0;
                         for (long k = 0; k < g.count; ++k) {
                           const double d = static_cast<double>(xs[k * g.element_step]) - mu;
                           q += d * d;
                         }
                         const double var = q / static_cast<double>(g.count);
                         mean[grp] = static_cast<float>(mu);
                         invstd[grp] = static_cast<float>(1.0 / detail::sqrt(var + eps));
                         if (unbiased)
                           unbiased[grp] = static_cast<float>(
                               g.count > 1 ? q / static_cast<double>(g.count - 1) : var);
                       });
}

/// invstd[c] = float(1 / sqrt(double(var[c]) + eps)): running statistics in evaluation. @device
template <class ExecSpace>
void inverse_std(const ExecSpace& space, long n, const float* var, double eps, float* invstd) {
  Kokkos::parallel_for("reprosgd::inverse_std", Kokkos::RangePolicy<ExecSpace>(space, 0, n), KOKKOS_LAMBDA(const long c) {
    invstd[c] = static_cast<float>(1.0 / detail::sqrt(static_cast<double>(var[c]) + eps));
  });
}

/// Batch normalisation of an (N x C) channel-last matrix: y(n, c) = gamma[c] * ((x - mean[c]) *
/// invstd[c]) + beta[c], each product and sum rounded. One thread per element. @deterministic @device
template <class ExecSpace>
void channel_normalize(const ExecSpace& space, long N, long C, const float* x, const float* mean, const float* invstd,
                       const float* gamma, const float* beta, float* y) {
  Kokkos::parallel_for("reprosgd::channel_normalize", Kokkos::RangePolicy<ExecSpace>(space, 0, N * C),
                       KOKKOS_LAMBDA(const long e) {
                         const long c = e % C;
                         const float xhat = (x[e] - mean[c]) * invstd[c];
                         y[e] = gamma[c] * xhat + beta[c];
                       });
}

/**
 * The parameter gradients of batch normalisation and the per-channel sums its input gradient
 * needs: dbeta[c] = float(sum_n dy), dgamma[c] = float(sum_n dy * xhat), a[c] = float(sum_n dy / N)
 * and b[c] = float(sum_n dy * xhat / N), n ascending in double, xhat recomputed as forward did.
 * One thread per channel. @deterministic @device
 */
template <class ExecSpace>
void channel_gradient_sums(const ExecSpace& space, long N, long C, const float* x, const float* gy, const float* mean,
                           const float* invstd, float* dgamma, float* dbeta, float* a, float* b) {
  Kokkos::parallel_for("reprosgd::channel_gradient_sums", Kokkos::RangePolicy<ExecSpace>(space, 0, C),
                       KOKKOS_LAMBDA(const long c) {
                         double s = 0.0, t = 0.0;
                         for (long n = 0; n < N; ++n) {
                           const float xhat = (x[n * C + c] - mean[c]) * invstd[c];
                           const float dy = gy[n * C + c];
                           s += static_cast<double>(dy);
                           t += static_cast<double>(dy) * static_cast<double>(xhat);
                         }
                         dbeta[c] = static_cast<float>(s);
                         dgamma[c] = static_cast<float>(t);
                         a[c] = static_cast<float>(s / static_cast<double>(N));
                         b[c] = static_cast<float>(t / static_cast<double>(N));
                       });
}

/**
 * Batch normalisation's input gradient: with batch statistics (`batch`),
 * gx = (gamma * invstd) * ((gy - a) - xhat * b), the derivative through the mean and the variance;
 * with fixed statistics (evaluation), gx = (gamma * invstd) * gy. One thread per element.
 * @deterministic @device
 */
template <class ExecSpace>
void channel_input_gradient(const ExecSpace& space, long N, long C, bool batch, const float* x, const float* gy,
                            const float* mean, const float* invstd, const float* gamma, const float* a, const float* b,
                            float* gx) {
  Kokkos::parallel_for("reprosgd::channel_input_gradient", Kokkos::RangePolicy<ExecSpace>(space, 0, N * C),
                       KOKKOS_LAMBDA(const long e) {
                         const long c = e % C;
                         const float k = gamma[c] * invstd[c];
                         if (!batch) {
                           gx[e] = k * gy[e];
                           return;
                         }
                         const float xhat = (x[e] - mean[c]) * invstd[c];
                         gx[e] = k * ((gy[e] - a[c]) - xhat * b[c]);
                       });
}

/// Layer normalisation of an (R x F) matrix: y(r, j) = gamma[j] * ((x - mean[r]) * invstd[r]) +
/// beta[j]. One thread per element. @deterministic @device
template <class ExecSpace>
void row_normalize(const ExecSpace& space, long R, long F, const float* x, const float* mean, const float* invstd,
                   const float* gamma, const float* beta, float* y) {
  Kokkos::parallel_for("reprosgd::row_normalize", Kokkos::RangePolicy<ExecSpace>(space, 0, R * F),
                       KOKKOS_LAMBDA(const long e) {
                         const long r = e / F, j = e - r * F;
                         const float xhat = (x[e] - mean[r]) * invstd[r];
                         y[e] = gamma[j] * xhat + beta[j];
                       });
}

/// Layer normalisation's parameter gradients: dgamma[j] = float(sum_r gy * xhat), dbeta[j] =
/// float(sum_r gy), r ascending in double. One thread per feature. @deterministic @device
template <class ExecSpace>
void row_parameter_gradients(const ExecSpace& space, long R, long F, const float* x, const float* gy,
                             const float* mean, const float* invstd, float* dgamma, float* dbeta) {
  Kokkos::parallel_for("reprosgd::row_parameter_gradients", Kokkos::RangePolicy<ExecSpace>(space, 0, F),
                       KOKKOS_LAMBDA(const long j) {
                         double s = 0.0, t = 0.0;
                         for (long r = 0; r < R; ++r) {
                           const float xhat = (x[r * F + j] - mean[r]) * invstd[r];
                           const float dy = gy[r * F + j];
                           s += static_cast<double>(dy);
                           t += static_cast<double>(dy) * static_cast<double>(xhat);
                         }
                         dbeta[j] = static_cast<float>(s);
                         dgamma[j] = static_cast<float>(t);
                       });
}

/**
 * Layer normalisation's input gradient, one thread per row: with g = gy * gamma[j],
 * a = float(sum_j g / F) and b = float(sum_j g * xhat / F) (j ascending, double), then
 * gx(r, j) = invstd[r] * ((g - a) - xhat * b). @deterministic @device
 */
template <class ExecSpace>
void row_input_gradient(const ExecSpace& space, long R, long F, const float* x, const float* gy, const float* mean,
                        const float* invstd, const float* gamma, float* gx) {
  Kokkos::parallel_for("reprosgd::row_input_gradient", Kokkos::RangePolicy<ExecSpace>(space, 0, R),
                       KOKKOS_LAMBDA(const long r) {
                         const float* xs = x + r * F;
                         const float* gys = gy + r * F;
                         double s = 0.0, t = 0.0;
                         for (long j = 0; j < F; ++j) {
                           const float g = gys[j] * gamma[j];
                           const float xhat = (xs[j] - mean[r]) * invstd[r];
                           s += static_cast<double>(g);
                           t += static_cast<double>(g) * static_cast<double>(xhat);
                         }
                         const float a = static_cast<float>(s / static_cast<double>(F));
                         const float b = static_cast<float>(t / static_cast<double>(F));
                         for (long j = 0; j < F; ++j) {
                           const float g = gys[j] * gamma[j];
                           const float xhat = (xs[j] - mean[r]) * invstd[r];
                           gx[r * F + j] = invstd[r] * ((g - a) - xhat * b);
                         }
                       });
}

/**
 * Running statistics after a step: next[k] = (1 - momentum) * running[k] + momentum * batch[k]
 * (two products and a sum, each rounded), and batch[k] = 0: batch[] lives in the step's gradient,
 * which the optimizer reads next, and a statistic is not trained (Sequential writes next over the
 * slot after the optimizer's update). One thread per statistic.
 * @deterministic @device
 */
template <class ExecSpace>
void blend_statistics(const ExecSpace& space, long n, float momentum, const float* running, float* batch,
                      float* next) {
  const float keep = 1.0f - momentum;
  Kokkos::parallel_for("reprosgd::blend_statistics", Kokkos::RangePolicy<ExecSpace>(space, 0, n), KOKKOS_LAMBDA(const long k) {
    next[k] = keep * running[k] + momentum * batch[k];
    batch[k] = 0.0f;
  });
}

REPROSGD_END_NAMESPACE
