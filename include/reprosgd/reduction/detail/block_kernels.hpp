// SPDX-License-Identifier: BSD-3-Clause
/// @file The Exact reduction's passes over whole blocks of a rank's rows (BlockKernels: quantise,
/// speculate, settle, finish) and the block layouts they run on (the whole vector's uniform blocks,
/// a shard's segments of canonical blocks). Exact (reduction/exact.hpp) sequences them around the
/// group's collectives; the per-element arithmetic is exact_kernels.hpp's.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/reduction/detail/exact_kernels.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

namespace detail::exact {

/// Rows of floats other than the caller's own (received from other ranks): row v's element i is
/// data[v * stride + (i - first)].
struct ExtraRows {
  const float* data = nullptr;
  long rows = 0;
  long stride = 0;
  long first = 0;
};

/// The blocks of a rank's elements [0, n) when they are the whole vector: block b is elements
/// [256 b, min(256 (b + 1), n)).
struct UniformBlocks {
  long n = 0;
  KOKKOS_INLINE_FUNCTION long begin(long b) const { return b * block_size < n ? b * block_size : n; }
  KOKKOS_INLINE_FUNCTION long of(long i) const { return i / block_size; }
};

/// The blocks of a shard (CanonicalBlocks): segment s is elements [starts(s), starts(s + 1)), the
/// shard's part of one canonical block.
template <class Mem>
struct SegmentBlocks {
  Kokkos::View<const long*, Mem> starts;
  KOKKOS_INLINE_FUNCTION long begin(long s) const { return starts(s); }
  /// The segment holding element i: the last s with starts(s) <= i (binary search).
  KOKKOS_INLINE_FUNCTION long of(long i) const {
    long lo = 0, hi = static_cast<long>(starts.extent(0)) - 1;  // starts(lo) <= i < starts(hi)
    while (hi - lo > 1) {
      const long mid = lo + (hi - lo) / 2;
      if (starts(mid) <= i) lo = mid; else hi = mid;
    }
    return lo;
  }
};

/**
 * Exact's two local passes over a run of whole blocks [b0, b1) (elements [begin(b0), begin(b1))
 * of `blocks`: UniformBlocks or a shard's SegmentBlocks), once the block exponents `exps` (one per
 * block of `blocks`) are agreed. `add` (may be null) points to int64 addends: element
 * i's is add[i - add_first]. On the host one work item handles a block (its loops vectorise; see
 * exact_kernels.hpp); on a device one handles an element. Both call the same per-element functions,
 * so their bits agree. (A public namespace-scope type: CUDA lambdas may not live in private members.)
 */
template <class Exec, class Rows, class Exps, class Sum, class Blocks = UniformBlocks>
struct BlockKernels {
  Exec space;
  Rows rows;  // this rank's rows, k x n
  Exps exps;
  Sum sum;
  std::int32_t headroom;
  long n;
  long k;
  Blocks blocks;

  static constexpr bool on_host = std::is_same_v<typename Exec::memory_space, Kokkos::HostSpace>;

  /// o[j] = a[j] (0 without `a`) + the sum over rows u < k of quantise(rows(u, lo + j), base), for
  /// the block's elements j < len: the integer grid sum every block pass shares.
  KOKKOS_INLINE_FUNCTION static void quantise_block(std::int64_t* o, const std::int64_t* a, const Rows& rows, long k,
                                                    long lo, long len, std::int32_t base) {
    // o starts from the first row (integers: exact in any order), not from zeros, which a compiler
    // makes a memset call per block (as double_sum's were).
    if (k == 0) {
      for (long j = 0; j < len; ++j) o[j] = a != nullptr ? a[j] : 0;
      return;
    }
    if (a != nullptr) {
      for (long j = 0; j < len; ++j) o[j] = a[j] + detail::exact::quantise(rows(0, lo + j), base);
    } else {
      for (long j = 0; j < len; ++j) o[j] = detail::exact::quantise(rows(0, lo + j), base);
    }
    for (long u = 1; u < k; ++u)
      for (long j = 0; j < len; ++j) o[j] += detail::exact::quantise(rows(u, lo + j), base);
  }

