// SPDX-License-Identifier: BSD-3-Clause
// The host GEMM for one instruction set (included by gemm_host_isa.ipp, no include guard): the
// register-blocked micro-kernel, the tile plan, and a tile computed from packed panels.

/// C[0:mr, 0:nr] (row stride ldc) = (first ? 0 : C) followed by kc steps of acc = fma(a, b, acc), where
/// step p reads A(r, p) = ap[r*ars + p*acs] and the B micro-panel row bp[p*brs + 0:nr].
/// Packed A micro-panels have ars = 1, acs = mr (compile-time when Packed, so the compiler can use
/// constant offsets for the rows); A read in place has its own strides. A packed B micro-panel has
/// brs = nr, B read in place its row stride (a run-time stride costs nothing here: the columns of a
/// row are constant offsets from bp either way, and one template parameter less halves the
/// instantiations, which every translation unit with a GEMM compiles).
// Rows < mr computes only the first Rows rows of the micro-tile (the last, partial row strip of C:
// 128 = 21 x 6 + 2 rows spends a third of a full call on 2 rows instead of a whole one).
// The body is inlined only into micro_kernel, never into a larger caller.
// NV (1 to nv) vectors of columns: a tile with at most `lanes` valid columns (C^T of the output
// layer at micro-batch 16: 10 x 16) runs NV = 1 and does no multiply-adds on padding lanes.
template <bool Packed, int Rows, int NV = nv>
REPROSGD_IMPL_GEMM_TARGET __attribute__((always_inline)) inline void micro_kernel_body(
    int kc, const float* __restrict ap, std::ptrdiff_t ars, std::ptrdiff_t acs, const float* __restrict bp,
    std::ptrdiff_t brs, float* __restrict c, std::ptrdiff_t ldc, bool first, const float* __restrict bias) {
  static_assert(Rows >= 1 && Rows <= mr && NV >= 1 && NV <= nv);
  if constexpr (Packed) {
    ars = 1;
    acs = mr;
  }
  vfloat acc[Rows][NV];
  if (first) {
#pragma GCC unroll 32
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = vfloat{};  // +0.0f in every lane
  } else {
#pragma GCC unroll 32
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = load(c + r * ldc + v * lanes);
  }
  for (int p = 0; p < kc; ++p) {
    vfloat b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = load(bp + v * lanes);
#pragma GCC unroll 32
    for (int r = 0; r < Rows; ++r) {
      const float a = ap[r * ars];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        // The scalar a is broadcast to every lane; fma(b, a, acc) == fma(a, b, acc) exactly.
        acc[r][v] = fused_multiply_add(b[v], a, acc[r][v]);
      }
    }
    ap += acs;
    bp += brs;
  }
  if (bias) {
    // Epilogue of the last K block: the finished sum plus the bias, one rounded add, exactly as a
    // separate pass y(i,j) = y(i,j) + b(j) would do it.
    vfloat bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = load(bias + v * lanes);
#pragma GCC unroll 32
    for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = acc[r][v] + bv[v];
  }
#pragma GCC unroll 32
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) store(c + r * ldc + v * lanes, acc[r][v]);
}

// Never inlined: inlined into a large caller (the Kokkos functor, with the packing loops) GCC 12
// spilled 8 of the 12 accumulators to the stack in the inner loop and the GEMM ran at half speed
// (40 against 77 GFLOP/s on 128x512x784); on its own it keeps all of them in registers.
template <bool Packed, int Rows = mr, int NV = nv>
REPROSGD_IMPL_GEMM_TARGET __attribute__((noinline)) void micro_kernel(int kc, const float* ap, std::ptrdiff_t ars,
                                                                      std::ptrdiff_t acs, const float* bp,
                                                                      std::ptrdiff_t brs, float* c, std::ptrdiff_t ldc,
                                                                      bool first, const float* bias = nullptr) {
  micro_kernel_body<Packed, Rows, NV>(kc, ap, ars, acs, bp, brs, c, ldc, first, bias);
}

/// The micro-kernel on the first `rows` (1 to mr) rows of a tile with NV * lanes columns (all nr
/// by default): one instantiation per row count, picked from a table.
template <bool Packed, int NV, std::size_t... R>
constexpr auto micro_kernels_by_rows(std::index_sequence<R...>) {
  return std::array{&micro_kernel<Packed, static_cast<int>(R) + 1, NV>...};
}
template <bool Packed, int NV = nv>
REPROSGD_IMPL_GEMM_TARGET inline void micro_kernel_rows(int rows, int kc, const float* ap, std::ptrdiff_t ars,
                                                        std::ptrdiff_t acs, const float* bp, std::ptrdiff_t brs, float* c,
                                                        std::ptrdiff_t ldc, bool first, const float* bias) {
  static constexpr auto table = micro_kernels_by_rows<Packed, NV>(std::make_index_sequence<mr>{});
  table[static_cast<std::size_t>(rows - 1)](kc, ap, ars, acs, bp, brs, c, ldc, first, bias);
}

