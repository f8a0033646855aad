// SPDX-License-Identifier: BSD-3-Clause
/// @file Exact: an order-free gradient sum on a shared-exponent int64 fixed-point grid
/// (docs/distributed.md, "The Exact reduction"; a model shard's blocks: canonical_blocks.hpp).
#pragma once

#include <reprosgd/concepts/exchange.hpp>
#include <reprosgd/concepts/reduction.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/reduction/canonical_blocks.hpp>
#include <reprosgd/reduction/detail/block_kernels.hpp>
#include <reprosgd/reduction/detail/exact_kernels.hpp>

#include <Kokkos_Core.hpp>

#include <bit>
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/**
 * Exact, order-free sum of micro-batch gradients.
 *
 * For each block of `block_size` parameters the ranks agree on the largest binary exponent E of
 * any value in any micro-batch row (an integer MAX all-reduce). Every value is then placed on the
 * fixed-point grid 2^(E-126-62+h) as an int64 (h = ceil(log2 M) bits of headroom, so the sum of
 * all M rows cannot overflow), the rows are added as integers (exact, so in any order and any
 * grouping), the ranks add their partial sums as integers (exact again), and the total is converted
 * back to float once. The result is therefore the same bits for any number of ranks, any owner
 * map and any MPI reduction algorithm.
 *
 * Accuracy: every value keeps all bits down to 2^-(62-h) of its block's largest magnitude, so the
 * error of the sum is at most M * 2^-(63-h) * max|x| before the final rounding to float — far below a
 * float's own rounding for blocks whose values are of similar magnitude. Values more than 2^(38-h)
 * times smaller than the block's largest lose low bits (documented in docs/distributed.md).
 *
 * Cost (docs/distributed.md, Performance): one read of the rows for the block exponents, one for
 * quantising (vectorised integer code, detail/exact_kernels.hpp); with a group that has the Exchange
 * operations (concepts/exchange.hpp: DataParallel and the policies built on it) on host memory
 * the integer sums travel as a ring reduce-scatter (each rank ends with the exact totals of its
 * 1/P of the blocks; its own part is quantised, added and converted to float in one pass) and the
 * floats as an all-gather: 8 + 4 bytes per parameter instead of a float all-reduce's 4 + 4. With at
 * most 2 rows per rank the rows' floats travel instead (4k + 4 bytes), each rank receives every row
 * of its 1/P of the blocks and finds their exponents itself: one pass over its own part, no exponent
 * agreement, the traffic of a float all-reduce for k = 1.
 *
 * @collective @deterministic (rank-independent)
 */
class Exact {
 public:
  static constexpr const char* name() noexcept { return "exact"; }
  static constexpr bool rank_independent = true;
  static constexpr long block_size = detail::exact::block_size;


  /// Sum `rows` (this rank's micro-batch gradients, one per row) over all ranks into `sum`.
  template <class Par, class Rows, class Sum>
  ReductionResult reduce(Par& par, const Rows& rows, long total_micro_batches, const Sum& sum) {
    const long n = check_shapes(rows, sum, total_micro_batches);
    const long nblocks = (n + block_size - 1) / block_size;
    return reduce_blocks(par, rows, total_micro_batches, sum, detail::exact::UniformBlocks{n}, nblocks, Whole{});
  }

  /// h = ceil(log2 M): the sum of M rows of integers below 2^(62-h) stays below 2^62.
  static std::int32_t headroom_of(long total_micro_batches) {
    return static_cast<std::int32_t>(std::bit_width(static_cast<unsigned long>(total_micro_batches - 1)));
  }

