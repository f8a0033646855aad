// SPDX-License-Identifier: BSD-3-Clause
/// @file append_from_every_rank(): every rank's samples of one simulation step, offered to the
/// replicated SampleStream on every rank in one call.
///
/// Under data parallelism every rank holds the whole stream (the Trainer draws each global batch
/// from it and gives each rank its micro-batches). A domain-decomposed simulation computes its
/// samples where its cells live, so each step's samples are gathered from the ranks first. The
/// stream orders what one append() is given by logical id, so the result does not depend on which
/// rank computed which rows, on the rank count or on the order of the gather; but one step's
/// samples must go in ONE append (two appends place their samples in call order), which is what
/// this function does.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/data/sample_stream.hpp>
#include <reprosgd/error.hpp>

#include <Kokkos_Core.hpp>

#if REPROSGD_HAS_MPI
#include <mpi.h>
#endif

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

namespace detail {

/// A rank's rows staged contiguously on the host, row-major (the gather's send buffer).
template <class T, class View>
std::vector<T> host_rows(const View& v, std::size_t cols) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<T> out(v.extent(0) * cols);
  for (std::size_t i = 0; i < v.extent(0); ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      if constexpr (View::rank == 1)
        out[i] = static_cast<T>(h(i));
      else
        out[i * cols + j] = static_cast<T>(h(i, j));
    }
  return out;
}

#if REPROSGD_HAS_MPI
template <class T>
MPI_Datatype mpi_type_of() {
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return MPI_INT32_T;
  else
    return MPI_UINT64_T;
}

/// MPI_Allgatherv of every rank's `rows` rows of `cols` values, in rank order.
template <class T, class Par>
std::vector<T> allgather_rows(const Par& par, const std::vector<T>& mine, const std::vector<long>& rows, long cols,
                              const char* who) {
  std::vector<int> counts(rows.size()), displs(rows.size());
  long total = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const long n = rows[r] * cols;
    if (n > INT_MAX || total > INT_MAX - n)
      throw config_error(std::string(who) + ": more than 2^31 - 1 values in one gather; append in smaller groups");
    counts[r] = static_cast<int>(n);
    displs[r] = static_cast<int>(total);
    total += n;
  }
  std::vector<T> all(static_cast<std::size_t>(total));
  const int me = par.rank();
  par.check(MPI_Allgatherv(mine.data(), counts[static_cast<std::size_t>(me)], mpi_type_of<T>(), all.data(),
                           counts.data(), displs.data(), mpi_type_of<T>(), par.comm()),
            who, "MPI_Allgatherv");
  return all;
}
#endif

}  // namespace detail

/**
 * Offer the samples of one simulation step, computed across the ranks of `par`, to `stream` on
 * every rank: this rank's N_r samples (`ids`, N_r logical ids; `x`, N_r x F; `y`, N_r x T float
 * targets for a regression stream or N_r int32 labels for a classification one) are gathered in
 * rank order and given to one SampleStream::append (or append_labelled) on every rank, which puts
 * them in id order. Every rank's stream then holds the same samples in the same slots, whatever the
 * decomposition.
 *
 * The shapes are checked on every rank and agreed before anything is sent, so a rank with a
 * wrong width throws on every rank (nothing appended anywhere) instead of leaving the others in
 * the gather. The appended rows are the same on every rank, so append()'s own checks (NaN or Inf,
 * repeated ids, labels out of range) also throw on every rank together.
 *
 * Under a parallelism without MPI (Serial) it is `stream.append(space, ids, x, y)`.
 *
 * @param par   the Trainer's parallelism (trainer.parallelism()): its communicator is used
 * @param space an execution space that can read `stream`'s memory
 * @throws data_error (every rank, nothing appended) on a shape mismatch on any rank or a bad row;
 *         comm_error (or the fault policy's error) when the gather fails
 * @collective over par's communicator @deterministic
 */