/// The micro-kernel on a tile with fewer than nr columns (and any rows): runs on a full-size
/// buffer and copies only the valid part in and out.
template <bool Packed>
REPROSGD_IMPL_GEMM_TARGET inline void micro_kernel_edge(int kc, const float* ap, std::ptrdiff_t ars, std::ptrdiff_t acs, const float* bp,
                              float* c, std::ptrdiff_t ldc, bool first, int rows, int cols,
                              const float* bias = nullptr) {
  alignas(alignment) float tile[mr * nr];
  alignas(alignment) float bias_tile[nr];
  if (!first) {
    std::fill(tile, tile + mr * nr, 0.0f);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < cols; ++j) tile[r * nr + j] = c[r * ldc + j];
  }
  if (bias) {
    std::fill(bias_tile, bias_tile + nr, 0.0f);
    for (int j = 0; j < cols; ++j) bias_tile[j] = bias[j];
  }
  // Only the valid rows: A read in place has no rows past them. At most `lanes` valid columns: one
  // vector of them (the padding lanes of the second would be half the multiply-adds).
  const float* tile_bias = bias ? bias_tile : nullptr;
  if (padded_columns(cols) < nr)
    micro_kernel_rows<Packed, 1>(rows, kc, ap, ars, acs, bp, nr, tile, nr, first, tile_bias);
  else
    micro_kernel_rows<Packed>(rows, kc, ap, ars, acs, bp, nr, tile, nr, first, tile_bias);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < cols; ++j) c[r * ldc + j] = tile[r * nr + j];
}

/// One micro-tile of `rows` x `cols` (at most mr x nr): the kernel for its row count where all nr
/// columns are there (B packed, brs = nr, or read in place), else the edge kernel on a local tile
/// (B is then always a packed panel: B is read in place only for whole strips).
template <bool Packed>
REPROSGD_IMPL_GEMM_TARGET inline void micro_tile(int rows, int cols, int kc, const float* ap, std::ptrdiff_t ars,
                                                 std::ptrdiff_t acs, const float* bp, std::ptrdiff_t brs, float* c,
                                                 std::ptrdiff_t ldc, bool first, const float* bias) {
  if (cols == nr)
    micro_kernel_rows<Packed>(rows, kc, ap, ars, acs, bp, brs, c, ldc, first, bias);
  else
    micro_kernel_edge<Packed>(kc, ap, ars, acs, bp, c, ldc, first, rows, cols, bias);
}

#if REPROSGD_IMPL_GEMM_AVX
inline constexpr bool can_stream = true;
/// Copies a finished mr x nr micro-tile (row stride nr) to C with non-temporal stores: C's rows
/// and ldc are aligned to the vector (compute_block checks). Pure data movement.
REPROSGD_IMPL_GEMM_TARGET inline void stream_tile(const float* tile, float* c, std::ptrdiff_t ldc) {
#pragma GCC unroll 32
  for (int r = 0; r < mr; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < nv; ++v) stream_store(c + r * ldc + v * lanes, load(tile + r * nr + v * lanes));
}
#else
inline constexpr bool can_stream = false;
#endif

/// The share of the micro-tiles' lanes an R x C product fills: R x C outputs over the mr x nr blocks
/// that cover it.
inline double lane_fill(int rows, int cols) {
  return static_cast<double>(rows) * cols /
         (static_cast<double>(ceil_div(rows, mr)) * mr * static_cast<double>(ceil_div(cols, nr)) * nr);
}