  /**
   * Blocks a caller sums itself before reduce_presummed(), from rows it holds elsewhere (in cache):
   * for block b (elements [256 b, 256 b + 256) of the whole vector) with done(b) = 1 the caller has
   * written sum's elements, tops(b) and lows(b) (Extent: its rows' largest and smallest exponents)
   * and overs(b) (its sums too large for a float), exactly as the one-rank pass does
   * (detail::exact::BlockKernels::sum_with_own_exponent over the M rows). Used by the Trainer's
   * deferred weight gradients (trainer/deferred_weight_gradients.hpp). Host memory only.
   */
  struct Presummed {
    Kokkos::View<std::int32_t*, Kokkos::HostSpace> tops, lows, overs;
    Kokkos::View<std::uint8_t*, Kokkos::HostSpace> done;
  };
  /// The slots for the blocks of an n-element vector, every done flag cleared. Local.
  Presummed presummed(long n) {
    auto& ws = workspace<Kokkos::HostSpace>();
    const long nblocks = (n + block_size - 1) / block_size;
    ws.ensure_speculation(nblocks);
    if (static_cast<long>(ws.done.extent(0)) < nblocks)
      ws.done = Kokkos::View<std::uint8_t*, Kokkos::HostSpace>("reprosgd::Exact::done", nblocks);
    else
      Kokkos::deep_copy(ws.done, std::uint8_t{0});
    return {ws.tops, ws.lows, ws.overs, ws.done};
  }

  /**
   * reduce() on one rank holding every row, where the blocks flagged in presummed(n) are already
   * summed: the others are summed from `rows` as reduce() sums them, and every block's result is
   * the one reduce() gives (both sum a block of M rows with its own largest exponent, the agreed
   * one on one rank). @throws config_error on more than one rank or on a device
   */
  template <class Par, class Rows, class Sum>
  ReductionResult reduce_presummed(Par& par, const Rows& rows, long total_micro_batches, const Sum& sum) {
    using exec = typename Par::execution_space;
    using mem = typename exec::memory_space;
    if constexpr (!host_memory<mem>) {
      throw config_error("reprosgd::Exact::reduce_presummed: host memory only");
    } else {
      if (par.size() != 1)
        throw config_error("reprosgd::Exact::reduce_presummed: one rank only, this group has " +
                           std::to_string(par.size()));
      const long n = check_shapes(rows, sum, total_micro_batches);
      const long nblocks = (n + block_size - 1) / block_size;
      Workspace<mem>& ws = workspace<mem>();
      if (static_cast<long>(ws.done.extent(0)) < nblocks)
        throw config_error("reprosgd::Exact::reduce_presummed: presummed(n) was not called for this vector");
      ws.ensure_exps(nblocks);
      const detail::exact::BlockKernels<exec, Rows, decltype(ws.exps), Sum> kern{
          par.space(), rows, ws.exps, sum, headroom_of(total_micro_batches), n, static_cast<long>(rows.extent(0)),
          detail::exact::UniformBlocks{n}};
      kern.speculate(0, nblocks, ws.tops, ws.lows, ws.overs, ws.done.data());
      for (long b = 0; b < nblocks; ++b)
        if (ws.done(b) != 0) ws.exps(b) = ws.tops(b);
      if (!agree_exponents(par, ws, nblocks, 0, kern.k, Whole{})) return {false};
      return {kern.settle(0, nblocks, ws.tops, ws.lows, ws.overs) == 0};
    }
  }

  /**
   * Sum one shard's micro-batch gradients (model and hybrid parallelism): `rows` hold this rank's
   * part of the whole model's parameter vector, laid out as `layout` says, and `group` joins the
   * ranks that hold the other parts (the model group). The blocks are the canonical vector's: a
   * block's exponent is agreed over every rank holding part of it (an integer MAX over `par`, then
   * over `group`), so every element is rounded onto the grid it has in one process and its sum has
   * the one-process bits for every P_data x P_model grid. `finite` is agreed over both too.
   * @throws config_error when `rows` do not have layout.local_size() columns
   * @collective over `par` and `group`
   */
  template <class Par, class Rows, class Sum, class Mem, class Group>
  ReductionResult reduce(Par& par, const Rows& rows, long total_micro_batches, const Sum& sum,
                         const CanonicalBlocks<Mem>& layout, Group& group) {
    using mem = typename Par::execution_space::memory_space;
    static_assert(std::is_same_v<Mem, mem>, "reprosgd::Exact::reduce: the layout's memory space must be the rows'");
    const long n = check_shapes(rows, sum, total_micro_batches);
    if (layout.local_size() != n)
      throw config_error("reprosgd::Exact::reduce: the shard layout has " + std::to_string(layout.local_size()) +
                         " elements, rows have " + std::to_string(n));
    return reduce_blocks(par, rows, total_micro_batches, sum, detail::exact::SegmentBlocks<mem>{layout.starts()},
                         layout.segments(), Sharded<Mem, Group>{&layout, &group});
  }

