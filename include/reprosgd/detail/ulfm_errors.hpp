// SPDX-License-Identifier: BSD-3-Clause
/// @file ULFM error handling shared by the fault-tolerant policies and the spare pool: what an MPI
/// return code says (a dead process, a revoked communicator), who is known dead, and the revoke
/// and throw that turns a failed collective into process_failure.
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_ULFM
#error "reprosgd/detail/ulfm_errors.hpp needs an MPI with ULFM (MPIX_Comm_shrink in <mpi-ext.h>)"
#endif

#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/error.hpp>

#include <mpi.h>
#include <mpi-ext.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

namespace detail {

/// The MPI error class of a return code (the code itself if MPI_Error_class fails).
inline int mpi_error_class(int rc) noexcept {
  int cls = rc;
  if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = rc;
  return cls;
}

/// Whether an error says that a process of the communicator died (revoked is not such a report:
/// it only says that some rank gave up on the communicator, for whatever reason).
inline bool is_process_failure(int rc) noexcept {
  const int cls = mpi_error_class(rc);
  return cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_PROC_FAILED_PENDING;
}

/// The ranks of `comm` that this process knows to have failed (MPIX_Comm_get_failed), ascending.
/// Local knowledge: another survivor may know of more or fewer; recover() gives the agreed list.
inline std::vector<int> known_failed_ranks(MPI_Comm comm) {
  MPI_Group failed = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
  std::vector<int> out;
  if (MPIX_Comm_get_failed(comm, &failed) != MPI_SUCCESS) return out;
  int n = 0;
  if (MPI_Group_size(failed, &n) == MPI_SUCCESS && n > 0 && MPI_Comm_group(comm, &all) == MPI_SUCCESS) {
    std::vector<int> in(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) in[static_cast<std::size_t>(i)] = i;
    out.resize(in.size());
    if (MPI_Group_translate_ranks(failed, n, in.data(), all, out.data()) != MPI_SUCCESS) out.clear();
    MPI_Group_free(&all);
  }
  MPI_Group_free(&failed);
  std::sort(out.begin(), out.end());
  return out;
}

/**
 * Revoke `comm` and throw: process_failure (agreed as given) when `rc` reports a dead process or a
 * revoked communicator, comm_error for any other error.
 */
[[noreturn]] inline void ulfm_raise(MPI_Comm comm, int rc, bool agreed, const char* who, const char* call) {
  // Revoke first: a rank still blocked in another operation on comm (or about to start one)
  // returns MPIX_ERR_REVOKED instead of waiting for a peer that will never answer.
  MPIX_Comm_revoke(comm);
  const std::string what = std::string(who) + ": " + call;
  const int cls = mpi_error_class(rc);
  if (is_process_failure(rc) || cls == MPIX_ERR_REVOKED || agreed) {
    std::vector<int> failed = known_failed_ranks(comm);
    std::string list;
    for (int r : failed) {
      if (!list.empty()) list += ',';
      list += std::to_string(r);
    }
    throw process_failure(what + ": a process of the communicator failed (" + mpi_error_string(rc) +
                              "); ranks known failed here: " + (list.empty() ? "none yet" : list) +
                              "; the communicator is revoked, call recover()",
                          std::move(failed), agreed);
  }
  throw comm_error(what + " failed (" + mpi_error_string(rc) + "); the communicator is revoked");
}

}  // namespace detail

REPROSGD_END_NAMESPACE
