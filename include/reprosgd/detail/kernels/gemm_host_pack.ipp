// SPDX-License-Identifier: BSD-3-Clause
// The host GEMM's panel packing for one instruction set (included by gemm_host_isa.ipp, no include
// guard): A into strips of mr rows and B into strips of nr columns, laid out as the micro-kernel
// reads them (pure data movement: no arithmetic, so no effect on the bits), with an 8x8 AVX
// transpose when an operand's contiguous direction is the other one.

#if REPROSGD_IMPL_GEMM_AVX
/// Transposes an 8x8 block: out[c][r] = rows[r][c] for r, c < 8 (pure data movement, used by the
/// packing routines when an operand's contiguous direction is the other one).
REPROSGD_IMPL_GEMM_TARGET inline void transpose8(const float* const rows[8], __m256 out[8]) {
  const __m256 r0 = _mm256_loadu_ps(rows[0]), r1 = _mm256_loadu_ps(rows[1]);
  const __m256 r2 = _mm256_loadu_ps(rows[2]), r3 = _mm256_loadu_ps(rows[3]);
  const __m256 r4 = _mm256_loadu_ps(rows[4]), r5 = _mm256_loadu_ps(rows[5]);
  const __m256 r6 = _mm256_loadu_ps(rows[6]), r7 = _mm256_loadu_ps(rows[7]);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  out[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  out[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  out[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  out[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  out[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  out[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  out[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  out[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}
#endif

/// Packs rows [i0, i0+strips*mr) x columns [p0, p0+kc) of the logical M x K matrix A into
/// strips of mr rows: out[s*mr*kc + p*mr + r] = A(i0 + s*mr + r, p0 + p), zero beyond row M.
REPROSGD_IMPL_GEMM_TARGET inline void pack_a(const Operand& a, int m, int i0, int strips, int p0, int kc, float* out) {
  for (int s = 0; s < strips; ++s) {
    float* dst = out + static_cast<std::ptrdiff_t>(s) * mr * kc;
    const int row0 = i0 + s * mr;
    const int rows = std::min(mr, m - row0);
    if (rows == mr && a.cs == 1) {  // A row-major: mr sequential read streams, sequential writes
      const float* src[mr];
      for (int r = 0; r < mr; ++r) src[r] = a.data + (row0 + r) * a.rs + p0;
      int p = 0;
#if REPROSGD_IMPL_GEMM_AVX
      if constexpr (mr == 6) {
        // 8 columns at a time: transpose 6 rows (plus 2 ignored) and store 6 floats per column.
        for (; p + 8 <= kc; p += 8) {
          const float* rows8[8] = {src[0] + p, src[1] + p, src[2] + p, src[3] + p,
                                   src[4] + p, src[5] + p, src[5] + p, src[5] + p};
          __m256 t[8];
          transpose8(rows8, t);
#pragma GCC unroll 8
          for (int q = 0; q < 8; ++q) {
            float* d = dst + (p + q) * mr;
            _mm_storeu_ps(d, _mm256_castps256_ps128(t[q]));
            _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), _mm256_extractf128_ps(t[q], 1));
          }
        }
      }
#endif
      for (; p < kc; ++p)
#pragma GCC unroll 32
        for (int r = 0; r < mr; ++r) dst[p * mr + r] = src[r][p];
    } else if (rows == mr && a.rs == 1) {  // A stored transposed (K x M): mr consecutive values per p
      for (int p = 0; p < kc; ++p) std::memcpy(dst + p * mr, a.data + (p0 + p) * a.cs + row0, sizeof(float) * mr);
    } else {
      // A partial strip (rows < mr, zero-padded: the narrow C^T of the output layer has 10 rows of
      // 12), or a layout with no unit stride.
      for (int p = 0; p < kc; ++p) {
        float* d = dst + p * mr;
        const float* col = a.data + static_cast<std::ptrdiff_t>(row0) * a.rs + static_cast<std::ptrdiff_t>(p0 + p) * a.cs;
        if (a.rs == 1)  // (a loop: a library memcpy call per p cost more than the copy)
          for (int r = 0; r < rows; ++r) d[r] = col[r];
        else
          for (int r = 0; r < rows; ++r) d[r] = col[r * a.rs];
        for (int r = rows; r < mr; ++r) d[r] = 0.0f;
      }
    }
  }
}

/// The columns a micro-kernel reads of a B strip with `cols` valid ones: one vector where they fit
/// in it (micro_kernel_edge then runs the one-vector kernel), else all nr.
constexpr int padded_columns(int cols) { return cols <= lanes ? lanes : nr; }

/// Zeroes the padding of a packed B strip with `cols` valid columns, rows p < kc: columns [cols,
/// padded_columns(cols)), in whole vectors, so also the valid columns of the last vector that holds
/// padding: call it before copying them in. (A loop of scalar zeros per row became a memset call
/// per row, a fifth of nn 16x10x512, and one of size 0 where there was no padding.)
REPROSGD_IMPL_GEMM_TARGET inline void zero_padding(float* dst, int kc, int cols) {
  const int padded = padded_columns(cols);
  if (cols >= padded) return;
  for (int p = 0; p < kc; ++p)
    for (int c = cols / lanes * lanes; c < padded; c += lanes) store(dst + static_cast<std::ptrdiff_t>(p) * nr + c, vfloat{});
}

/// Packs rows [p0, p0+kc) x columns [j0, j0+strips*nr) of the logical K x N matrix B into strips
/// of nr columns: out[s*nr*kc + p*nr + c] = B(p0 + p, j0 + s*nr + c), zero from column N to
/// padded_columns (the columns past that are never read).
REPROSGD_IMPL_GEMM_TARGET inline void pack_b(const Operand& b, int n, int j0, int strips, int p0, int kc, float* out) {
  if (strips <= 0) return;
  const auto columns = [&](int s) { return std::clamp(n - (j0 + s * nr), 0, nr); };  // valid columns of strip s
  if (b.cs == 1) {
    // B row-major: read each row segment sequentially and deal it out to the strips (reading a
    // strip at a time would walk B with the row stride, which defeats the caches).
    // (Whole strips copy a compile-time nr floats, which the compiler inlines: a memcpy of a run-time
    // size is a library call per row, 11% of a micro-batch-32 training step when every strip took it.)
    const int last_cols = columns(strips - 1);
    const int whole = last_cols == nr ? strips : strips - 1;
    if (whole < strips) zero_padding(out + static_cast<std::ptrdiff_t>(strips - 1) * nr * kc, kc, last_cols);
    for (int p = 0; p < kc; ++p) {
      const float* src = b.data + static_cast<std::ptrdiff_t>(p0 + p) * b.rs + j0;
      float* dst = out + p * nr;
      for (int s = 0; s < whole; ++s)
        std::memcpy(dst + static_cast<std::ptrdiff_t>(s) * nr * kc, src + s * nr, sizeof(float) * nr);
      if (whole < strips) {
        float* last = dst + static_cast<std::ptrdiff_t>(strips - 1) * nr * kc;
        for (int j = 0; j < last_cols; ++j) last[j] = src[(strips - 1) * nr + j];
      }
    }
    return;
  }
  for (int s = 0; s < strips; ++s) {
    float* dst = out + static_cast<std::ptrdiff_t>(s) * nr * kc;
    const int col0 = j0 + s * nr;
    const int cols = columns(s);
    zero_padding(dst, kc, cols);
    int j = 0;
    if (b.rs == 1) {
      // B stored transposed (N x K): each stored row is one column of the strip, contiguous in p.
#if REPROSGD_IMPL_GEMM_AVX
      // 8 x 8 blocks: 8 stored rows (columns of the strip) by 8 values of p, transposed.
      const int p_end = kc - kc % 8;
      for (; j + 8 <= cols; j += 8) {
        const float* rows8[8];
        for (int r = 0; r < 8; ++r) rows8[r] = b.data + static_cast<std::ptrdiff_t>(col0 + j + r) * b.cs + p0;
        for (int p = 0; p < p_end; p += 8) {
          const float* at[8];
#pragma GCC unroll 8
          for (int r = 0; r < 8; ++r) at[r] = rows8[r] + p;
          __m256 t[8];
          transpose8(at, t);
#pragma GCC unroll 8
          for (int q = 0; q < 8; ++q) _mm256_storeu_ps(dst + (p + q) * nr + j, t[q]);
        }
        for (int r = 0; r < 8; ++r)
          for (int p = p_end; p < kc; ++p) dst[p * nr + j + r] = rows8[r][p];
      }
#endif
      for (; j < cols; ++j) {
        const float* src = b.data + static_cast<std::ptrdiff_t>(col0 + j) * b.cs + p0;
        for (int p = 0; p < kc; ++p) dst[p * nr + j] = src[p];
      }
    } else {
      // No unit stride (not used by the GEMM entry points): element by element.
      for (int p = 0; p < kc; ++p)
        for (int c = 0; c < cols; ++c)
          dst[p * nr + c] = b.data[static_cast<std::ptrdiff_t>(p0 + p) * b.rs + static_cast<std::ptrdiff_t>(col0 + c) * b.cs];
    }
  }
}