 private:
  template <class Mem>
  static constexpr bool host_memory = std::is_same_v<Mem, Kokkos::HostSpace>;

  /// Whether the policy's collectives may be handed device memory (a CUDA- or ROCm-aware MPI:
  /// DataParallel::reads_space_memory); a policy that cannot say gets host buffers.
  template <class Par>
  static bool reads_device_memory(const Par& par) {
    if constexpr (requires { par.reads_space_memory(); }) return par.reads_space_memory();
    else return false;
  }

  /// The rows' column count, after checking the sum's length and the micro-batch count.
  template <class Rows, class Sum>
  static long check_shapes(const Rows& rows, const Sum& sum, long total_micro_batches) {
    const long n = static_cast<long>(rows.extent(1));
    if (static_cast<long>(sum.extent(0)) != n)
      throw config_error("reprosgd::Exact::reduce: sum has " + std::to_string(sum.extent(0)) +
                         " elements, rows have " + std::to_string(n));
    if (total_micro_batches < 1 || total_micro_batches > (1L << 20))
      throw config_error("reprosgd::Exact::reduce: " + std::to_string(total_micro_batches) +
                         " micro-batches (supported: 1 to 2^20)");
    return n;
  }

  /// The rows are the whole vector: blocks are agreed over the policy's ranks alone.
  struct Whole {};
  /// The rows are a shard (`layout`); the other shards are on `group`'s ranks.
  template <class Mem, class Group>
  struct Sharded {
    const CanonicalBlocks<Mem>* layout;
    Group* group;
  };

