// SPDX-License-Identifier: BSD-3-Clause
/// @file Pooling kernels on NHWC samples (kernels/image.hpp): max and average pooling over a
/// window, global average pooling, and their backward passes. Every output and every input
/// gradient element is written by one thread, reading in a fixed order; the backward passes
/// gather (each input element walks the windows that contain it) instead of scattering, so no
/// atomics are needed.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/kernels/image.hpp>

#include <Kokkos_Core.hpp>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

// Max pooling's winner of a window, per channel: walking the window's pixels inside the input
// (padding never wins) kh then kw ascending, the first pixel starts as the winner and a later one
// takes over only when its value is larger, or is a NaN while the winner is not (a NaN propagates,
// as in PyTorch). So the first of equal maxima — the lowest input index — wins a tie.

/// Whether value v takes a max-pooling window over from the current winner `best` (above): a
/// larger value, or a NaN over a number. @device
KOKKOS_INLINE_FUNCTION bool max_pool_takes_over(float v, float best) { return best == best && (v > best || v != v); }

/// The windows (first, last, inclusive) along one axis whose span [o * S - P, o * S - P + K)
/// contains input index i; empty (first > last) when none does. @device
KOKKOS_INLINE_FUNCTION void covering_windows(long i, long K, long S, long P, long outs, long& first, long& last) {
  const long lo = i + P - K + 1;  // o * S >= lo
  first = lo <= 0 ? 0 : (lo + S - 1) / S;
  last = (i + P) / S;
  if (last > outs - 1) last = outs - 1;
}

/// Channels a pooling work item handles at once (its local arrays).
inline constexpr long pool_channel_block = 16;

}  // namespace detail

/// y(n, oh, ow, c) = the largest x in the window (the value of the window's winner, above).
/// A work item owns an output pixel's C channels. @deterministic @device
template <class ExecSpace>
void max_pool_forward(const ExecSpace& space, const WindowGeometry& g, long rows, const float* x, float* y) {
  const long C = g.in.channels, H = g.in.height, W = g.in.width, K = g.kernel, S = g.stride, P = g.padding;
  const long OH = g.out_height(), OW = g.out_width(), HWC = H * W * C;
  Kokkos::parallel_for("reprosgd::max_pool_forward", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * OH * OW),
                       KOKKOS_LAMBDA(const long m) {
                         const long n = m / (OH * OW), pix = m - n * (OH * OW);
                         const long oh = pix / OW, ow = pix - oh * OW;
                         const float* xs = x + n * HWC;
                         float* KOKKOS_RESTRICT out = y + m * C;
                         bool first = true;
                         for (long kh = 0; kh < K; ++kh) {
                           const long h = oh * S - P + kh;
                           if (h < 0 || h >= H) continue;
                           for (long kw = 0; kw < K; ++kw) {
                             const long w = ow * S - P + kw;
                             if (w < 0 || w >= W) continue;
                             const float* KOKKOS_RESTRICT v = xs + (h * W + w) * C;
                             if (first) {
                               for (long c = 0; c < C; ++c) out[c] = v[c];
                               first = false;
                             } else {
                               for (long c = 0; c < C; ++c) {
                                 if (detail::max_pool_takes_over(v[c], out[c])) out[c] = v[c];
                               }
                             }
                           }
                         }
                       });
}