  /// exps(b) = the largest biased exponent of block b over this rank's rows (255 flags Inf/NaN): an
  /// integer max of the magnitudes' bits, one work item per block (vectorised over its elements).
  void exponents(long nblocks) const {
    const Rows rows_ = rows;
    const Exps exps_ = exps;
    const Blocks blocks_ = blocks;
    const long k_ = k;
    Kokkos::parallel_for(
        "reprosgd::Exact::block_exponents", Kokkos::RangePolicy<Exec>(space, 0, nblocks),
        KOKKOS_LAMBDA(const long b) {
          std::uint32_t mx = 0;
          const long lo = blocks_.begin(b);
          const long hi = blocks_.begin(b + 1);
          for (long u = 0; u < k_; ++u)
            for (long i = lo; i < hi; ++i) {
              const std::uint32_t mi = detail::exact::magnitude_bits(rows_(u, i));
              mx = mi > mx ? mi : mx;
            }
          exps_(b) = detail::exact::exponent_of_magnitude_bits(mx);
        });
  }

  /// out[i - out_first] = add + the sum over this rank's rows of quantise(rows(u, i)).
  void quantise(long b0, long b1, std::int64_t* out, long out_first, const std::int64_t* add, long add_first) const {
    if (b1 <= b0) return;
    const std::int32_t h = headroom;
    const long k_ = k;
    if constexpr (on_host) {
      Kokkos::parallel_for(
          "reprosgd::Exact::quantise", Kokkos::RangePolicy<Exec>(space, b0, b1), KOKKOS_CLASS_LAMBDA(const long b) {
            const long lo = blocks.begin(b);
            const long len = blocks.begin(b + 1) - lo;
            const std::int32_t base = quantise_base(exps(b), h);
            quantise_block(out + (lo - out_first), add != nullptr ? add + (lo - add_first) : nullptr, rows, k_, lo, len,
                           base);
          });
    } else {
      Kokkos::parallel_for(
          "reprosgd::Exact::quantise", Kokkos::RangePolicy<Exec>(space, blocks.begin(b0), blocks.begin(b1)),
          KOKKOS_CLASS_LAMBDA(const long i) {
            const std::int32_t base = quantise_base(exps(blocks.of(i)), h);
            std::int64_t s = add != nullptr ? add[i - add_first] : 0;
            for (long u = 0; u < k_; ++u) s += detail::exact::quantise(rows(u, i), base);
            out[i - out_first] = s;
          });
    }
    space.fence();
  }

