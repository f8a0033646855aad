// SPDX-License-Identifier: BSD-3-Clause
/// @file MpiEnvironment: initialise MPI for the scope of an object, finalising only what it initialised.
#pragma once

#include <reprosgd/config.hpp>

#if !REPROSGD_HAS_MPI
#error "reprosgd/parallel/mpi_environment.hpp needs MPI: build with REPROSGD_ENABLE_MPI=ON and link ReproSGD::reprosgd (it defines REPROSGD_HAS_MPI=1). Serial-only programs use reprosgd/parallel/serial.hpp."
#endif

#include <reprosgd/detail/mpi_check.hpp>
#include <reprosgd/error.hpp>

#include <mpi.h>

#include <cstdio>
#include <string>

REPROSGD_BEGIN_NAMESPACE

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
  void init(int* argc, char*** argv, int required) {
    int initialized = 0;
    detail::mpi_check(MPI_Initialized(&initialized), "reprosgd::MpiEnvironment: MPI_Initialized");
    if (initialized) {
      detail::mpi_check(MPI_Query_thread(&provided_), "reprosgd::MpiEnvironment: MPI_Query_thread");
    } else {
      if (detail::mpi_finalized())
        throw comm_error("reprosgd::MpiEnvironment: MPI was already finalised; it cannot be initialised again");
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

  bool owner_ = false;
  int provided_ = MPI_THREAD_SINGLE;
};

REPROSGD_END_NAMESPACE