/// A plan for an M x N x K product on `threads` threads: tiles no larger than nc_max columns and
/// mc_max rows (fewer when the A block mc x kc would exceed a_block_bytes),
/// at least `threads` of them when C is large enough, and a multiple of `threads` when cheap, so
/// the threads get equal work; strips are spread evenly over the tiles. A C of at least `stream_min`
/// bytes finished in one K block is streamed past the caches (stream_c_threshold()).
/// A narrow C is computed transposed (Plan::transposed): the output layer's 10 columns fill 10 of
/// the 32 lanes of an AVX-512 micro-tile, while C^T's 10 rows fill 10 of its 12 rows.
REPROSGD_IMPL_GEMM_TARGET inline Plan make_plan(int m, int n, int k, int threads, long stream_min) {
  Plan pl{};
  pl.isa = isa;
  pl.mr = mr;
  pl.nr = nr;
  pl.transposed = m > 0 && n > 0 && lane_fill(n, m) > 1.2 * lane_fill(m, n);
  if (pl.transposed) std::swap(m, n);
  pl.m = m;
  pl.n = n;
  pl.k = k;
  pl.strips_m = std::max(1, ceil_div(m, mr));
  pl.strips_n = std::max(1, ceil_div(n, nr));
  const int kblocks = std::max(1, ceil_div(k, kc_target));
  pl.kc = std::max(1, ceil_div(k, kblocks));
  const int tile_strips = std::clamp(a_block_bytes / (pl.kc * mr * static_cast<int>(sizeof(float))), 1, mc_strips);
  pl.tiles_m = ceil_div(pl.strips_m, tile_strips);
  pl.tiles_n = ceil_div(pl.strips_n, std::max(1, nc_max / nr));
  threads = std::max(1, threads);
  // Enough tiles for every thread: split the dimension with more strips per tile.
  while (pl.tiles_m * pl.tiles_n < threads) {
    const bool can_m = pl.tiles_m < pl.strips_m;
    const bool can_n = pl.tiles_n < pl.strips_n;
    if (!can_m && !can_n) break;
    if (can_n && (!can_m || pl.strips_n * pl.tiles_m >= pl.strips_m * pl.tiles_n))
      ++pl.tiles_n;
    else
      ++pl.tiles_m;
  }
  // Balance: make the tile count a multiple of the thread count if a few more splits allow it.
  if (threads > 1 && pl.tiles() % threads != 0) {
    for (int extra = 1; extra < threads; ++extra) {
      if (pl.tiles_n + extra <= pl.strips_n && (pl.tiles_m * (pl.tiles_n + extra)) % threads == 0) {
        pl.tiles_n += extra;
        break;
      }
      if (pl.tiles_m + extra <= pl.strips_m && ((pl.tiles_m + extra) * pl.tiles_n) % threads == 0) {
        pl.tiles_m += extra;
        break;
      }
    }
  }
  pl.max_strips_m = ceil_div(pl.strips_m, pl.tiles_m);
  pl.max_strips_n = ceil_div(pl.strips_n, pl.tiles_n);
  // A transposed plan writes C^T into the tile's scratch, which it reads back at once.
  pl.stream_c = can_stream && !pl.transposed && kblocks == 1 &&
                static_cast<long>(m) * n * static_cast<long>(sizeof(float)) >= stream_min;
  return pl;
}