  /// A block's largest biased exponent (255: an Inf or NaN) and max(smallest non-zero one, 1)
  /// (the largest when the block is all zeros) over this rank's rows.
  struct Extent {
    std::int32_t top;
    std::int32_t low;
  };
  /// Row u's elements from lo on: this rank's row u for u < k, else extra row u - k (extra.first <= lo).
  KOKKOS_INLINE_FUNCTION static const float* row_of(const Rows& rows, long k, long u, long lo, const ExtraRows& extra) {
    return u < k ? &rows(u, lo) : extra.data + (u - k) * extra.stride + (lo - extra.first);
  }
  KOKKOS_INLINE_FUNCTION static Extent extent_of(const Rows& rows, long k, long lo, long len, ExtraRows extra = {}) {
    // Largest and smallest non-zero magnitude: integer max/min over the bits. The min runs over
    // bits - 1, where a zero wraps to the largest pattern (so it never counts, and an all-zero
    // block has span 0); branch-free, so the loop vectorises. Then the extra rows' elements of the
    // block (extra.first <= lo), if any.
    std::uint32_t mx = 0, mn1 = 0xFFFFFFFFu;
    for (long u = 0; u < k + extra.rows; ++u) {
      const float* const x = row_of(rows, k, u, lo, extra);
      for (long j = 0; j < len; ++j) {
        const std::uint32_t mb = detail::exact::magnitude_bits(x[j]);
        mx = mb > mx ? mb : mx;
        mn1 = mb - 1u < mn1 ? mb - 1u : mn1;
      }
    }
    const std::int32_t e = detail::exact::exponent_of_magnitude_bits(mx);
    const std::int32_t e_top = e > 1 ? e : 1;
    const std::int32_t e_min = static_cast<std::int32_t>((mn1 + 1u) >> 23);
    return {e, mn1 == 0xFFFFFFFFu ? e_top : (e_min > 1 ? e_min : 1)};
  }
  /// Whether the plain double sum of a block whose values lie in binades [low, max(top, 1)] gives
  /// the integer grid's bits (exact_double_span()).
  KOKKOS_INLINE_FUNCTION static bool double_exact(std::int32_t top, std::int32_t low, std::int32_t h) {
    return (top > 1 ? top : 1) - low <= detail::exact::exact_double_span(h);
  }
  /// sum over the block = the double sum of its rows and the extra rows (exact when
  /// double_exact()); returns how many sums were too large for a float (each set to +0).
  KOKKOS_INLINE_FUNCTION static int double_sum(const Rows& rows, const Sum& sum, long k, long lo, long len,
                                               const ExtraRows& extra = {}) {
    int count = 0;
    if (k + extra.rows == 1) {
      // One row: its exact sum is the row itself (+0 for -0, as the integer total 0 gives).
      const float* const x = row_of(rows, k, 0, lo, extra);
      for (long j = 0; j < len; ++j) sum(lo + j) = x[j] + 0.0f;
      return 0;
    }
    if (k + extra.rows == 2) {
      // Two rows (two ranks with one micro-batch each): a float addition is correctly rounded, so
      // it is the float of the exact double sum; + 0.0f makes -0 + -0 the integer total's +0. The
      // inputs are finite (the block's exponent is below 255), so an Inf is a sum too large for a
      // float, exactly where the double would round to Inf. 3x fewer operations than in double.
      const float* const a = row_of(rows, k, 0, lo, extra);
      const float* const b = row_of(rows, k, 1, lo, extra);
      for (long j = 0; j < len; ++j) {
        const float s = (a[j] + b[j]) + 0.0f;
        const int over = (detail::exact::magnitude_bits(s) == 0x7F800000u) ? 1 : 0;
        sum(lo + j) = over ? 0.0f : s;
        count += over;
      }
      return count;
    }
    // t starts from the first row, not from zeros: a zeroing loop became a memset call per block,
    // and its 2 KiB took 40% of a 2-rank reduction's time. x + 0.0 is 0.0 + x exactly (-0 becomes +0,
    // as the integer total 0 gives for an all-(-0) sum).
    double t[block_size];
    const float* const x0 = row_of(rows, k, 0, lo, extra);
    for (long j = 0; j < len; ++j) t[j] = static_cast<double>(x0[j]) + 0.0;
    for (long u = 1; u < k + extra.rows; ++u) {
      const float* const x = row_of(rows, k, u, lo, extra);
      for (long j = 0; j < len; ++j) t[j] += static_cast<double>(x[j]);
    }
    for (long j = 0; j < len; ++j) {
      int over;
      sum(lo + j) = detail::exact::to_float_checked(t[j], over);
      count += over;
    }
    return count;
  }
  /// sum over the block = its rows and the extra rows quantised onto the grid of exponent e, added
  /// and converted back (as finish() does); returns how many sums were too large for a float.
  KOKKOS_INLINE_FUNCTION static int grid_sum(const Rows& rows, const Sum& sum, long k, long lo, long len, std::int32_t e,
                                             std::int32_t h, const ExtraRows& extra = {}) {
    const std::int32_t base = detail::exact::quantise_base(e, h);
    const double scale = detail::exact::dequantise_scale(e, h);
    std::int64_t t[block_size];
    quantise_block(t, nullptr, rows, k, lo, len, base);
    for (long v = 0; v < extra.rows; ++v) {
      const float* const x = row_of(rows, k, k + v, lo, extra);
      for (long j = 0; j < len; ++j) t[j] += detail::exact::quantise(x[j], base);
    }
    int count = 0;
    for (long j = 0; j < len; ++j) {
      int over;
      sum(lo + j) = detail::exact::dequantise(t[j], scale, over);
      count += over;
    }
    return count;
  }