template <class Par, class MemorySpace, class ExecSpace, class Ids, class X, class Y>
  requires(Kokkos::is_execution_space<ExecSpace>::value && Kokkos::is_view<X>::value && Kokkos::is_view<Y>::value)
void append_from_every_rank(const Par& par, SampleStream<MemorySpace>& stream, const ExecSpace& space, const Ids& ids,
                            const X& x, const Y& y) {
  constexpr bool labelled = std::is_integral_v<typename Y::non_const_value_type>;
  static_assert(X::rank == 2, "reprosgd::append_from_every_rank: the features are an N x F View");
  static_assert(Y::rank == (labelled ? 1 : 2),
                "reprosgd::append_from_every_rank: the targets are an N x T View of float, or the labels an N View of int32");
  auto offer = [&](const auto& all_ids, const auto& all_x, const auto& all_y) {
    if constexpr (labelled)
      stream.append_labelled(space, all_ids, all_x, all_y);
    else
      stream.append(space, all_ids, all_x, all_y);
  };
  if constexpr (!requires { par.comm(); }) {
    offer(ids, x, y);
  } else {
#if REPROSGD_HAS_MPI
    const char* who = "reprosgd::append_from_every_rank";
    const std::size_t n = ids.extent(0);
    const std::size_t F = static_cast<std::size_t>(stream.feature_count());
    const std::size_t T = labelled ? 1 : static_cast<std::size_t>(stream.target_count());
    const bool fits = x.extent(0) == n && x.extent(1) == F && y.extent(0) == n && (labelled || y.extent(1) == T);
    if (!par.agree(fits))
      throw data_error(std::string(who) + ": a rank offered rows of the wrong shape (each id needs " + std::to_string(F) +
                       " features and " + (labelled ? std::string("a label") : std::to_string(T) + " targets") +
                       "; rank " + std::to_string(par.rank()) + " offered " + std::to_string(n) + " ids, features " +
                       std::to_string(x.extent(0)) + " x " + std::to_string(x.extent(1)) + ", " +
                       (labelled ? "labels " : "targets ") + std::to_string(y.extent(0)) +
                       (labelled ? std::string() : " x " + std::to_string(y.extent(1))) + "); nothing appended on any rank");
    std::vector<std::int64_t> mine{static_cast<std::int64_t>(n)}, all(static_cast<std::size_t>(par.size()));
    par.allgather_words(mine, all);
    const std::vector<long> rows(all.begin(), all.end());
    using YT = std::conditional_t<labelled, std::int32_t, float>;
    const auto gathered_ids = detail::allgather_rows(par, detail::host_rows<std::uint64_t>(ids, 1), rows, 1, who);
    const auto gathered_x = detail::allgather_rows(par, detail::host_rows<float>(x, F), rows, static_cast<long>(F), who);
    const auto gathered_y = detail::allgather_rows(par, detail::host_rows<YT>(y, T), rows, static_cast<long>(T), who);
    const std::size_t N = gathered_ids.size();
    using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
    const Kokkos::View<const std::uint64_t*, Kokkos::HostSpace, Unmanaged> host_ids(gathered_ids.data(), N);
    const Kokkos::View<const float**, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged> host_x(gathered_x.data(), N, F);
    auto dev_x = Kokkos::create_mirror_view_and_copy(MemorySpace(), host_x);
    if constexpr (labelled) {
      const Kokkos::View<const YT*, Kokkos::HostSpace, Unmanaged> host_y(gathered_y.data(), N);
      offer(host_ids, dev_x, Kokkos::create_mirror_view_and_copy(MemorySpace(), host_y));
    } else {
      const Kokkos::View<const YT**, Kokkos::LayoutRight, Kokkos::HostSpace, Unmanaged> host_y(gathered_y.data(), N, T);
      offer(host_ids, dev_x, Kokkos::create_mirror_view_and_copy(MemorySpace(), host_y));
    }
#endif
  }
}

REPROSGD_END_NAMESPACE
