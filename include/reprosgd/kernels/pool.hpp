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

/// The input pixel (h * W + w) that wins max pooling's window (oh, ow) in channel c of the sample
/// at `x`: the first of the window's largest values, walking kh then kw ascending over the pixels
/// inside the input (padding never wins); a NaN wins over every number (it propagates, as in
/// PyTorch), the first NaN over later ones. @device
KOKKOS_INLINE_FUNCTION long max_pool_winner(const float* x, long H, long W, long C, long K, long S, long P, long oh,
                                            long ow, long c) {
  long best = -1;
  float best_v = 0.0f;
  for (long kh = 0; kh < K; ++kh) {
    const long h = oh * S - P + kh;
    if (h < 0 || h >= H) continue;
    for (long kw = 0; kw < K; ++kw) {
      const long w = ow * S - P + kw;
      if (w < 0 || w >= W) continue;
      const float v = x[(h * W + w) * C + c];
      // best_v == best_v: the current winner is not a NaN, so a NaN or a strictly larger value takes over.
      if (best < 0 || (best_v == best_v && (v > best_v || v != v))) {
        best = h * W + w;
        best_v = v;
      }
    }
  }
  return best;
}

}  // namespace detail

/// y(n, oh, ow, c) = the largest x in the window (detail::max_pool_winner). @deterministic @device
template <class ExecSpace>
void max_pool_forward(const ExecSpace& space, const WindowGeometry& g, long rows, const float* x, float* y) {
  const long C = g.in.channels, H = g.in.height, W = g.in.width, K = g.kernel, S = g.stride, P = g.padding;
  const long OH = g.out_height(), OW = g.out_width(), HWC = H * W * C;
  Kokkos::parallel_for("reprosgd::max_pool_forward", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * OH * OW * C),
                       KOKKOS_LAMBDA(const long e) {
                         const long c = e % C, m = e / C;
                         const long n = m / (OH * OW), pix = m - n * (OH * OW);
                         const long oh = pix / OW, ow = pix - oh * OW;
                         const float* xs = x + n * HWC;
                         y[e] = xs[detail::max_pool_winner(xs, H, W, C, K, S, P, oh, ow, c) * C + c];
                       });
}

/// gx(n, h, w, c) = the sum, from +0, over the windows (oh ascending, then ow) that contain (h, w)
/// and whose winner it is, of gy(n, oh, ow, c): each window's gradient goes to its one winner (the
/// lowest index of a tie). @deterministic @device
template <class ExecSpace>
void max_pool_backward(const ExecSpace& space, const WindowGeometry& g, long rows, const float* x, const float* gy,
                       float* gx) {
  const long C = g.in.channels, H = g.in.height, W = g.in.width, K = g.kernel, S = g.stride, P = g.padding;
  const long OH = g.out_height(), OW = g.out_width(), HWC = H * W * C;
  Kokkos::parallel_for("reprosgd::max_pool_backward", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * HWC),
                       KOKKOS_LAMBDA(const long e) {
                         const long n = e / HWC, r = e - n * HWC;
                         const long c = r % C, pix = r / C;
                         const long h = pix / W, w = pix - h * W;
                         const float* xs = x + n * HWC;
                         float acc = 0.0f;
                         for (long oh = 0; oh < OH; ++oh) {
                           const long h0 = oh * S - P;
                           if (h < h0 || h >= h0 + K) continue;
                           for (long ow = 0; ow < OW; ++ow) {
                             const long w0 = ow * S - P;
                             if (w < w0 || w >= w0 + K) continue;
                             if (detail::max_pool_winner(xs, H, W, C, K, S, P, oh, ow, c) == pix)
                               acc = acc + gy[((n * OH + oh) * OW + ow) * C + c];
                           }
                         }
                         gx[e] = acc;
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
                         float acc = 0.0f;
                         for (long oh = 0; oh < OH; ++oh) {
                           const long h0 = oh * S - P;
                           if (h < h0 || h >= h0 + K) continue;
                           for (long ow = 0; ow < OW; ++ow) {
                             const long w0 = ow * S - P;
                             if (w >= w0 && w < w0 + K) acc = acc + gy[((n * OH + oh) * OW + ow) * C + c];
                           }
                         }
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