  /// The block's sums (of its rows and the extra rows) with its own largest exponent as the agreed
  /// one, in one pass while its rows are in L1: the double sum when that is exact, else the integer
  /// grid. Returns the block's extent (top 255: an Inf or NaN, the sums left unwritten); `over`
  /// counts the sums too large for a float.
  KOKKOS_INLINE_FUNCTION static Extent sum_with_own_exponent(const Rows& rows, const Sum& sum, long k, long lo, long len,
                                                             std::int32_t h, int& over, const ExtraRows& extra = {}) {
    const Extent x = extent_of(rows, k, lo, len, extra);
    over = x.top == 255                    ? 0
           : double_exact(x.top, x.low, h) ? double_sum(rows, sum, k, lo, len, extra)
                                           : grid_sum(rows, sum, k, lo, len, x.top, h, extra);
    return x;
  }

  /**
   * A rank that holds every row (one rank, or a model rank with P_data = 1), pass 1 of 2, one pass
   * per block while its rows are in L1: the block's own largest and smallest exponents into
   * tops(b) and lows(b) (and exps(b), for the agreement), and its sums as if its own largest
   * exponent were the agreed one, their overflows counted in overs(b). They are the final bits
   * whenever the agreed exponent keeps the double sum exact or equals the block's own (settle()):
   * always for a whole vector on one rank, nearly always for a shard (a block's pieces on other
   * ranks hold values of similar magnitude, and a block a shard holds whole needs no other rank).
   */
  /// `done` (may be null): blocks whose done[b] is non-zero were summed by the caller from rows of
  /// its own (Exact::reduce_presummed), with tops, lows and overs filled; they are skipped.
  template <class Ints>
  void speculate(long b0, long b1, const Ints& tops, const Ints& lows, const Ints& overs,
                 const std::uint8_t* done = nullptr) const
    requires on_host
  {
    if (b1 <= b0) return;
    const std::int32_t h = headroom;
    const long k_ = k;
    Kokkos::parallel_for(
        "reprosgd::Exact::speculate", Kokkos::RangePolicy<Exec>(space, b0, b1), KOKKOS_CLASS_LAMBDA(const long b) {
          if (done != nullptr && done[b] != 0) return;
          const long lo = blocks.begin(b);
          const long len = blocks.begin(b + 1) - lo;
          int over;
          const Extent x = sum_with_own_exponent(rows, sum, k_, lo, len, h, over);
          exps(b) = tops(b) = x.top;
          lows(b) = x.low;
          overs(b) = over;
        });
    space.fence();
  }
  /// Pass 2 of 2, once exps holds the agreed exponents: the blocks whose sums from speculate() do
  /// not hold (summed in double, but the agreed exponent is too far above their smallest value;
  /// or on the grid of their own exponent, but the agreed one is larger) are summed on the agreed
  /// grid. Returns how many sums were too large for a float.
  template <class Ints>
  long settle(long b0, long b1, const Ints& tops, const Ints& lows, const Ints& overs) const
    requires on_host
  {
    if (b1 <= b0) return 0;
    const std::int32_t h = headroom;
    const long k_ = k;
    long bad = 0;
    Kokkos::parallel_reduce(
        "reprosgd::Exact::settle", Kokkos::RangePolicy<Exec>(space, b0, b1),
        KOKKOS_CLASS_LAMBDA(const long b, long& bad_total) {
          const std::int32_t e = exps(b);
          const bool held = double_exact(tops(b), lows(b), h) ? double_exact(e, lows(b), h) : e == tops(b);
          if (held) {
            bad_total += overs(b);
            return;
          }
          const long lo = blocks.begin(b);
          bad_total += grid_sum(rows, sum, k_, lo, blocks.begin(b + 1) - lo, e, h);
        },
        bad);
    space.fence();
    return bad;
  }

