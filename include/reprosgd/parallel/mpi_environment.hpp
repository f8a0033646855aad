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

#include <cstdio>
#include <cstdlib>
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
};

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
  /// @throws config_error for an init_timeout that is negative, NaN or infinite (before MPI starts).
  MpiEnvironment(int& argc, char**& argv, const MpiStartOptions& options) {
    init(&argc, &argv, options.required, options.init_timeout);
  }
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;
  MpiEnvironment(MpiEnvironment&&) = delete;
  MpiEnvironment& operator=(MpiEnvironment&&) = delete;

  /// Finalises MPI if this object initialised it and nobody finalised it since. Never throws.
  ~MpiEnvironment() {
    if (!owner_ || detail::mpi_finalized()) return;
    const int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) std::fprintf(stderr, "reprosgd::MpiEnvironment: MPI_Finalize failed (error code %d)\n", rc);
  }

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
};

REPROSGD_END_NAMESPACE
