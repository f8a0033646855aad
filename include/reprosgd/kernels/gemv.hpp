// SPDX-License-Identifier: BSD-3-Clause
/// @file gemv_bias: y = x W + b for a few rows (inference at small batches), with the bits of
/// gemm_nn_bias, streaming W once per block of columns instead of packing it.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/detail/kernels/gemm_generic.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/gemm.hpp>

#include <Kokkos_Core.hpp>

#include <string>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
/// Columns one work item of the host gemv owns (four 16-lane vectors of accumulators per row).
inline constexpr long gemv_columns = 64;
/// Rows one work item of the host gemv owns (B is read once for all of them).
inline constexpr int gemv_rows = 4;

/// C's R rows and `w` columns at `c` (rows `ldc` apart) = R rows of A (rows `lda` apart) times the
/// `w` columns of B at `b` (rows `ldb` apart), k ascending with one fused multiply-add per step
/// from +0, then + bias. The accumulators are local (not address-taken), so whole blocks stay in
/// vector registers.
template <int R, long W>
KOKKOS_INLINE_FUNCTION void gemv_block(const float* a, long lda, const float* b, long ldb, long depth,
                                       const float* bias, float* c, long ldc) {
  float acc[R][W];
  for (int r = 0; r < R; ++r)
    for (long j = 0; j < W; ++j) acc[r][j] = 0.0f;
  for (long p = 0; p < depth; ++p) {
    const float* KOKKOS_RESTRICT row = b + p * ldb;
    for (int r = 0; r < R; ++r) {
      const float x = a[r * lda + p];
      for (long j = 0; j < W; ++j) acc[r][j] = fused_multiply_add(x, row[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (long j = 0; j < W; ++j) c[r * ldc + j] = acc[r][j] + bias[j];
}
/// gemv_block for one row and a partial block of w < gemv_columns columns.
KOKKOS_INLINE_FUNCTION void gemv_partial(const float* a, const float* b, long ldb, long depth, long w,
                                         const float* bias, float* c) {
  float acc[gemv_columns];
  for (long j = 0; j < w; ++j) acc[j] = 0.0f;
  for (long p = 0; p < depth; ++p) {
    const float* KOKKOS_RESTRICT row = b + p * ldb;
    const float x = a[p];
    for (long j = 0; j < w; ++j) acc[j] = fused_multiply_add(x, row[j], acc[j]);
  }
  for (long j = 0; j < w; ++j) c[j] = acc[j] + bias[j];
}
}  // namespace detail

/// The most rows for which Inference runs gemv_bias instead of the packed GEMM on the host: on the
/// 784-512-512-10 model, one thread, gemv_bias takes 71, 74 and 125 us at 1, 2 and 4 rows, the GEMM
/// 154, 157 and 174 us; at 8 rows 222 against 203 (bench/README.md, "predict_bench").
inline constexpr long gemv_max_rows = 4;

/**
 * C = A * B + bias for row-major float matrices with few rows (A is M x K, B is K x N, bias N,
 * C M x N): the bits of gemm_nn_bias — every element `acc = +0.0f; for p = 0..K-1 ascending:
 * acc = fma(A(i,p), B(p,j), acc)`, then one rounded `acc + bias(j)` — computed without packing B.
 *
 * On host spaces a work item owns up to 4 rows and a block of 64 columns: it walks B's rows once,
 * k ascending, with 4 x 64 accumulators (vector registers), so B is read once per 4 rows instead
 * of being packed (read, written, read) as the GEMM's register-blocked kernel does — the
 * difference at M = 1 (a GEMV), where packing costs more than the arithmetic. Other spaces run
 * gemm_nn_bias (the same bits). Not collective. Asynchronous: fence `space` before reading C.
 *
 * @throws config_error on mismatched shapes (gemm_nn_bias's checks and messages)
 * @deterministic the same bits as gemm_nn_bias for every M, backend and thread count.
 */
template <class ExecSpace, RowMajorMatrix AV, RowMajorMatrix BV, class BiasV, MutableRowMajorMatrix CV>
  requires Kokkos::is_execution_space<ExecSpace>::value && Kokkos::is_view<BiasV>::value &&
           (static_cast<int>(BiasV::rank) == 1) && std::same_as<typename BiasV::non_const_value_type, float>
void gemv_bias(const ExecSpace& space, const AV& a, const BV& b, const BiasV& bias, const CV& c) {
  if constexpr (!detail::is_host_space_v<ExecSpace>) {
    gemm_nn_bias(space, a, b, bias, c);
  } else {
    const std::size_t m = a.extent(0), k = a.extent(1), n = b.extent(1);
    detail::check_gemm<detail::gemm_op::nn>("gemv_bias", a, b, c, m, n, k);
    if (bias.extent(0) != n)
      throw config_error("reprosgd::gemv_bias: B is " + detail::shape_string(b.extent(0), n) + " but the bias has " +
                         std::to_string(bias.extent(0)) + " elements");
    if (detail::views_overlap(c, bias))
      throw config_error("reprosgd::gemv_bias: C overlaps the bias (the result must not alias an input)");
    const long rows = static_cast<long>(m), cols = static_cast<long>(n), depth = static_cast<long>(k);
    if (rows == 0 || cols == 0) return;
    constexpr long W = detail::gemv_columns;
    constexpr long R = detail::gemv_rows;
    const long col_blocks = (cols + W - 1) / W, row_blocks = (rows + R - 1) / R;
    const float* ap = a.data();
    const float* bp = b.data();
    float* cp = c.data();
    const float* biasp = bias.data();
    const long lda = static_cast<long>(a.stride(0)), ldb = static_cast<long>(b.stride(0)),
               ldc = static_cast<long>(c.stride(0));
    Kokkos::parallel_for(
        "reprosgd::gemv_bias", Kokkos::RangePolicy<ExecSpace>(space, 0, row_blocks * col_blocks),
        KOKKOS_LAMBDA(const long t) {
          const long i0 = (t / col_blocks) * R, j0 = (t % col_blocks) * W;
          const long w = cols - j0 < W ? cols - j0 : W, h = rows - i0 < R ? rows - i0 : R;
          const float* a0 = ap + i0 * lda;
          const float* b0 = bp + j0;
          float* c0 = cp + i0 * ldc + j0;
          if (w == W) {  // whole blocks: fixed trip counts
            switch (h) {
              case 1: detail::gemv_block<1, W>(a0, lda, b0, ldb, depth, biasp + j0, c0, ldc); break;
              case 2: detail::gemv_block<2, W>(a0, lda, b0, ldb, depth, biasp + j0, c0, ldc); break;
              case 3: detail::gemv_block<3, W>(a0, lda, b0, ldb, depth, biasp + j0, c0, ldc); break;
              default: detail::gemv_block<4, W>(a0, lda, b0, ldb, depth, biasp + j0, c0, ldc); break;
            }
          } else {
            for (long r = 0; r < h; ++r)
              detail::gemv_partial(a0 + r * lda, b0, ldb, depth, w, biasp + j0, c0 + r * ldc);
          }
        });
  }
}

REPROSGD_END_NAMESPACE