  /// sum(i) = the float of (add + [with_rows] this rank's rows' quantise(rows(u, i)) + the extra
  /// rows' ones); returns how many of these were too large for a float (each set to +0): an
  /// integer count, exact in any order. `own_exponents` (host only; with_rows, no `add`): every row
  /// of these blocks is here, so each block's exponent is its own rows' largest, found in the same
  /// pass while the block is in L1 and written to exps(b) (no agreement needed), and the block is
  /// summed as speculate() sums it (sum_with_own_exponent: in double where that gives the grid's
  /// bits); a block holding an
  /// Inf or NaN (exponent 255) counts as one bad sum and its sums are left unwritten.
  long finish(long b0, long b1, bool with_rows, const std::int64_t* add, long add_first, ExtraRows extra = {},
              bool own_exponents = false) const {
    if (b1 <= b0) return 0;
    const std::int32_t h = headroom;
    const long k_ = with_rows ? k : 0;
    long overflowed = 0;
    if constexpr (on_host) {
      Kokkos::parallel_reduce(
          "reprosgd::Exact::finish", Kokkos::RangePolicy<Exec>(space, b0, b1),
          KOKKOS_CLASS_LAMBDA(const long b, long& bad) {
            const long lo = blocks.begin(b);
            const long len = blocks.begin(b + 1) - lo;
            if (own_exponents) {  // as speculate() sums a block whose every row is here
              int over;
              const Extent x = sum_with_own_exponent(rows, sum, k_, lo, len, h, over, extra);
              exps(b) = x.top;
              bad += x.top == 255 ? 1 : over;
              return;
            }
            const std::int32_t base = quantise_base(exps(b), h);
            const double scale = dequantise_scale(exps(b), h);
            std::int64_t t[block_size];
            quantise_block(t, add != nullptr ? add + (lo - add_first) : nullptr, rows, k_, lo, len, base);
            for (long v = 0; v < extra.rows; ++v) {
              const float* const x = extra.data + v * extra.stride + (lo - extra.first);
              for (long j = 0; j < len; ++j) t[j] += detail::exact::quantise(x[j], base);
            }
            int count = 0;
            for (long j = 0; j < len; ++j) {
              int over;
              sum(lo + j) = dequantise(t[j], scale, over);
              count += over;
            }
            bad += count;
          },
          overflowed);
    } else {
      Kokkos::parallel_reduce(
          "reprosgd::Exact::finish", Kokkos::RangePolicy<Exec>(space, blocks.begin(b0), blocks.begin(b1)),
          KOKKOS_CLASS_LAMBDA(const long i, long& bad) {
            const std::int32_t e = exps(blocks.of(i));
            const std::int32_t base = quantise_base(e, h);
            std::int64_t s = add != nullptr ? add[i - add_first] : 0;
            for (long u = 0; u < k_; ++u) s += detail::exact::quantise(rows(u, i), base);
            for (long v = 0; v < extra.rows; ++v)
              s += detail::exact::quantise(extra.data[v * extra.stride + (i - extra.first)], base);
            int over;
            sum(i) = dequantise(s, dequantise_scale(e, h), over);
            bad += over;
          },
          overflowed);
    }
    space.fence();
    return overflowed;
  }
};

}  // namespace detail::exact

REPROSGD_END_NAMESPACE