/// Computes the block of micro-tile strips [sm0, sm1) x [sn0, sn1) of C = A * B (logical shapes
/// M x K and K x N of the plan) completely, all K blocks in ascending order, into `c`, the block's
/// first element (row stride ldc); with `bias` (N floats) the last K block adds bias[j] to each
/// finished element. `buffer` holds at least plan.packing_floats() floats.
REPROSGD_IMPL_GEMM_TARGET inline void compute_block(const Plan& pl, int sm0, int sm1, int sn0, int sn1,
                                                    const Operand& a, const Operand& b, float* c, std::ptrdiff_t ldc,
                                                    float* buffer, const float* bias) {
  const int i0 = sm0 * mr, j0 = sn0 * nr;
  const int i1 = std::min(pl.m, sm1 * mr), j1 = std::min(pl.n, sn1 * nr);
  if (pl.k == 0) {  // empty sum: the reference leaves acc = +0.0f (then the bias is added)
    for (int i = i0; i < i1; ++i)
      for (int j = j0; j < j1; ++j) c[(i - i0) * ldc + (j - j0)] = bias ? 0.0f + bias[j] : 0.0f;
    return;
  }
  // A is packed once per K block into MR-row strips that every column strip of the tile reuses. In
  // a narrow tile (few column strips, e.g. N = 10, or C^T of the output layer) A is read in place
  // instead, where the copy would not pay for itself: row-major (gemm_nn, gemm_nt) or transposed
  // (gemm_tn: the MR values of a step are adjacent, the steps a row apart); a partial last row
  // strip (rows < MR) then runs the kernel instantiated for its row count, which reads no row past
  // them.
  // A stored transposed with the whole block in one row strip and at most mr values per stored row
  // (W^T of the output layer in C^T = W^T X^T: 10 values per step, the steps adjacent) is already
  // laid out as a packed strip, contiguous; copying it was 5% of nn 128x10x512.
  const bool a_is_a_strip = a.rs == 1 && a.cs <= mr && sm1 - sm0 == 1;
  const bool direct_a = ((a.cs == 1 || a.rs == 1) && sn1 - sn0 < pack_a_min_strips) || a_is_a_strip;
  // Whole micro-tiles go to C through non-temporal stores (Plan::stream_c) where C's rows are
  // aligned to the vector: the micro-kernel writes an L1 tile, stream_tile copies it out.
  constexpr std::uintptr_t vector_bytes = lanes * sizeof(float);
  const bool stream = pl.stream_c && reinterpret_cast<std::uintptr_t>(c) % vector_bytes == 0 &&
                      (static_cast<std::uintptr_t>(ldc) * sizeof(float)) % vector_bytes == 0;
  alignas(alignment) float stream_buffer[mr * nr];
  float* abuf = align_up(buffer);
  float* bbuf = align_up(abuf + static_cast<std::ptrdiff_t>(direct_a ? 0 : pl.max_strips_m) * mr * pl.kc);
  for (int p0 = 0; p0 < pl.k; p0 += pl.kc) {
    const int kc = std::min(pl.kc, pl.k - p0);
    const bool first = p0 == 0;
    const bool last = p0 + kc == pl.k;
    if (!direct_a) pack_a(a, pl.m, i0, sm1 - sm0, p0, kc, abuf);
    for (int sn = sn0; sn < sn1; ++sn) {
      const int j = sn * nr;
      const int cols = std::min(nr, pl.n - j);
      // The B micro-panel is packed just before the row strips use it, so it is hot in L1. Where at
      // most direct_b_max_strips row strips use it and B is row-major, the kernel reads B in place
      // instead: the copy would be read once (C^T of the output layer, 10 rows: it was a fifth of
      // tn 512x10x128) or a few times (a micro-batch of 32 or 16 rows times the weights: the first
      // call brings the panel into L1/L2; nn 32x512x784 1.06 -> 1.18-1.23 of OpenBLAS, 16x512x784
      // 1.00 -> 1.24, 1 thread, Zen 4). Prefetching the next panel, which helps the packed path,
      // did not help here (16x512x784: 1.17-1.18 with it).
      const bool direct_b = b.cs == 1 && sm1 - sm0 <= direct_b_max_strips && cols == nr;
      const float* bp = bbuf;
      std::ptrdiff_t brs = nr;
      if (direct_b) {
        bp = b.data + static_cast<std::ptrdiff_t>(p0) * b.rs + j;
        brs = b.rs;
      } else {
        pack_b(b, pl.n, j, 1, p0, kc, bbuf);
      }
      const float* bias_j = last && bias ? bias + j : nullptr;
      // While the row strips run, prefetch the rows of the next B micro-panel: a row-major B is
      // read NR floats per row at the row stride, a pattern the hardware prefetcher follows poorly
      // (without this, packing B was ~6% of a training step, stalled on L3).
      const bool prefetch_b = b.cs == 1 && sn + 1 < sn1 && !direct_b;
      const int prefetch_rows = ceil_div(kc, sm1 - sm0);
      const float* next_b = b.data + static_cast<std::ptrdiff_t>(p0) * b.rs + j + nr;
      for (int sm = sm0; sm < sm1; ++sm) {
        const int i = sm * mr;
        const int rows = std::min(mr, pl.m - i);
        float* cp = c + (i - i0) * ldc + (j - j0);
        if (prefetch_b) {
          const int q0 = (sm - sm0) * prefetch_rows, q1 = std::min(kc, q0 + prefetch_rows);
          for (int q = q0; q < q1; ++q) {
            __builtin_prefetch(next_b + static_cast<std::ptrdiff_t>(q) * b.rs, 0, 3);
            __builtin_prefetch(next_b + static_cast<std::ptrdiff_t>(q) * b.rs + nr - 1, 0, 3);
          }
        }
        const bool stream_this = stream && rows == mr && cols == nr;
        float* const out = stream_this ? stream_buffer : cp;
        const std::ptrdiff_t ldo = stream_this ? nr : ldc;
        if (direct_a)
          micro_tile<false>(rows, cols, kc,
                            a.data + static_cast<std::ptrdiff_t>(i) * a.rs + static_cast<std::ptrdiff_t>(p0) * a.cs,
                            a.rs, a.cs, bp, brs, out, ldo, first, bias_j);
        else
          micro_tile<true>(rows, cols, kc, abuf + static_cast<std::ptrdiff_t>(sm - sm0) * mr * kc, 1, mr, bp, brs, out,
                           ldo, first, bias_j);
#if REPROSGD_IMPL_GEMM_AVX
        if (stream_this) stream_tile(stream_buffer, cp, ldc);
#endif
      }
    }
  }
#if REPROSGD_IMPL_GEMM_AVX
  // Non-temporal stores are weakly ordered: make them visible before the kernel's end (the team's
  // barrier) lets another thread, or the next kernel, read C.
  if (stream) _mm_sfence();
#endif
}