  /**
   * Steps 1-5 of the reduction over `nblocks` blocks of `blocks` (uniform blocks of the whole
   * vector, or a shard's segments of canonical blocks).
   */
  template <class Par, class Rows, class Sum, class Blocks, class Scope>
  ReductionResult reduce_blocks(Par& par, const Rows& rows, long total_micro_batches, const Sum& sum,
                                const Blocks& blocks, long nblocks, const Scope& scope) {
    using exec = typename Par::execution_space;
    using mem = typename exec::memory_space;
    const long n = static_cast<long>(rows.extent(1));
    const long k = static_cast<long>(rows.extent(0));
    // Workspace is kept between calls (a training step calls reduce once with the same sizes).
    Workspace<mem>& ws = workspace<mem>();
    const std::int32_t headroom = headroom_of(total_micro_batches);
    const exec& space = par.space();
    // With an Exchange group on host memory the exponent all-reduce also carries one slot per rank, in
    // which only that rank writes its row count k: after the MAX every rank knows every rank's k.
    const long slots = fast_path<Par, Rows, Sum> && par.size() > 1 ? par.size() : 0;
    ws.ensure_exps(nblocks + slots);
    auto exps = ws.exps;
    const detail::exact::BlockKernels<exec, Rows, decltype(exps), Sum, Blocks> kern{space, rows, exps, sum, headroom, n, k, blocks};

    if constexpr (host_memory<mem>) {
      if (par.size() == 1) {
        // Every row is here: sum each block while its rows are in L1 with its own exponent; agree
        // the exponents (nothing to agree on for a whole vector), then redo the blocks whose agreed
        // exponent changes the result, which only a shard can have (the bits of steps 1-5).
        ws.ensure_speculation(nblocks);
        kern.speculate(0, nblocks, ws.tops, ws.lows, ws.overs);
        if (!agree_exponents(par, ws, nblocks, slots, k, scope)) return {false};
        return {agree_finite(kern.settle(0, nblocks, ws.tops, ws.lows, ws.overs) == 0, scope)};
      }
    }

    long agreed_slots = 0;  // row-count slots already agreed (they stay in exps)
    if constexpr (fast_path<Par, Rows, Sum> && std::is_same_v<Scope, Whole>) {
      // The rows exchange gives each rank every row of its run, so each block's exponent is found
      // where the block is summed (finish's own_exponents) and no rank needs the others' exponents:
      // agree on the row counts alone (the slots), and skip step 1's pass and step 2's all-reduce
      // of an exponent per block. With more rows the ring's partial sums need agreed exponents.
      for (long q = 0; q < slots; ++q) exps(nblocks + q) = q == par.rank() ? static_cast<std::int32_t>(k) : 0;
      par.allreduce_max(Kokkos::subview(exps, Kokkos::make_pair(nblocks, nblocks + slots)));
      if (max_rows(exps.data() + nblocks, slots) <= 2)
        return {exchange_rows_gather(par, ws, kern, nblocks, exps.data() + nblocks, /*own_exponents=*/true)};
      agreed_slots = slots;  // the exponent all-reduce need not carry them again
    }
    // 1. Largest biased exponent per block over this rank's rows (255 flags Inf/NaN): an integer
    //    max of the magnitudes' bits, one work item per block (vectorised over its elements).
    kern.exponents(nblocks);
    space.fence();
    // 2. Agree on it across ranks (integer max: exact in any order).
    if (!agree_exponents(par, ws, nblocks, slots - agreed_slots, k, scope)) return {false};

    // 3.-5. Quantise onto the block grids and add the rows as integers (exact: the M rows'
    //    integers stay below 2^62 in magnitude, see detail::exact), add the ranks' integers
    //    (exact, so independent of the MPI algorithm), and convert back to float once. A finite sum
    //    too large for a float is reported like a NaN, never converted.
    if (par.size() == 1) return {agree_finite(kern.finish(0, nblocks, true, nullptr, 0) == 0, scope)};
    if constexpr (fast_path<Par, Rows, Sum>) {
      // Up to 2 rows per rank, sending the rows' floats (4k bytes per element) costs no more than
      // sending int64 partial sums (8), and takes one round instead of P-1.
      if (max_rows(exps.data() + nblocks, slots) <= 2)
        return {agree_finite(exchange_rows_gather(par, ws, kern, nblocks, exps.data() + nblocks), scope)};
      return {agree_finite(ring_reduce_scatter_gather(par, ws, kern, nblocks), scope)};
    }
    // Any other policy, or device memory: an int64 all-reduce through the policy.
    ws.ensure_acc(n);
    const auto elems = Kokkos::make_pair(0L, n);
    kern.quantise(0, nblocks, ws.acc.data(), 0, nullptr, 0);
    if constexpr (host_memory<mem>) {
      par.allreduce_sum(Kokkos::subview(ws.acc, elems));
    } else if (reads_device_memory(par)) {
      space.fence();  // the quantised integers are written before MPI reads them
      par.allreduce_sum(Kokkos::subview(ws.acc, elems));
    } else {
      Kokkos::deep_copy(Kokkos::subview(ws.acc_host, elems), Kokkos::subview(ws.acc, elems));
      par.allreduce_sum(Kokkos::subview(ws.acc_host, elems));
      Kokkos::deep_copy(Kokkos::subview(ws.acc, elems), Kokkos::subview(ws.acc_host, elems));
    }
    // Every rank holds the same integer totals, so every rank counts the same overflows.
    return {agree_finite(kern.finish(0, nblocks, false, ws.acc.data(), 0) == 0, scope)};
  }

  /// Step 2 for the whole vector: the MAX of every block's exponent (and of the row-count slots)
  /// over the policy's ranks. Returns whether every block is finite (agreed).
  template <class Par, class Ws>
  static bool agree_exponents(Par& par, Ws& ws, long nblocks, long slots, long k, const Whole&) {
    const auto blocks = Kokkos::make_pair(0L, nblocks);
    if constexpr (host_memory<typename Ws::memory_space>) {
      for (long q = 0; q < slots; ++q) ws.exps(nblocks + q) = q == par.rank() ? static_cast<std::int32_t>(k) : 0;
      if (par.size() > 1) par.allreduce_max(Kokkos::subview(ws.exps, Kokkos::make_pair(0L, nblocks + slots)));
    } else {
      Kokkos::deep_copy(Kokkos::subview(ws.exps_host, blocks), Kokkos::subview(ws.exps, blocks));
      if (par.size() > 1) par.allreduce_max(Kokkos::subview(ws.exps_host, blocks));
      Kokkos::deep_copy(Kokkos::subview(ws.exps, blocks), Kokkos::subview(ws.exps_host, blocks));
    }
    const auto& exps_host = host_exps(ws);
    bool finite = true;
    for (long b = 0; b < nblocks; ++b) finite = finite && exps_host(b) != 255;
    return finite;
  }