/// gx(n, h, w, c) = the sum, from +0, over the windows (oh ascending, then ow) that contain (h, w)
/// and whose winner it is (above), of gy(n, oh, ow, c): each window's gradient
/// goes to its one winner (the lowest index of a tie). A work item owns an input pixel's channels,
/// detail::pool_channel_block at a time. @deterministic @device
template <class ExecSpace>
void max_pool_backward(const ExecSpace& space, const WindowGeometry& g, long rows, const float* x, const float* gy,
                       float* gx) {
  const long C = g.in.channels, H = g.in.height, W = g.in.width, K = g.kernel, S = g.stride, P = g.padding;
  const long OH = g.out_height(), OW = g.out_width(), HWC = H * W * C;
  if (S >= K && P == 0) {
    // Disjoint windows (the common kernel = stride): an input pixel lies in at most one window, so
    // the window's item owns its pixels' gradients: 0 + gy for its winner (the sum above, from +0,
    // of one term), +0 for the others; pixels in no window (a size the stride does not divide)
    // keep the zeros written first. The same bits as the gather below.
    Kokkos::parallel_for("reprosgd::max_pool_backward_zero", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * HWC),
                         KOKKOS_LAMBDA(const long e) { gx[e] = 0.0f; });
    Kokkos::parallel_for("reprosgd::max_pool_backward_disjoint", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * OH * OW),
                         KOKKOS_LAMBDA(const long m) {
                           constexpr long block = detail::pool_channel_block;
                           const long n = m / (OH * OW), opix = m - n * (OH * OW);
                           const long oh = opix / OW, ow = opix - oh * OW;
                           const float* xs = x + n * HWC;
                           float* gs = gx + n * HWC;
                           for (long c0 = 0; c0 < C; c0 += block) {
                             const long cw = C - c0 < block ? C - c0 : block;
                             float best_v[block];
                             long best_i[block];
                             for (long j = 0; j < cw; ++j) best_i[j] = -1, best_v[j] = 0.0f;
                             for (long kh = 0; kh < K; ++kh)
                               for (long kw = 0; kw < K; ++kw) {
                                 const long pix = (oh * S + kh) * W + ow * S + kw;
                                 const float* v = xs + pix * C + c0;
                                 for (long j = 0; j < cw; ++j)
                                   if (best_i[j] < 0 || detail::max_pool_takes_over(v[j], best_v[j])) {
                                     best_i[j] = pix;
                                     best_v[j] = v[j];
                                   }
                               }
                             const float* gw = gy + m * C + c0;
                             for (long j = 0; j < cw; ++j) gs[best_i[j] * C + c0 + j] = 0.0f + gw[j];
                           }
                         });
    return;
  }
  Kokkos::parallel_for("reprosgd::max_pool_backward", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * H * W),
                       KOKKOS_LAMBDA(const long e) {
                         constexpr long block = detail::pool_channel_block;
                         const long n = e / (H * W), pix = e - n * (H * W);
                         const long h = pix / W, w = pix - h * W;
                         long oh0 = 0, oh1 = 0, ow0 = 0, ow1 = 0;
                         detail::covering_windows(h, K, S, P, OH, oh0, oh1);
                         detail::covering_windows(w, K, S, P, OW, ow0, ow1);
                         const float* xs = x + n * HWC;
                         for (long c0 = 0; c0 < C; c0 += block) {
                           const long cw = C - c0 < block ? C - c0 : block;
                           float acc[block], best_v[block];
                           long best_i[block];
                           for (long j = 0; j < cw; ++j) acc[j] = 0.0f;
                           for (long oh = oh0; oh <= oh1; ++oh)
                             for (long ow = ow0; ow <= ow1; ++ow) {
                               for (long j = 0; j < cw; ++j) best_i[j] = -1, best_v[j] = 0.0f;
                               for (long kh = 0; kh < K; ++kh) {
                                 const long h2 = oh * S - P + kh;
                                 if (h2 < 0 || h2 >= H) continue;
                                 for (long kw = 0; kw < K; ++kw) {
                                   const long w2 = ow * S - P + kw;
                                   if (w2 < 0 || w2 >= W) continue;
                                   const float* v = xs + (h2 * W + w2) * C + c0;
                                   for (long j = 0; j < cw; ++j)
                                     if (best_i[j] < 0 || detail::max_pool_takes_over(v[j], best_v[j])) {
                                       best_i[j] = h2 * W + w2;
                                       best_v[j] = v[j];
                                     }
                                 }
                               }
                               const float* gw = gy + ((n * OH + oh) * OW + ow) * C + c0;
                               for (long j = 0; j < cw; ++j)
                                 if (best_i[j] == pix) acc[j] = acc[j] + gw[j];
                             }
                           for (long j = 0; j < cw; ++j) gx[e * C + c0 + j] = acc[j];
                         }
                       });
}

