// SPDX-License-Identifier: BSD-3-Clause
/// @file MpiEnvironment: initialise MPI for the scope of an object, finalising only what it initialised.
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_MPI
#error "reprosgd/parallel/mpi_environment.hpp needs MPI: build with REPROSGD_ENABLE_MPI=ON and link ReproSGD::reprosgd (it defines REPROSGD_HAS_MPI=1). Serial-only programs use reprosgd/parallel/serial.hpp."
#endif

#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/detail/signal_exit.hpp>
#include <reprosgd/detail/watchdog.hpp>
#include <reprosgd/error.hpp>

#include <mpi.h>

#if REPROSGD_HAS_ULFM
#include <mpi-ext.h>
#endif

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/// The exit code of a process whose MPI start-up did not finish in MpiEnvironment's init_timeout
/// (EX_PROTOCOL of <sysexits.h>, next to restart_exit_code's 75): distinct from every error exit,
/// and one that scripts/relaunch.sh relaunches on.
inline constexpr int startup_failure_exit_code = 76;

/// How MpiEnvironment starts MPI.
struct MpiStartOptions {
  /// The thread level asked of MPI_Init_thread.
  int required = MPI_THREAD_FUNNELED;
  /// Seconds MPI_Init_thread may take before the process ends itself (one line on standard error,
  /// exit startup_failure_exit_code); 0: no limit and no start-up guard. A process of the job that
  /// dies while MPI starts leaves the others inside MPI_Init_thread for ever, even under ULFM (whose
  /// no-hang promise starts once MPI is initialised; Open MPI 5 waits in PMIx_Get for the dead
  /// process's address). With a limit, the two other ways such a death shows inside
  /// MPI_Init_thread end the same way: an error it returns (Open MPI's "unreachable" peer; its
  /// initial error handler is made MPI_ERRORS_RETURN for the call unless the environment chooses
  /// one, and MPI_ERRORS_ARE_FATAL is set on MPI_COMM_WORLD and MPI_COMM_SELF after it), a
  /// crash inside it (detail::SignalExit), and, in a process an MPI launcher started, the end of
  /// the launcher (the process is re-parented; detail::Watchdog's parent check, every 50 ms).
  double init_timeout = 0.0;
  /// Seconds MPI_Finalize may take, in the destructor, once ending_with_error() has said that this
  /// process ends with an error; 0: no limit. Past it the process ends without MPI_Finalize (see
  /// ending_with_error()). An orderly MPI_Finalize takes well under a second.
  double finalize_timeout = 0.0;
};

/**
 * Whether MPI runs with its tolerance of process failures switched on, so that a process's death
 * is reported to the others as an error instead of ending the job: Open MPI 5 started by
 * `mpiexec --with-ft ulfm` (its control variable `mpi_ft_enable`, read through the MPI tool
 * interface). False for an MPI without ULFM, and where the variable cannot be read.
 * Callable before MPI_Init and after MPI_Finalize (the tool interface has its own initialisation).
 */
