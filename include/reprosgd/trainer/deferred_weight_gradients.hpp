// SPDX-License-Identifier: BSD-3-Clause
/// @file DeferredWeightGradients: the weight gradients of a step's Dense layers computed after all
/// of its micro-batches, panel by panel, and summed exactly while a panel's M partials are in L2
/// (docs/distributed.md, "Deferred weight gradients (one process)").
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/gemm.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/reduction/exact.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/**
 * One process's micro-batch weight gradients, summed without their rows leaving the cache.
 *
 * A step of M micro-batches writes M gradient rows (2.7 MB each for the 784-512-512-10 MLP) and
 * the Exact sum reads them all back: 10.7 MB that no L2 holds, read from L3 or memory. Here each
 * Dense layer's dW = x^T gy is not computed during its micro-batch's backward (the layer hands
 * over x and gy through DeferWeightGradients; its bias and input gradients are computed as
 * always); copies of x and gy are kept (rows x (in + out) floats per layer and micro-batch). After
 * the last micro-batch, run() cuts each layer's dW into panels of R rows, computes the M partials
 * of a panel into a scratch of M x R x out floats (256 KiB at most) with the GEMM kernel gemm_tn
 * runs (the same bits: every element is the same FMA chain over the micro-batch's samples), and
 * sums every block of 256 elements of the parameter vector that lies inside the panel from that
 * scratch, with the function Exact's one-rank pass uses (sum_with_own_exponent: the block's own
 * largest exponent, the agreed one on one rank). The elements of the blocks the panel only partly
 * covers go to the gradient rows, and Exact::reduce_presummed sums those blocks (and every block
 * outside the Dense weights) from the rows. So the result has the bits of Exact::reduce on the
 * rows written the usual way; only the memory traffic changes.
 *
 * Used by the StepPipeline on one rank (data parallelism with one process, or Serial) with the
 * Exact reduction on host memory; model parallelism, several ranks (whose rows travel) and device
 * spaces take the usual path. Panels are the parallel work items (one thread each).
 */
template <class ExecSpace>
class DeferredWeightGradients {
 public:
  using memory_space = typename ExecSpace::memory_space;
  /// Host execution spaces on host memory, with a compiler that has the packed host GEMM kernel
  /// (kernels/gemm.hpp; the same test in a CUDA or HIP build's host and device passes).
  static constexpr bool available =
#if defined(__GNUC__) || defined(__clang__)
      is_host_space_v<ExecSpace> && std::is_same_v<memory_space, Kokkos::HostSpace>;
#else
      false;
#endif

  /// A step of `micro_batches` micro-batches begins; row u of its gradient matrix starts at
  /// `row0 + u * stride`.
  void begin_step(long micro_batches, const float* row0, long stride) {
    M_ = micro_batches;
    row0_ = row0;
    stride_ = stride;
  }
  /// Micro-batch u (0 .. M-1 of this step) is next.
  void begin_micro_batch(long u) {
    // Micro-batch 0 said which layers there are (a model with fewer than an earlier one's drops the rest).
    if (u_ == 0 && u != 0) layers_.resize(static_cast<std::size_t>(next_));
    u_ = u;
    next_ = 0;
  }

  /// A Dense layer's dW of the current micro-batch: keep x (rows x in) and gy (rows x out) and
  /// where dW lies in the row (gw, in x out with row stride out). The layers come in the same
  /// order in every micro-batch. Local.
  template <class X, class GY, class GW>
  void record(const ExecSpace& space, const X& x, const GY& gy, const GW& gw) {
    const long rows = static_cast<long>(x.extent(0)), in = static_cast<long>(x.extent(1));
    const long out = static_cast<long>(gy.extent(1));
    const long row_start = static_cast<long>(gw.data() - (row0_ + u_ * stride_));
    if (next_ == static_cast<long>(layers_.size())) {
      if (u_ != 0)
        throw config_error("reprosgd::DeferredWeightGradients: micro-batch " + std::to_string(u_) +
                           " records more layers than micro-batch 0 did");
      layers_.emplace_back();
    }
    Layer& l = layers_[static_cast<std::size_t>(next_++)];
    if (u_ == 0) {
      if (l.rows != rows || l.in != in || l.out != out || static_cast<long>(l.x.size()) != M_) {
        l.x.assign(static_cast<std::size_t>(M_), Matrix<memory_space>());
        l.gy.assign(static_cast<std::size_t>(M_), Matrix<memory_space>());
        for (long u = 0; u < M_; ++u) {
          l.x[static_cast<std::size_t>(u)] =
              Matrix<memory_space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::deferred_x"), rows, in);
          l.gy[static_cast<std::size_t>(u)] =
              Matrix<memory_space>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::deferred_gy"), rows, out);
        }
      }
      l.rows = rows, l.in = in, l.out = out, l.offset = row_start;
    } else if (l.rows != rows || l.in != in || l.out != out || l.offset != row_start) {
      throw config_error("reprosgd::DeferredWeightGradients: micro-batch " + std::to_string(u_) +
                         " records another layer than micro-batch 0 did");
    }
    Kokkos::deep_copy(space, l.x[static_cast<std::size_t>(u_)], x);
    Kokkos::deep_copy(space, l.gy[static_cast<std::size_t>(u_)], gy);
  }