  /// Step 2 for a shard: fold the segments' exponents into their canonical blocks, take the MAX
  /// over the policy's ranks (with the row-count slots) and over the group (the blocks' other
  /// segments), and give every segment its block's agreed exponent. Returns whether every
  /// canonical block is finite: agreed on every rank of both, whichever blocks a rank holds.
  template <class Par, class Ws, class Mem, class Group>
  static bool agree_exponents(Par& par, Ws& ws, long nsegments, long slots, long k, const Sharded<Mem, Group>& scope) {
    const std::span<const long> block_of = scope.layout->block_of();
    const long nc = scope.layout->canonical_blocks();
    ws.ensure_canonical(nc + slots);
    const auto segs = Kokkos::make_pair(0L, nsegments);
    if constexpr (!host_memory<typename Ws::memory_space>)
      Kokkos::deep_copy(Kokkos::subview(ws.exps_host, segs), Kokkos::subview(ws.exps, segs));
    const auto& seg = host_exps(ws);
    const auto canon = ws.canonical;
    for (long c = 0; c < nc; ++c) canon(c) = 0;
    for (long s = 0; s < nsegments; ++s) {
      const long c = block_of[static_cast<std::size_t>(s)];
      canon(c) = seg(s) > canon(c) ? seg(s) : canon(c);
    }
    for (long q = 0; q < slots; ++q) canon(nc + q) = q == par.rank() ? static_cast<std::int32_t>(k) : 0;
    if (par.size() > 1) par.allreduce_max(Kokkos::subview(canon, Kokkos::make_pair(0L, nc + slots)));
    scope.group->allreduce_max(Kokkos::subview(canon, Kokkos::make_pair(0L, nc)));
    bool finite = true;
    for (long c = 0; c < nc; ++c) finite = finite && canon(c) != 255;
    for (long s = 0; s < nsegments; ++s) seg(s) = canon(block_of[static_cast<std::size_t>(s)]);
    for (long q = 0; q < slots; ++q) seg(nsegments + q) = canon(nc + q);
    if constexpr (!host_memory<typename Ws::memory_space>)
      Kokkos::deep_copy(Kokkos::subview(ws.exps, segs), Kokkos::subview(ws.exps_host, segs));
    return finite;
  }

  /// The block exponents in host memory: the workspace's own, or their host copy.
  template <class Ws>
  static const auto& host_exps(const Ws& ws) {
    if constexpr (host_memory<typename Ws::memory_space>) return ws.exps;
    else return ws.exps_host;
  }

  /// Whether no sum overflowed a float: `ok` as agreed over the policy's ranks, and for a shard
  /// also over the group (an integer MAX, so it fails like the group's other collectives).
  static bool agree_finite(bool ok, const Whole&) { return ok; }
  template <class Mem, class Group>
  bool agree_finite(bool ok, const Sharded<Mem, Group>& scope) {
    auto& verdict = workspace<Mem>().verdict;
    if (verdict.extent(0) == 0) verdict = Kokkos::View<std::int32_t*, Kokkos::HostSpace>("reprosgd::Exact::verdict", 1);
    verdict(0) = ok ? 0 : 1;
    scope.group->allreduce_max(verdict);
    return verdict(0) == 0;
  }

