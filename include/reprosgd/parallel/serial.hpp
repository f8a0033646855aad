// SPDX-License-Identifier: BSD-3-Clause
/// @file Serial: one process; all collectives are local. The reference every other policy matches.
#pragma once

#include <reprosgd/concepts/exchange.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/reduction/exact.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/**
 * One process owns every micro-batch. Threads inside the process come from the Kokkos execution
 * space, and the kernels make the result independent of their number (contract level L1).
 *
 * @tparam ExecSpace Kokkos execution space the kernels run on.
 * @tparam Red How micro-batch gradients are summed. Exact (the default) gives the bits every
 *             data-parallel run gives, for any rank count.
 */
template <class ExecSpace = Kokkos::DefaultExecutionSpace, class Red = Exact>
class Serial {
 public:
  using execution_space = ExecSpace;
  using reduction_type = Red;

  Serial() = default;
  explicit Serial(const ExecSpace& space) : space_(space) {}

  static constexpr const char* name() noexcept { return "serial"; }
  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return 1; }
  [[nodiscard]] const execution_space& space() const noexcept { return space_; }
  [[nodiscard]] MicroBatchRange micro_batch_range(long micro_batches) const noexcept {
    return {0, micro_batches};
  }

  void barrier() const noexcept {}
  [[nodiscard]] bool agree(bool flag) const noexcept { return flag; }
  template <class View>
  void allreduce_max(const View&) const noexcept {}
  template <class View>
  void allreduce_sum(const View&) const noexcept {}
  template <class In, class Out>
  void allgather_micro_batches(const In& local, const Out& all, long micro_batches) const {
    if (static_cast<long>(local.extent(0)) != micro_batches || static_cast<long>(all.extent(0)) != micro_batches)
      throw config_error("reprosgd::Serial::allgather_micro_batches: expected " +
                         std::to_string(micro_batches) + " values");
    if (local.data() != all.data()) Kokkos::deep_copy(all, local);
  }

  // The Exact reduction's exchange (concepts/exchange.hpp) over one rank: nothing travels (Exact
  // does not call these with one rank; they exist so that one process models every concept).
  void exchange_runs(const float*, long, long, std::span<const long>, std::span<const std::int32_t>, float*) const noexcept {}
  /// A ring of one: this rank is its own neighbour on both sides.
  void ring_step(const std::int64_t* send, long send_count, std::int64_t* recv, long) const noexcept {
    if (send != recv) std::copy(send, send + send_count, recv);
  }
  [[nodiscard]] bool allgather_runs(float*, std::span<const long>, std::span<const long>, bool ok) const noexcept {
    return ok;
  }

 private:
  ExecSpace space_{};
};

static_assert(Parallelism<Serial<>>);
static_assert(Reduction<Exact, Serial<>>);
static_assert(Exchange<Serial<>>);

REPROSGD_END_NAMESPACE