  /**
   * Compute every recorded dW of the step's M micro-batches and sum the blocks inside the panels
   * into `sum` (flagging them in `slots`: Exact::presummed); write the other elements of the dW
   * regions into the M rows of `rows`. Local.
   */
  template <class Rows, class Sum>
  void run(const ExecSpace& space, const Rows& rows, const Sum& sum, const Exact::Presummed& slots) {
#if REPROSGD_IMPL_GEMM_HOST_KERNEL
    if constexpr (available) {
      if (next_ != static_cast<long>(layers_.size()))
        throw config_error("reprosgd::DeferredWeightGradients: the last micro-batch recorded " + std::to_string(next_) +
                           " layers, the first " + std::to_string(layers_.size()));
      run_all(space, rows, sum, slots, Exact::headroom_of(M_));
      return;
    }
#endif
    (void)space, (void)rows, (void)sum, (void)slots;
    throw config_error("reprosgd::DeferredWeightGradients: host execution spaces with the packed GEMM kernel only");
  }

 private:
  struct Layer {
    long rows = 0, in = 0, out = 0;
    long offset = 0;                      // dW's first element in a gradient row
    std::vector<Matrix<memory_space>> x;  // per micro-batch: the layer's input
    std::vector<Matrix<memory_space>> gy;  // per micro-batch: its output gradient (held features)
  };

  /// Bytes of one panel's M partials: at most this much, so that they stay in L2 with the
  /// micro-batch's gy and the GEMM's buffer.
  static constexpr long panel_bytes = 256 * 1024;

#if REPROSGD_IMPL_GEMM_HOST_KERNEL
  /// What a panel's work item needs of its layer: the micro-batches' x and gy, dW's place and the
  /// GEMM plans of a whole panel and of the layer's last one.
  struct Plan {
    const float* const* x;
    const float* const* gy;
    long offset, in, out, R, panels;
    gemm_host::Plan full, tail;
  };
  /// A work item: panel p of plan l.
  struct Item {
    int l;
    long p;
  };

