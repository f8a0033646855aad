// SPDX-License-Identifier: BSD-3-Clause
/// @file MPI error checking (mpi_check), MPI datatypes of C++ types, and an owning communicator handle.
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_MPI
#error "reprosgd/detail/mpi_check.hpp needs MPI: link ReproSGD::reprosgd built with MPI (REPROSGD_ENABLE_MPI=ON), which defines REPROSGD_HAS_MPI=1"
#endif

#include <reprosgd/error.hpp>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// The MPI library's text for an error code, with its error class, e.g. "MPI_ERR_COUNT: invalid
/// count argument (error class 2)".
inline std::string mpi_error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  std::string out;
  if (MPI_Error_string(rc, text, &len) == MPI_SUCCESS && len > 0)
    out.assign(text, static_cast<std::size_t>(len));
  else
    out = "unknown MPI error";
  int cls = rc;
  if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = rc;
  return out + " (error code " + std::to_string(rc) + ", class " + std::to_string(cls) + ")";
}

/**
 * Throw reprosgd::comm_error when an MPI call did not return MPI_SUCCESS.
 *
 * Only meaningful on communicators whose error handler is MPI_ERRORS_RETURN (the default handler,
 * MPI_ERRORS_ARE_FATAL, aborts before returning).
 *
 * @param rc   the MPI call's return code
 * @param what the function and call, e.g. "reprosgd::DataParallel::barrier: MPI_Barrier"
 * @throws comm_error "<what> failed: <MPI error string> (error code N, class C)"
 */
inline void mpi_check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw comm_error(std::string(what) + " failed: " + mpi_error_string(rc));
}

/// Whether `e` says that a process is gone: a process_failure, or a comm_error of mpi_check whose
/// MPI error string is ULFM's MPI_ERR_PROC_FAILED or MPI_ERR_REVOKED (a call on a communicator
/// with a dead member, or one a survivor revoked because of it).
inline bool is_process_loss(const std::exception& e) {
  if (dynamic_cast<const process_failure*>(&e)) return true;
  if (!dynamic_cast<const comm_error*>(&e)) return false;
  const std::string_view what = e.what();
  return what.find("MPI_ERR_PROC_FAILED") != std::string_view::npos || what.find("MPI_ERR_REVOKED") != std::string_view::npos;
}

/// The MPI datatype of an arithmetic type (fixed-width integers map to MPI_INT*_T, never to the
/// C types whose width varies).
template <class T>
MPI_Datatype mpi_datatype() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<U, double>) return MPI_DOUBLE;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && sizeof(U) == 1) return MPI_INT8_T;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && sizeof(U) == 2) return MPI_INT16_T;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && sizeof(U) == 4) return MPI_INT32_T;
  else if constexpr (std::is_integral_v<U> && std::is_signed_v<U> && sizeof(U) == 8) return MPI_INT64_T;
  else if constexpr (std::is_integral_v<U> && std::is_unsigned_v<U> && sizeof(U) == 1) return MPI_UINT8_T;
  else if constexpr (std::is_integral_v<U> && std::is_unsigned_v<U> && sizeof(U) == 2) return MPI_UINT16_T;
  else if constexpr (std::is_integral_v<U> && std::is_unsigned_v<U> && sizeof(U) == 4) return MPI_UINT32_T;
  else if constexpr (std::is_integral_v<U> && std::is_unsigned_v<U> && sizeof(U) == 8) return MPI_UINT64_T;
  else static_assert(sizeof(U) == 0, "reprosgd::detail::mpi_datatype: no MPI datatype for this type");
}

/// True once MPI_Finalize has been called (after which no MPI call but a few queries is allowed).
inline bool mpi_finalized() noexcept {
  int done = 0;
  MPI_Finalized(&done);
  return done != 0;
}

/**
 * MPI_ERRORS_RETURN on a user's communicator for the life of this object, then its own handler
 * again. The set-up calls on the communicator a policy is given (the MPI_Comm_dup, split and
 * agreement that make its own) run under it: with the default MPI_ERRORS_ARE_FATAL, a rank that
 * died while the others set up made Open MPI abort every survivor inside MPI_Comm_dup (exit 75, no
 * line of ours); now the failure is a comm_error the program reports. Never throws; a handler
 * that cannot be read or set leaves the communicator as it was.
 */
class ErrorsReturnScope {
 public:
  explicit ErrorsReturnScope(MPI_Comm comm) noexcept : comm_(comm) {
    if (comm_ == MPI_COMM_NULL || MPI_Comm_get_errhandler(comm_, &saved_) != MPI_SUCCESS) {
      saved_ = MPI_ERRHANDLER_NULL;
      return;
    }
    if (MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN) != MPI_SUCCESS) {
      MPI_Errhandler_free(&saved_);
      saved_ = MPI_ERRHANDLER_NULL;
    }
  }
  ErrorsReturnScope(const ErrorsReturnScope&) = delete;
  ErrorsReturnScope& operator=(const ErrorsReturnScope&) = delete;
  ~ErrorsReturnScope() {
    if (saved_ == MPI_ERRHANDLER_NULL || mpi_finalized()) return;
    (void)MPI_Comm_set_errhandler(comm_, saved_);
    (void)MPI_Errhandler_free(&saved_);
  }

 private:
  MPI_Comm comm_;
  MPI_Errhandler saved_ = MPI_ERRHANDLER_NULL;
};

/**
 * Owns a communicator made by MPI_Comm_dup/split/shrink and frees it when destroyed.
 *
 * Move-only. The destructor never throws: if freeing fails it prints a line to stderr, and after
 * MPI_Finalize it does nothing (the communicator is already gone with the library).
 */
class CommHandle {
 public:
  CommHandle() noexcept = default;
  /// Take ownership of `comm` (MPI_COMM_NULL is allowed; predefined communicators are never freed).
  explicit CommHandle(MPI_Comm comm) noexcept : comm_(comm) {}
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  CommHandle(CommHandle&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}
  CommHandle& operator=(CommHandle&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    }
    return *this;
  }
  ~CommHandle() { reset(); }

  [[nodiscard]] MPI_Comm get() const noexcept { return comm_; }
  explicit operator bool() const noexcept { return comm_ != MPI_COMM_NULL; }

  /// Give up ownership without freeing.
  [[nodiscard]] MPI_Comm release() noexcept { return std::exchange(comm_, MPI_COMM_NULL); }

  /// Free the communicator now (collective on it, as MPI_Comm_free is). Never throws.
  void reset() noexcept {
    MPI_Comm c = std::exchange(comm_, MPI_COMM_NULL);
    if (c == MPI_COMM_NULL || c == MPI_COMM_WORLD || c == MPI_COMM_SELF || mpi_finalized()) return;
    const int rc = MPI_Comm_free(&c);
    if (rc != MPI_SUCCESS) {
      // No std::string here: a destructor must not be able to throw, not even bad_alloc.
      char text[MPI_MAX_ERROR_STRING] = "unknown MPI error";
      int len = 0;
      MPI_Error_string(rc, text, &len);
      std::fprintf(stderr, "reprosgd::detail::CommHandle: MPI_Comm_free failed: %s (error code %d)\n", text, rc);
    }
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace detail
REPROSGD_END_NAMESPACE
