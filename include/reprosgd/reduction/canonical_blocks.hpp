// SPDX-License-Identifier: BSD-3-Clause
/// @file CanonicalBlocks: the Exact reduction's shared-exponent blocks as one shard of a model sees
/// them. The blocks are cut from the whole model's (canonical, one-process) parameter vector, 256
/// elements each, whatever the decomposition; a shard holds pieces of some of them ("segments").
///
/// Why it exists: Exact rounds every value onto the int64 grid of its block's largest exponent, so
/// which elements share a block decides which low bits survive. Blocks laid over a shard's own
/// buffer would group different elements for every P_model (the bug of issue 13); blocks laid over
/// the canonical vector group the same elements on every grid, so every element's grid, its
/// integers and its float sum are those of the one-process run (docs/reproducibility.md,
/// "Model parallelism: every reduction is laid over the canonical layout").
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/reduction/detail/exact_kernels.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// A run of `length` parameters at `canonical` in the whole model's buffer and `local` in a shard.
struct CanonicalRun {
  std::size_t canonical = 0;
  std::size_t local = 0;
  std::size_t length = 0;
  friend bool operator==(const CanonicalRun&, const CanonicalRun&) = default;
};

/**
 * A shard's elements cut into segments, each the part of one canonical block (elements
 * [256 c, 256 (c + 1)) of the whole vector) that the shard holds.
 *
 * Built from the shard's runs (Sequential::canonical_runs): increasing canonical offsets, no
 * overlap, local offsets tiling [0, local_size()). Segment s covers local elements
 * [starts(s), starts(s + 1)) and lies in canonical block block_of(s); segments are in local order,
 * so the segments of one canonical block are consecutive. The whole model (one run) gives exactly
 * the uniform blocks of 256.
 *
 * @tparam Mem where the segment starts are read by the reduction's kernels
 */
template <class Mem = Kokkos::DefaultExecutionSpace::memory_space>
class CanonicalBlocks {
 public:
  static constexpr long block_size = detail::exact::block_size;

  /// Nothing yet: assign a constructed layout before use.
  CanonicalBlocks() = default;

  /**
   * @param runs where the shard's elements lie in the canonical vector
   * @param canonical_size the length of the canonical (whole-model) vector
   * @throws config_error when the runs are not increasing, overlap, leave a gap in the shard or
   *         reach past canonical_size
   */
  CanonicalBlocks(std::span<const CanonicalRun> runs, std::size_t canonical_size)
      : canonical_size_(static_cast<long>(canonical_size)) {
    std::vector<long> starts;
    std::size_t local = 0, canonical_end = 0;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const CanonicalRun& r = runs[i];
      if (r.length == 0) continue;
      if (r.local != local || (local > 0 && r.canonical < canonical_end) || r.canonical + r.length > canonical_size)
        throw config_error("reprosgd::CanonicalBlocks: run " + std::to_string(i) + " (canonical " +
                           std::to_string(r.canonical) + ", local " + std::to_string(r.local) + ", length " +
                           std::to_string(r.length) + ") does not continue the shard at local " +
                           std::to_string(local) + " after canonical " + std::to_string(canonical_end) +
                           " within " + std::to_string(canonical_size) + " elements");
      // Cut the run at canonical block boundaries; a piece that continues the previous segment in
      // both layouts (adjacent runs of one block) extends it.
      for (std::size_t c = r.canonical; c < r.canonical + r.length;) {
        const std::size_t block = c / block_size;
        const std::size_t stop = std::min<std::size_t>((block + 1) * block_size, r.canonical + r.length);
        const long at = static_cast<long>(local + (c - r.canonical));
        const bool extends = !blocks_.empty() && blocks_.back() == static_cast<long>(block) && c == canonical_end;
        if (!extends) {
          starts.push_back(at);
          blocks_.push_back(static_cast<long>(block));
        }
        canonical_end = stop;
        c = stop;
      }
      local += r.length;
    }
    local_size_ = static_cast<long>(local);
    starts.push_back(local_size_);
    starts_ = Kokkos::View<long*, Mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::CanonicalBlocks::starts"),
                                       starts.size());
    Kokkos::deep_copy(starts_, Kokkos::View<const long*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(starts.data(), starts.size()));
  }

  /// Elements of the shard.
  [[nodiscard]] long local_size() const noexcept { return local_size_; }
  /// Blocks of the whole vector (including those of which this shard holds nothing).
  [[nodiscard]] long canonical_blocks() const noexcept { return (canonical_size_ + block_size - 1) / block_size; }
  /// Segments of the shard.
  [[nodiscard]] long segments() const noexcept { return static_cast<long>(blocks_.size()); }
  /// segments() + 1 local offsets: segment s is [starts()(s), starts()(s + 1)).
  [[nodiscard]] const Kokkos::View<long*, Mem>& starts() const noexcept { return starts_; }
  /// The canonical block of each segment (host memory), non-decreasing.
  [[nodiscard]] std::span<const long> block_of() const noexcept { return blocks_; }

 private:
  long canonical_size_ = 0;
  long local_size_ = 0;
  std::vector<long> blocks_;
  Kokkos::View<long*, Mem> starts_;
};

REPROSGD_END_NAMESPACE