  /// Whether reduce() uses the group's Exchange operations (concepts/exchange.hpp: the rows
  /// exchange or the ring reduce-scatter, then the allgather) instead of an int64 all-reduce: on
  /// host buffers whose rows and sum are contiguous. Decided at compile time, so every rank takes
  /// the same path.
  template <class Par, class Rows, class Sum>
  static constexpr bool fast_path =
      Exchange<Par> && host_memory<typename Par::execution_space::memory_space> &&
      std::is_same_v<typename Rows::array_layout, Kokkos::LayoutRight> &&
      (std::is_same_v<typename Sum::array_layout, Kokkos::LayoutRight> ||
       std::is_same_v<typename Sum::array_layout, Kokkos::LayoutLeft>);

  template <class Mem>
  struct Workspace {
    using memory_space = Mem;
    Kokkos::View<std::int64_t*, Mem> acc;                     // this rank's integer sums (or a ring's parts)
    Kokkos::View<std::int64_t*, Kokkos::HostSpace> acc_host;  // device memory only: the host copy the group reduces
    Kokkos::View<std::int64_t*, Kokkos::HostSpace> recv;      // a ring step's incoming part
    Kokkos::View<float*, Kokkos::HostSpace> recv_rows;        // other ranks' rows of this rank's run
    Kokkos::View<std::int32_t*, Mem> exps;
    Kokkos::View<std::int32_t*, Kokkos::HostSpace> exps_host;  // device memory only
    Kokkos::View<std::int32_t*, Kokkos::HostSpace> canonical;  // a shard's canonical block exponents (+ slots)
    Kokkos::View<std::int32_t*, Kokkos::HostSpace> tops, lows, overs;  // speculate(): own exponents, overflows
    Kokkos::View<std::int32_t*, Kokkos::HostSpace> verdict;  // a shard's overflow verdict, agreed over the group
    Kokkos::View<std::uint8_t*, Kokkos::HostSpace> done;     // presummed(): blocks the caller summed
    void ensure_acc(long n) {
      if (static_cast<long>(acc.extent(0)) < n) {
        acc = {};
        acc_host = {};
        acc = Kokkos::View<std::int64_t*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Exact::acc"), n);
        if constexpr (!host_memory<Mem>)
          acc_host = Kokkos::View<std::int64_t*, Kokkos::HostSpace>(
              Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Exact::acc_host"), n);
      }
    }
    void ensure_recv(long count) {
      if (static_cast<long>(recv.extent(0)) < count) {
        recv = {};
        recv = Kokkos::View<std::int64_t*, Kokkos::HostSpace>(
            Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Exact::recv"), count);
      }
    }
    void ensure_recv_rows(long count) {
      if (static_cast<long>(recv_rows.extent(0)) < count) {
        recv_rows = {};
        recv_rows = Kokkos::View<float*, Kokkos::HostSpace>(
            Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::Exact::recv_rows"), count);
      }
    }
    void ensure_speculation(long nblocks) {
      if (static_cast<long>(tops.extent(0)) < nblocks) {
        tops = Kokkos::View<std::int32_t*, Kokkos::HostSpace>("reprosgd::Exact::tops", nblocks);
        lows = Kokkos::View<std::int32_t*, Kokkos::HostSpace>("reprosgd::Exact::lows", nblocks);
        overs = Kokkos::View<std::int32_t*, Kokkos::HostSpace>("reprosgd::Exact::overs", nblocks);
      }
    }
    void ensure_canonical(long count) {
      if (static_cast<long>(canonical.extent(0)) < count)
        canonical = Kokkos::View<std::int32_t*, Kokkos::HostSpace>("reprosgd::Exact::canonical", count);
    }
    void ensure_exps(long nblocks) {
      if (static_cast<long>(exps.extent(0)) < nblocks) {
        exps = Kokkos::View<std::int32_t*, Mem>("reprosgd::Exact::exps", nblocks);
        if constexpr (!host_memory<Mem>)
          exps_host = Kokkos::View<std::int32_t*, Kokkos::HostSpace>("reprosgd::Exact::exps_host", nblocks);
      }
    }
  };

  /// The runs of a segment of blocks [s0, s1): run q, for rank q of p, is blocks
  /// [first(q), first(q+1)); `offsets` (p + 1 of them) receives their first elements, `counts`
  /// and `displs` (p each, may be null) their lengths and their offsets from the segment's start.
  template <class Blocks>
  static void cut_runs(const Blocks& blocks, long s0, long s1, long p, std::vector<long>& offsets,
                       std::vector<long>* counts, std::vector<long>* displs) {
    offsets.resize(static_cast<std::size_t>(p + 1));
    for (long q = 0; q <= p; ++q) offsets[static_cast<std::size_t>(q)] = blocks.begin(s0 + (q * (s1 - s0) + p - 1) / p);
    if (counts == nullptr) return;
    counts->resize(static_cast<std::size_t>(p));
    displs->resize(static_cast<std::size_t>(p));
    for (long q = 0; q < p; ++q) {
      (*counts)[static_cast<std::size_t>(q)] = offsets[static_cast<std::size_t>(q + 1)] - offsets[static_cast<std::size_t>(q)];
      (*displs)[static_cast<std::size_t>(q)] = offsets[static_cast<std::size_t>(q)] - offsets[0];
    }
  }

  /// The largest of the row-count slots (every rank's k once the slots are agreed).
  static long max_rows(const std::int32_t* k_of, long slots) {
    long k_max = 0;
    for (long q = 0; q < slots; ++q) k_max = k_of[q] > k_max ? k_of[q] : k_max;
    return k_max;
  }

  /**
   * Steps 3-5 on a group with the Exchange operations, on host memory, when no rank holds more
   * than 2 rows. The blocks are cut into P runs of whole blocks, run q for rank q. Every rank sends
   * each other rank q its rows' floats of run q (exchange_runs: point-to-point, all at once), then
   * quantises and adds, as integers, its own rows and all received rows of its own run and converts
   * the totals to float in the same pass; allgather_runs gives every rank all of the floats. The
   * integers are those of the single-process sum (each value is quantised from its own float with
   * the agreed exponent, on whichever rank), and integer addition is exact in any order: the bits
   * do not depend on P. Traffic per rank: (P-1)/P * (4k + 4) bytes per element, for k = 1 the same
   * as a ring float all-reduce. `k_of[q]` is rank q's row count. `own_exponents`: the block
   * exponents were not agreed; each is found on the rank that sums the block, from every row of it
   * (the same integer MAX the agreement computes), and an Inf or NaN fails the result like an
   * overflow. Returns whether no sum overflowed (agreed).
   */
  template <class Par, class Ws, class Kern>
  static bool exchange_rows_gather(Par& par, Ws& ws, const Kern& kern, long nblocks, const std::int32_t* k_of,
                                   bool own_exponents = false) {
    const long p = par.size(), rank = par.rank();
    constexpr long segment_blocks = (1L << 30) / block_size;  // counts of at most 2^30 elements
    long overflowed = 0;
    bool finite = true;
    std::vector<long> offsets, counts, displs;
    for (long s0 = 0; s0 < nblocks; s0 += segment_blocks) {
      const long s1 = s0 + segment_blocks < nblocks ? s0 + segment_blocks : nblocks;
      cut_runs(kern.blocks, s0, s1, p, offsets, &counts, &displs);
      const long mine = counts[static_cast<std::size_t>(rank)], my_first = offsets[static_cast<std::size_t>(rank)];
      long received_rows = 0;
      for (long q = 0; q < p; ++q)
        if (q != rank) received_rows += k_of[q];
      ws.ensure_recv_rows(received_rows * mine > 0 ? received_rows * mine : 1);
      float* const recv = ws.recv_rows.data();
      par.exchange_runs(kern.rows.data(), kern.k, static_cast<long>(kern.rows.stride(0)), offsets,
                        std::span<const std::int32_t>(k_of, static_cast<std::size_t>(p)), recv);
      const long b_mine = s0 + (rank * (s1 - s0) + p - 1) / p, b_next = s0 + ((rank + 1) * (s1 - s0) + p - 1) / p;
      overflowed += kern.finish(b_mine, b_next, true, nullptr, 0,
                                detail::exact::ExtraRows{recv, received_rows, mine, my_first}, own_exponents);
      finite = par.allgather_runs(kern.sum.data() + offsets[0], counts, displs, overflowed == 0);
    }
    return finite;
  }

  /**
   * Steps 3-5 on a group with the Exchange operations, on host memory. The blocks are cut into P
   * runs of whole blocks, run q for rank q. A ring reduce-scatter of the int64 sums (ring_step):
   * in step s = 0 .. P-2 rank r sends its partial sums of run (r-s-1) mod P to rank r+1 and
   * receives rank r-1's of run (r-s-2) mod P, to which it adds its own rows' integers while
   * quantising them (one pass). After P-1 steps rank r has received the other ranks' total for its
   * own run r, and its last pass adds its own rows and converts to float at once. allgather_runs
   * then gives every rank all of the floats. All additions are of integers, so each total is exact
   * whatever the order, and the conversion is a pure function of the total and the agreed
   * exponent: every element has the bits of the single-process sum, on any number of ranks.
   * Traffic per rank: (P-1)/P * (8 + 4) bytes per element, against (P-1)/P * (4 + 4) for a ring
   * float all-reduce and (P-1)/P * (8 + 8) for an int64 one. (Open MPI's own MPI_Reduce_scatter
   * of int64 measured several times slower than these sendrecvs; see docs/distributed.md.)
   * Returns whether no sum overflowed a float (agreed).
   */
  template <class Par, class Ws, class Kern>
  static bool ring_reduce_scatter_gather(Par& par, Ws& ws, const Kern& kern, long nblocks) {
    const long p = par.size(), rank = par.rank();
    const long n = kern.n;
    constexpr long segment_blocks = (1L << 30) / block_size;  // counts of at most 2^30 elements
    ws.ensure_acc(n);
    std::int64_t* const acc = ws.acc.data();
    long overflowed = 0;
    bool finite = true;
    std::vector<long> offsets, counts, displs;
    for (long s0 = 0; s0 < nblocks; s0 += segment_blocks) {
      const long s1 = s0 + segment_blocks < nblocks ? s0 + segment_blocks : nblocks;
      // Run q: blocks [first(q), first(q+1)) of the segment, elements [offsets[q], offsets[q+1]).
      auto first = [&](long q) { return s0 + (q * (s1 - s0) + p - 1) / p; };
      cut_runs(kern.blocks, s0, s1, p, offsets, &counts, &displs);
      auto elem = [&](long q) { return offsets[static_cast<std::size_t>(q)]; };
      auto count = [&](long q) { return counts[static_cast<std::size_t>(q)]; };
      long longest = 0;
      for (long q = 0; q < p; ++q) longest = count(q) > longest ? count(q) : longest;
      ws.ensure_recv(longest > 0 ? longest : 1);
      std::int64_t* const recv = ws.recv.data();
      const long sent0 = (rank + p - 1) % p;
      kern.quantise(first(sent0), first(sent0 + 1), acc, 0, nullptr, 0);
      for (long step = 0; step + 1 < p; ++step) {
        const long send = (rank - step - 1 + 2 * p) % p, get = (rank - step - 2 + 2 * p) % p;
        par.ring_step(acc + elem(send), count(send), recv, count(get));
        if (step + 2 < p)
          kern.quantise(first(get), first(get + 1), acc, 0, recv, elem(get));
        else  // get == rank: the other ranks' total for this rank's run
          overflowed += kern.finish(first(get), first(get + 1), true, recv, elem(get));
      }
      finite = par.allgather_runs(kern.sum.data() + elem(0), counts, displs, overflowed == 0);
    }
    return finite;
  }

  // One workspace per memory space the reduction is used with; host builds have one.
  template <class Mem>
  Workspace<Mem>& workspace() {
    if constexpr (std::is_same_v<Mem, Kokkos::HostSpace>) {
      return host_ws_;
    } else {
      static_assert(std::is_same_v<Mem, typename Kokkos::DefaultExecutionSpace::memory_space>,
                    "reprosgd::Exact: the execution space's memory space must be HostSpace or the default one");
      return device_ws_;
    }
  }

  Workspace<Kokkos::HostSpace> host_ws_;
  Workspace<typename Kokkos::DefaultExecutionSpace::memory_space> device_ws_;
};

REPROSGD_END_NAMESPACE
