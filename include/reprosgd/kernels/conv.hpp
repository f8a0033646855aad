// SPDX-License-Identifier: BSD-3-Clause
/// @file The data movement around a convolution's GEMMs: im2col (the patches of a micro-batch as
/// the rows of a matrix) and col2im (its transpose: the patches' gradients added back into the
/// input gradient, each input element by one thread in a fixed order).
///
/// For NHWC samples a window's kernel x kernel x C floats come as `kernel` runs of `kernel * C`
/// contiguous floats, and the patch matrix's column (kh * kernel + kw) * C + c is exactly the row of
/// the weight matrix that multiplies input channel c at window offset (kh, kw): the convolution is
/// then one GEMM, patches x W, whose output is the NHWC output itself (docs/layers.md).
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/kernels/image.hpp>

#include <Kokkos_Core.hpp>

REPROSGD_BEGIN_NAMESPACE

/**
 * The patch matrix of `rows` samples: col(((n * OH + oh) * OW + ow), (kh * K + kw) * C + c) =
 * x(n, (h * W + w) * C + c) with h = oh * S - P + kh, w = ow * S - P + kw, and 0 where (h, w) lies in
 * the padding. `x` holds rows x (H * W * C) floats, `col` rows * OH * OW x K * K * C, both
 * contiguous. Copies only: the result does not depend on any order. @deterministic @device
 */
template <class ExecSpace>
void im2col(const ExecSpace& space, const WindowGeometry& g, long rows, const float* x, float* col) {
  const long C = g.in.channels, H = g.in.height, W = g.in.width, K = g.kernel, S = g.stride, P = g.padding;
  const long OH = g.out_height(), OW = g.out_width(), KC = K * C, KKC = K * KC, HWC = H * W * C;
  // One work item per patch row; per window row kh the valid offsets kw form one run of
  // contiguous input (kw0..kw1), copied as (kw1 - kw0) * C floats, the padding around it zeroed.
  Kokkos::parallel_for("reprosgd::im2col", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * OH * OW), KOKKOS_LAMBDA(const long m) {
    const long n = m / (OH * OW), pix = m - n * (OH * OW);
    const long oh = pix / OW, ow = pix - oh * OW;
    const long w0 = ow * S - P;  // input column of kw = 0
    const long kw0 = w0 < 0 ? -w0 : 0, kw1 = W - w0 < K ? W - w0 : K;
    float* KOKKOS_RESTRICT dst = col + m * KKC;
    for (long kh = 0; kh < K; ++kh, dst += KC) {
      const long h = oh * S - P + kh;
      if (h < 0 || h >= H || kw1 <= kw0) {
        for (long j = 0; j < KC; ++j) dst[j] = 0.0f;
        continue;
      }
      for (long j = 0; j < kw0 * C; ++j) dst[j] = 0.0f;
      const float* KOKKOS_RESTRICT src = x + n * HWC + (h * W + w0 + kw0) * C;
      const long run = (kw1 - kw0) * C;
      for (long j = 0; j < run; ++j) dst[kw0 * C + j] = src[j];
      for (long j = kw1 * C; j < KC; ++j) dst[j] = 0.0f;
    }
  });
}

/**
 * The input gradient from the patches' gradients (the transpose of im2col): gx(n, h, w, c) is the
 * sum, from +0, over the window offsets kh ascending then kw ascending whose window (oh, ow)
 * contains (h, w), of dcol(((n * OH + oh) * OW + ow), (kh * K + kw) * C + c). One thread owns a
 * pixel's C gradients; no atomics. @deterministic @device
 */
template <class ExecSpace>
void col2im(const ExecSpace& space, const WindowGeometry& g, long rows, const float* dcol, float* gx) {
  const long C = g.in.channels, H = g.in.height, W = g.in.width, K = g.kernel, S = g.stride, P = g.padding;
  const long OH = g.out_height(), OW = g.out_width(), KKC = K * K * C;
  Kokkos::parallel_for("reprosgd::col2im", Kokkos::RangePolicy<ExecSpace>(space, 0, rows * H * W), KOKKOS_LAMBDA(const long e) {
    const long n = e / (H * W), pix = e - n * (H * W);
    const long h = pix / W, w = pix - h * W;
    float* KOKKOS_RESTRICT dst = gx + e * C;
    for (long c = 0; c < C; ++c) dst[c] = 0.0f;
    for (long kh = 0; kh < K; ++kh) {
      const long th = h + P - kh;  // oh * S
      if (th < 0 || th % S != 0 || th / S >= OH) continue;
      const long oh = th / S;
      for (long kw = 0; kw < K; ++kw) {
        const long tw = w + P - kw;
        if (tw < 0 || tw % S != 0 || tw / S >= OW) continue;
        const long ow = tw / S;
        const float* KOKKOS_RESTRICT src = dcol + ((n * OH + oh) * OW + ow) * KKC + (kh * K + kw) * C;
        for (long c = 0; c < C; ++c) dst[c] = dst[c] + src[c];
      }
    }
  });
}

REPROSGD_END_NAMESPACE