inline bool mpi_fault_tolerance_enabled() noexcept {
#if REPROSGD_HAS_ULFM
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return false;
  bool enabled = false;
  int index = 0;
  int count = 0;
  char name[64];
  int name_length = sizeof name;
  char description[1];
  int description_length = 0;  // 0: the description is not wanted
  int verbosity = 0, binding = 0, scope = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum enumtype = MPI_T_ENUM_NULL;
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  if (MPI_T_cvar_get_index("mpi_ft_enable", &index) == MPI_SUCCESS &&
      MPI_T_cvar_get_info(index, name, &name_length, &verbosity, &type, &enumtype, description, &description_length,
                          &binding, &scope) ==
          MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    // Open MPI 5 stores it as MPI_C_BOOL; an int is read as an int, any other type as "off".
    if (count == 1 && type == MPI_C_BOOL) {
      bool value = false;
      if (MPI_T_cvar_read(handle, &value) == MPI_SUCCESS) enabled = value;
    } else if (count == 1 && type == MPI_INT) {
      int value = 0;
      if (MPI_T_cvar_read(handle, &value) == MPI_SUCCESS) enabled = value != 0;
    }
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return enabled;
#else
  return false;
#endif
}

/**
 * Initialises MPI (MPI_Init_thread) when constructed unless it already is, and finalises it when
 * destroyed only if this object initialised it. A host program that manages MPI itself can
 * therefore create one too; it then does nothing.
 *
 * Create it before Kokkos is initialised and destroy it after Kokkos is finalised (declare it
 * first), as MPI must outlive every communicator and Kokkos View that a DataParallel holds.
 *
 * The default thread level is MPI_THREAD_FUNNELED: ReproSGD calls MPI only from the thread that
 * launches Kokkos kernels, never from inside them.
 *
 * **Example**:
 * @code
 * int main(int argc, char** argv) {
 *   reprosgd::MpiEnvironment mpi(argc, argv);
 *   Kokkos::ScopeGuard kokkos(argc, argv);
 *   reprosgd::DataParallel<> par;  // dup of MPI_COMM_WORLD
 * }
 * @endcode
 */
class MpiEnvironment {
 public:
  /// Initialise MPI with the program's arguments (MPI may remove the ones it consumes).
  /// @throws comm_error if MPI_Init_thread fails; config_error if the MPI library gives a thread
  ///         level below `required` (MPI is finalised again first).
  MpiEnvironment(int& argc, char**& argv, int required = MPI_THREAD_FUNNELED) { init(&argc, &argv, required); }
  /// Initialise MPI without arguments.
  explicit MpiEnvironment(int required = MPI_THREAD_FUNNELED) { init(nullptr, nullptr, required); }
  /// Initialise MPI with the program's arguments, a thread level and a start-up deadline.
  /// @throws config_error for an init_timeout or finalize_timeout that is negative, NaN or infinite
  ///         (before MPI starts).
  MpiEnvironment(int& argc, char**& argv, const MpiStartOptions& options) {
    if (!std::isfinite(options.finalize_timeout) || options.finalize_timeout < 0.0)
      throw config_error("reprosgd::MpiEnvironment: finalize_timeout must be a finite number of seconds >= 0 (0: none), got " +
                         detail::seconds_text(options.finalize_timeout));
    finalize_timeout_ = options.finalize_timeout;
    init(&argc, &argv, options.required, options.init_timeout);
  }
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;
  MpiEnvironment(MpiEnvironment&&) = delete;
  MpiEnvironment& operator=(MpiEnvironment&&) = delete;

  /// Finalises MPI if this object initialised it and nobody finalised it since. Never throws.
  /// After ending_with_error(), MPI_Finalize is bounded by the finalize_timeout.
  ~MpiEnvironment() {
    if (!owner_ || detail::mpi_finalized()) return;
    std::optional<detail::Watchdog> deadline;
    if (error_exit_code_ != 0 && finalize_timeout_ > 0.0) {
      const bool fault_tolerant = mpi_fault_tolerance_enabled();
      try {
        deadline.emplace(finalize_timeout_,
                         "reprosgd::MpiEnvironment: the other processes did not finalise MPI within " +
                             detail::seconds_text(finalize_timeout_) +
                             " s of this process's error (they may be waiting for it); ending without MPI_Finalize" +
                             (fault_tolerant ? ", by SIGKILL, so that MPI reports this process as failed" : ""),
                         fault_tolerant ? detail::end_by_sigkill : error_exit_code_);
      } catch (...) {  // no thread or no memory left: finalise without the bound rather than throw
      }
      std::fflush(nullptr);  // what this process printed must not be lost if the deadline ends it
    }
    const int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) std::fprintf(stderr, "reprosgd::MpiEnvironment: MPI_Finalize failed (error code %d)\n", rc);
  }

  /**
   * Says that this process ends with an error (its exit code, not 0) that the other processes may
   * not share: one it met alone, before any agreement (an allocation that failed here only). They
   * may then be waiting for it in a collective while its MPI_Finalize waits for them, a hang until
   * an outside timeout. With a finalize_timeout the destructor bounds MPI_Finalize by it, and past
   * it ends the process without MPI_Finalize: where mpi_fault_tolerance_enabled(), with SIGKILL,
   * a death the others are told of and recover from like any other (ShrinkAndContinue goes on
   * without this process); otherwise with `exit_code`, and the launcher ends the job. After an
   * error that every process shares, they all reach MPI_Finalize and it ends in time.
   * A code of 0 clears the mark. Does nothing more without a finalize_timeout.
   */
  void ending_with_error(int exit_code) noexcept { error_exit_code_ = exit_code; }

  /// Whether this object called MPI_Init_thread (and so will call MPI_Finalize).
  [[nodiscard]] bool owner() const noexcept { return owner_; }
  /// The thread level MPI provides (MPI_THREAD_SINGLE … MPI_THREAD_MULTIPLE).
  [[nodiscard]] int thread_level() const noexcept { return provided_; }

 private:
  void init(int* argc, char*** argv, int required, double init_timeout = 0.0) {
    int initialized = 0;
    detail::mpi_check(MPI_Initialized(&initialized), "reprosgd::MpiEnvironment: MPI_Initialized");
    if (initialized) {
      detail::mpi_check(MPI_Query_thread(&provided_), "reprosgd::MpiEnvironment: MPI_Query_thread");
    } else {
      if (detail::mpi_finalized())
        throw comm_error("reprosgd::MpiEnvironment: MPI was already finalised; it cannot be initialised again");
      if (init_timeout > 0.0)
        guarded_init(argc, argv, required, init_timeout);
      else
        detail::mpi_check(MPI_Init_thread(argc, argv, required, &provided_), "reprosgd::MpiEnvironment: MPI_Init_thread");
      owner_ = true;
    }
    if (provided_ < required) {
      if (owner_) {
        MPI_Finalize();
        owner_ = false;
      }
      throw config_error("reprosgd::MpiEnvironment: MPI provides thread level " + std::to_string(provided_) +
                         ", below the required " + std::to_string(required));
    }
  }

  // MPI_Init_thread under the start-up guard: a deadline, errors returned, crashes caught; each
  // ends the process with one line and startup_failure_exit_code (MPI cannot be used or finalised
  // after a failed MPI_Init_thread, so there is nothing to unwind).
  void guarded_init(int* argc, char*** argv, int required, double init_timeout) {
    const std::string why = " (a process of the job probably died while it started); exiting with " +
                            std::to_string(startup_failure_exit_code) + " so that the job is relaunched";
    detail::Watchdog deadline(init_timeout,
                              "reprosgd::MpiEnvironment: MPI_Init_thread did not finish within " +
                                  detail::seconds_text(init_timeout) + " s" + why,
                              startup_failure_exit_code,
                              detail::started_by_a_launcher()
                                  ? "reprosgd::MpiEnvironment: the launcher ended while MPI_Init_thread ran" + why
                                  : std::string());
    detail::SignalExit crash("reprosgd::MpiEnvironment: MPI_Init_thread crashed", why, startup_failure_exit_code);
    // Open MPI reads its initial error handler (MPI 4's mpi_initial_errhandler) from the
    // environment; other MPIs ignore the variable.
    constexpr const char* initial_errhandler = "OMPI_MCA_mpi_initial_errhandler";
    const bool set_here = std::getenv(initial_errhandler) == nullptr;
    if (set_here) ::setenv(initial_errhandler, "mpi_errors_return", 1);
    const int rc = MPI_Init_thread(argc, argv, required, &provided_);
    if (rc != MPI_SUCCESS) {
      const std::string line = "reprosgd::MpiEnvironment: MPI_Init_thread failed: " + detail::mpi_error_string(rc) + why + "\n";
      std::fflush(stderr);
      std::fwrite(line.data(), 1, line.size(), stderr);
      std::fflush(stderr);
      std::_Exit(startup_failure_exit_code);
    }
    crash.release();
    deadline.disarm();
    if (set_here) {
      ::unsetenv(initial_errhandler);
      detail::mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL),
                        "reprosgd::MpiEnvironment: MPI_Comm_set_errhandler");
      detail::mpi_check(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL),
                        "reprosgd::MpiEnvironment: MPI_Comm_set_errhandler");
    }
  }

  bool owner_ = false;
  int provided_ = MPI_THREAD_SINGLE;
  double finalize_timeout_ = 0.0;
  int error_exit_code_ = 0;  // ending_with_error()'s; 0: none
};

REPROSGD_END_NAMESPACE
