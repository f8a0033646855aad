// SPDX-License-Identifier: BSD-3-Clause
/// @file make_on_survivors: make a ULFM policy over the processes of a communicator that are still
/// alive, when some die just before or while the policy's set-up collectives run.
///
/// A policy's constructor is collective (MPI_Comm_dup, a grid's splits, a spare pool's
/// rendezvous). A process that dies before or inside those calls makes them fail on some survivors
/// and succeed on others; without a way back every survivor could only give up (train_mlp used to
/// exit 76 and be relaunched). Nothing has been trained yet, so the survivors can simply make the
/// policy again over the communicator of those alive: the run then starts on fewer ranks, which the
/// Exact reduction makes invisible in the bits.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/error.hpp>

#include <mpi.h>
#include <mpi-ext.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// What make_on_survivors made: the policy, and the ranks of the given communicator that were lost
/// on the way (ascending; empty when every process took part). The survivors' communicators the
/// attempts ran on are freed: a policy keeps its own duplicates.
template <class Policy>
struct SurvivingSetup {
  Policy policy;
  std::vector<int> lost_ranks;
};

namespace detail {
/// MPIX_Comm_shrink(current) with MPI_ERRORS_RETURN, and the ranks of `base` that `current` had and
/// the result lacks appended to `lost`.
inline CommHandle shrink_keeping_track(MPI_Comm current, MPI_Comm base, std::vector<int>& lost) {
  MPI_Comm next = MPI_COMM_NULL;
  mpi_check(MPIX_Comm_shrink(current, &next), "reprosgd::make_on_survivors: MPIX_Comm_shrink");
  CommHandle survivors(next);
  mpi_check(MPI_Comm_set_errhandler(next, MPI_ERRORS_RETURN), "reprosgd::make_on_survivors: MPI_Comm_set_errhandler");
  MPI_Group from = MPI_GROUP_NULL, to = MPI_GROUP_NULL, in_base = MPI_GROUP_NULL;
  MPI_Comm_group(current, &from);
  MPI_Comm_group(next, &to);
  MPI_Comm_group(base, &in_base);
  int n = 0;
  MPI_Group_size(from, &n);
  std::vector<int> ranks(static_cast<std::size_t>(n)), there(ranks.size()), base_rank(ranks.size());
  for (int r = 0; r < n; ++r) ranks[static_cast<std::size_t>(r)] = r;
  MPI_Group_translate_ranks(from, n, ranks.data(), to, there.data());
  MPI_Group_translate_ranks(from, n, ranks.data(), in_base, base_rank.data());
  MPI_Group_free(&from);
  MPI_Group_free(&to);
  MPI_Group_free(&in_base);
  for (std::size_t r = 0; r < ranks.size(); ++r)
    if (there[r] == MPI_UNDEFINED) lost.push_back(base_rank[r]);
  return survivors;
}
}  // namespace detail

/**
 * `make(c)` over `comm`, and again over the survivors whenever a process of it fails before or
 * during that call. A rank whose call fails with an MPI error (comm_error, process_failure) revokes
 * the communicator it was given, which releases the ranks still inside a collective on it. After
 * each attempt the ranks agree (MPIX_Comm_agree, which tolerates failures and gives every survivor
 * the same answer) whether every one of them made its policy; if one did not, every survivor drops
 * what it made, shrinks the communicator (MPIX_Comm_shrink) and tries again, so that the policies
 * finally made are made by the same processes from the same call.
 *
 * When the shrink finds every process alive, the MPI error is thrown on every rank (a retry would
 * fail the same way); any other error of `make` (e.g. a config_error) propagates at once, as it
 * would without this. A survivor left waiting inside a collective on a communicator that `make` derived (a
 * grid's split of its duplicate) for a survivor that already gave up is not released by the
 * revoke: bound the whole call with a deadline (detail::Watchdog; train_mlp's --startup-timeout),
 * which ends such a job for a relaunch instead of hanging it. The attempts run on shrinks of `comm`
 * (MPIX_Comm_shrink tolerates a dead process and leaves out one already dead), so `comm` itself is
 * never revoked.
 *
 * @param comm the communicator to make the policy over (its error handler is MPI_ERRORS_RETURN
 *        during the call and restored afterwards)
 * @param make callable MPI_Comm -> Policy, collective over its argument; throws comm_error or
 *        process_failure when a call fails
 * @throws whatever `make` throws that is not an MPI error; comm_error when the shrink fails, or
 *         when an attempt failed with an MPI error but the shrink found every process alive (on
 *         the ranks that saw it, their error; on the others one saying so)
 * @collective over `comm`; needs an MPI with ULFM run with failures enabled (mpiexec --with-ft ulfm)
 */
template <class Make>
SurvivingSetup<std::invoke_result_t<Make&, MPI_Comm>> make_on_survivors(MPI_Comm comm, Make make) {
  using Policy = std::invoke_result_t<Make&, MPI_Comm>;
  const detail::ErrorsReturnScope returns(comm);
  std::vector<int> lost;
  // The attempts run on a communicator of our own, never on the caller's: a failed attempt revokes
  // it, and with MPI_COMM_WORLD revoked, 4 of 15 runs of the ft_setup_failure tests hung after the
  // fingerprint, at the job's end. MPIX_Comm_shrink is the copy that tolerates a dead process (and
  // leaves out one already dead).
  detail::CommHandle shrunk = detail::shrink_keeping_track(comm, comm, lost);
  for (;;) {
    const MPI_Comm current = shrunk.get();
    std::optional<Policy> made;
    std::exception_ptr why;
    try {
      made.emplace(make(current));
    } catch (const comm_error&) {
      // Any MPI error, not only ULFM's MPI_ERR_PROC_FAILED: with a process dead, Open MPI's
      // MPI_Comm_dup also failed with MPI_ERR_OTHER (its non-blocking schedule aborted) on one rank
      // of a start-up campaign. The shrink below tells a loss from an error a retry cannot mend.
      why = std::current_exception();
      (void)MPIX_Comm_revoke(current);  // release the ranks still in a collective on it
    } catch (const process_failure&) {
      why = std::current_exception();
      (void)MPIX_Comm_revoke(current);
    }
    int everyone_made_it = made ? 1 : 0;
    // Failures are tolerated here: the AND is over the survivors and the same on each of them.
    (void)MPIX_Comm_agree(current, &everyone_made_it);
    if (everyone_made_it) {
      std::sort(lost.begin(), lost.end());
      return {std::move(*made), std::move(lost)};
    }
    made.reset();  // a policy over a communicator with a dead member: its handles are freed locally
    (void)MPIX_Comm_failure_ack(current);
    const std::size_t before = lost.size();
    detail::CommHandle survivors = detail::shrink_keeping_track(current, comm, lost);
    if (lost.size() == before) {  // nobody died: retrying would fail the same way
      if (why) std::rethrow_exception(why);
      throw comm_error("reprosgd::make_on_survivors: making the policy failed with an MPI error on another rank, "
                       "and every process is alive");
    }
    shrunk = std::move(survivors);
  }
}

REPROSGD_END_NAMESPACE