  /// One parallel pass over every layer's panels, in the order of the parameter vector: a thread
  /// takes a contiguous run of them, as the optimizer's update takes a contiguous run of the
  /// vector next, so most of the sums it writes are still in its own cache there.
  template <class Rows, class Sum>
  void run_all(const ExecSpace& space, const Rows& rows, const Sum& sum, const Exact::Presummed& slots,
               std::int32_t headroom) {
    namespace gh = gemm_host;
    const long M = M_;
    const gh::Isa isa = gh::best_isa();
    plans_.clear();
    items_.clear();
    pointers_.clear();
    std::size_t gemm_floats = 0;
    long panel_floats = 0;
    for (const Layer& l : layers_)
      for (long u = 0; u < M; ++u) pointers_.push_back(l.x[static_cast<std::size_t>(u)].data());
    for (const Layer& l : layers_)
      for (long u = 0; u < M; ++u) pointers_.push_back(l.gy[static_cast<std::size_t>(u)].data());
    const std::size_t layers = layers_.size();
    for (std::size_t i = 0; i < layers; ++i) {
      const Layer& l = layers_[i];
      if (l.in == 0 || l.out == 0) continue;
      long R = panel_bytes / (M * l.out * static_cast<long>(sizeof(float)));
      R = R < 1 ? 1 : (R > l.in ? l.in : R);
      const long panels = (l.in + R - 1) / R, last = l.in - (panels - 1) * R;
      // No streaming: the panel is read back at once (LONG_MAX: no C is large enough).
      const auto plan = [&](long r) {
        return gh::make_plan(isa, static_cast<int>(r), static_cast<int>(l.out), static_cast<int>(l.rows), 1, LONG_MAX);
      };
      plans_.push_back({pointers_.data() + i * static_cast<std::size_t>(M),
                        pointers_.data() + (layers + i) * static_cast<std::size_t>(M), l.offset, l.in, l.out, R,
                        panels, plan(R), plan(last)});
      const Plan& pl = plans_.back();
      gemm_floats = std::max({gemm_floats, pl.full.buffer_floats(), pl.tail.buffer_floats()});
      panel_floats = std::max(panel_floats, M * R * l.out);
      for (long p = 0; p < panels; ++p) items_.push_back({static_cast<int>(plans_.size() - 1), p});
    }
    if (items_.empty()) return;
    // Work items in the order of the parameter vector (the layers were recorded from the top down).
    std::stable_sort(items_.begin(), items_.end(), [&](const Item& a, const Item& b) {
      return plans_[static_cast<std::size_t>(a.l)].offset < plans_[static_cast<std::size_t>(b.l)].offset;
    });
    const std::size_t bytes = (gemm_floats + static_cast<std::size_t>(panel_floats)) * sizeof(float) + 64;
    const Plan* const plans = plans_.data();
    const Item* const items = items_.data();
    const long n = static_cast<long>(sum.extent(0));
    const long row_stride = static_cast<long>(rows.stride(0));
    float* const rows0 = rows.data();
    float* const sum0 = sum.data();
    const auto tops = slots.tops, lows = slots.lows, overs = slots.overs;
    const auto done = slots.done;
    using policy = Kokkos::TeamPolicy<ExecSpace>;
    using member = typename policy::member_type;
    Kokkos::parallel_for(
        "reprosgd::deferred_weight_gradients",
        policy(space, static_cast<int>(items_.size()), 1).set_scratch_size(1, Kokkos::PerTeam(bytes)),
        [=](const member& team) {
          const Item item = items[team.league_rank()];
          const Plan& pl = plans[item.l];
          const long out = pl.out;
          const long r0 = item.p * pl.R, rp = item.p + 1 == pl.panels ? pl.in - r0 : pl.R;
          const gh::Plan& plan = item.p + 1 == pl.panels ? pl.tail : pl.full;
          auto* const raw = static_cast<float*>(team.team_scratch(1).get_shmem(bytes));
          // The partials 64-byte aligned, after the GEMM's buffer.
          float* const buffer = raw;
          float* const partials = reinterpret_cast<float*>(
              (reinterpret_cast<std::uintptr_t>(raw + gemm_floats) + 63) & ~static_cast<std::uintptr_t>(63));
          const long len = rp * out;  // elements of the panel in one row
          for (long u = 0; u < M; ++u) {
            // tn: op(A)(i, s) = x[s * in + r0 + i] for the panel's rows i, op(B)(s, j) = gy[s * out + j].
            const gh::Operand a{pl.x[u] + r0, 1, static_cast<std::ptrdiff_t>(pl.in)};
            const gh::Operand b{pl.gy[u], static_cast<std::ptrdiff_t>(out), 1};
            for (int t = 0; t < plan.tiles(); ++t)
              gh::compute_tile(plan, t, a, b, partials + u * len, static_cast<std::ptrdiff_t>(out), buffer);
          }
          // The panel is elements [e0, e1) of each row; blocks [b0, b1) lie inside it.
          const long e0 = pl.offset + r0 * out, e1 = e0 + len;
          const long bs = Exact::block_size;
          long b0 = (e0 + bs - 1) / bs, b1 = e1 / bs;
          if (e1 == n) b1 = (n + bs - 1) / bs;  // the vector's last, shorter block ends here
          if (b1 < b0) b1 = b0;
          using PanelRows = Kokkos::View<const float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
          using PanelSum = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
          using Kern = detail::exact::BlockKernels<ExecSpace, PanelRows, PanelSum, PanelSum>;
          const PanelRows prow(partials, M, len);
          const PanelSum psum(sum0 + e0, len);
          for (long b = b0; b < b1; ++b) {
            const long lo = b * bs - e0, blen = (b + 1) * bs < n ? bs : n - b * bs;
            int over = 0;
            const auto x = Kern::sum_with_own_exponent(prow, psum, M, lo, blen, headroom, over);
            tops(b) = x.top;
            lows(b) = x.low;
            overs(b) = over;
            done(b) = 1;
          }
          // The rest of the panel goes to the rows, for reduce_presummed.
          const long head_end = b0 * bs < e1 ? b0 * bs : e1;
          const long tail_start = b1 * bs > head_end ? b1 * bs : head_end;
          for (long u = 0; u < M; ++u) {
            float* const row = rows0 + u * row_stride;
            const float* const src = partials + u * len;
            for (long e = e0; e < head_end; ++e) row[e] = src[e - e0];
            for (long e = tail_start; e < e1; ++e) row[e] = src[e - e0];
          }
        });
    space.fence();
  }
#endif

  std::vector<Layer> layers_;
#if REPROSGD_IMPL_GEMM_HOST_KERNEL
  std::vector<Plan> plans_;  // run_all's, kept for their allocations
  std::vector<Item> items_;
#endif
  std::vector<const float*> pointers_;  // every layer's x, then every layer's gy, per micro-batch
  long M_ = 0, u_ = 0, next_ = 0;
  const float* row0_ = nullptr;
  long stride_ = 0;
};

}  // namespace detail
REPROSGD_END_NAMESPACE