/// y(n, oh, ow, c) = (the sum, from +0, of the window's inputs, kh then kw ascending, padding
/// counting as zeros) / (K * K): PyTorch's AvgPool2d with count_include_pad. @deterministic @device
template <class ExecSpace>
void avg_pool_forward(const ExecSpace& space, const WindowGeometry& g, long rows, const float* x, float* y) {
  const long C = g.in.channels, H = g.in.height, W = g.in.width, K = g.kernel, S = g.stride, P = g.padding;
  const long OH = g.out_height(), OW = g.out_width(), HWC = H * W * C;
  const float area = static_cast<float>(K * K);
  Kokkos::parallel_for("reprosgd::avg_pool_forward", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * OH * OW * C),
                       KOKKOS_LAMBDA(const long e) {
                         const long c = e % C, m = e / C;
                         const long n = m / (OH * OW), pix = m - n * (OH * OW);
                         const long oh = pix / OW, ow = pix - oh * OW;
                         const float* xs = x + n * HWC;
                         float acc = 0.0f;
                         for (long kh = 0; kh < K; ++kh) {
                           const long h = oh * S - P + kh;
                           if (h < 0 || h >= H) continue;
                           for (long kw = 0; kw < K; ++kw) {
                             const long w = ow * S - P + kw;
                             if (w >= 0 && w < W) acc = acc + xs[(h * W + w) * C + c];
                           }
                         }
                         y[e] = acc / area;
                       });
}

/// gx(n, h, w, c) = (the sum, from +0, of gy over the windows containing (h, w), oh then ow
/// ascending) / (K * K). @deterministic @device
template <class ExecSpace>
void avg_pool_backward(const ExecSpace& space, const WindowGeometry& g, long rows, const float* gy, float* gx) {
  const long C = g.in.channels, H = g.in.height, W = g.in.width, K = g.kernel, S = g.stride, P = g.padding;
  const long OH = g.out_height(), OW = g.out_width(), HWC = H * W * C;
  const float area = static_cast<float>(K * K);
  Kokkos::parallel_for("reprosgd::avg_pool_backward", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * HWC),
                       KOKKOS_LAMBDA(const long e) {
                         const long n = e / HWC, r = e - n * HWC;
                         const long c = r % C, pix = r / C;
                         const long h = pix / W, w = pix - h * W;
                         long oh0 = 0, oh1 = 0, ow0 = 0, ow1 = 0;
                         detail::covering_windows(h, K, S, P, OH, oh0, oh1);
                         detail::covering_windows(w, K, S, P, OW, ow0, ow1);
                         float acc = 0.0f;
                         for (long oh = oh0; oh <= oh1; ++oh)
                           for (long ow = ow0; ow <= ow1; ++ow) acc = acc + gy[((n * OH + oh) * OW + ow) * C + c];
                         gx[e] = acc / area;
                       });
}

/// y(n, c) = (the sum, from +0, of x(n, h, w, c) over the pixels in storage order) / (H * W).
/// @deterministic @device
template <class ExecSpace>
void global_avg_pool_forward(const ExecSpace& space, const ImageShape& in, long rows, const float* x, float* y) {
  const long C = in.channels, HW = static_cast<long>(in.height) * in.width;
  const float area = static_cast<float>(HW);
  Kokkos::parallel_for("reprosgd::global_avg_pool_forward", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * C),
                       KOKKOS_LAMBDA(const long e) {
                         const long n = e / C, c = e - n * C;
                         const float* xs = x + n * HW * C + c;
                         float acc = 0.0f;
                         for (long p = 0; p < HW; ++p) acc = acc + xs[p * C];
                         y[e] = acc / area;
                       });
}

/// gx(n, h, w, c) = gy(n, c) / (H * W). @deterministic @device
template <class ExecSpace>
void global_avg_pool_backward(const ExecSpace& space, const ImageShape& in, long rows, const float* gy, float* gx) {
  const long C = in.channels, HW = static_cast<long>(in.height) * in.width;
  const float area = static_cast<float>(HW);
  Kokkos::parallel_for("reprosgd::global_avg_pool_backward", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * HW * C),
                       KOKKOS_LAMBDA(const long e) {
                         const long c = e % C, n = e / (HW * C);
                         gx[e] = gy[n * C + c] / area;
                       });
}

REPROSGD_END_NAMESPACE