/// Computes tile `t` of C = A * B (logical shapes M x K and K x N) completely; with `bias` (N floats)
/// each finished element gets bias[j] added. `buffer` holds at least plan.buffer_floats() floats.
/// A transposed plan computes the tile of C^T = op(B)^T op(A)^T: element (j, i) is the chain of
/// fma(B(p, j), A(i, p), acc), p ascending, from +0, and fma(b, a, acc) == fma(a, b, acc) exactly, so
/// it is C(i, j)'s chain; the tile is written back transposed, with the bias added there (the one
/// rounded add the untransposed kernel's epilogue does).
REPROSGD_IMPL_GEMM_TARGET inline void compute_tile(const Plan& pl, int t, const Operand& a, const Operand& b, float* c,
                                                   std::ptrdiff_t ldc, float* buffer, const float* bias = nullptr) {
  const int tm = t / pl.tiles_n;
  const int tn = t % pl.tiles_n;
  const int sm0 = pl.strip_begin_m(tm), sm1 = pl.strip_begin_m(tm + 1);
  const int sn0 = pl.strip_begin_n(tn), sn1 = pl.strip_begin_n(tn + 1);
  const int i0 = sm0 * mr, j0 = sn0 * nr;
  const int i1 = std::min(pl.m, sm1 * mr), j1 = std::min(pl.n, sn1 * nr);
  if (i0 >= i1 || j0 >= j1) return;
  if (!pl.transposed) {
    compute_block(pl, sm0, sm1, sn0, sn1, a, b, c + static_cast<std::ptrdiff_t>(i0) * ldc + j0, ldc, buffer, bias);
    return;
  }
  // Rows [i0, i1) of C^T are columns of C, its columns [j0, j1) rows of C.
  const std::ptrdiff_t ldt = static_cast<std::ptrdiff_t>(sn1 - sn0) * nr;
  float* ct = align_up(buffer + pl.packing_floats());
  compute_block(pl, sm0, sm1, sn0, sn1, Operand{b.data, b.cs, b.rs}, Operand{a.data, a.cs, a.rs}, ct, ldt, buffer,
                nullptr);
  // Blocks of 64 rows of C, and in them 8x8 blocks transposed in registers (pure data movement; the
  // bias is the same one rounded add per element): a scalar copy reading down a column of C^T put
  // tn 512x10x128's 10 rows, 2 KiB apart, in the same few cache sets and stored one float at a
  // time, 13% of that call. Element (q, r) of C is element (r, q) of C^T.
  const auto copy = [&](int r0, int r1, int q0, int q1) {  // scalar, along the rows of C^T
    for (int r = r0; r < r1; ++r) {
      const float* src = ct + (r - i0) * ldt - j0;
      float* dst = c + r;
      const float br = bias ? bias[r] : 0.0f;
      for (int q = q0; q < q1; ++q) dst[static_cast<std::ptrdiff_t>(q) * ldc] = bias ? src[q] + br : src[q];
    }
  };
  constexpr int rows_per_block = 64;
  for (int q0 = j0; q0 < j1; q0 += rows_per_block) {
    const int q1 = std::min(j1, q0 + rows_per_block);
    int r8 = i0, q8 = q0;  // the 8x8 blocks cover [i0, r8) x [q0, q8)
#if REPROSGD_IMPL_GEMM_AVX
    r8 = i0 + (i1 - i0) / 8 * 8;
    q8 = q0 + (q1 - q0) / 8 * 8;
    for (int r = i0; r < r8; r += 8) {
      const __m256 br = bias ? _mm256_loadu_ps(bias + r) : _mm256_setzero_ps();
      for (int q = q0; q < q8; q += 8) {
        const float* rows[8];
        for (int k = 0; k < 8; ++k) rows[k] = ct + (r + k - i0) * ldt + (q - j0);
        __m256 t[8];
        transpose8(rows, t);
        for (int k = 0; k < 8; ++k)
          _mm256_storeu_ps(c + static_cast<std::ptrdiff_t>(q + k) * ldc + r, bias ? _mm256_add_ps(t[k], br) : t[k]);
      }
    }
#endif
    copy(i0, r8, q8, q1);  // the columns past the blocks
    copy(r8, i1, q0, q1);  // the rows past the blocks
  }
}
