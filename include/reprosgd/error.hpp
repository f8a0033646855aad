// SPDX-License-Identifier: BSD-3-Clause
/// @file The exception hierarchy: every error derives from reprosgd::error and carries an errc.
#pragma once

#include <reprosgd/config.hpp>

#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// What went wrong, as a code a caller can switch on.
enum class errc {
  invalid_configuration = 1,  ///< bad options or hyperparameters, found before any work starts
  invalid_data,               ///< malformed, truncated or inconsistent input data
  io_error,                   ///< a file could not be opened, read or written
  numerical_error,            ///< NaN or Inf in data, gradients or loss; a diverging run
  checkpoint_invalid,         ///< a checkpoint that is damaged, foreign or does not match
  communication_error,        ///< an MPI call failed
  process_failed,             ///< a peer process died (ULFM)
  reproducibility_violation,  ///< the floating-point environment breaks the contract
};

namespace detail {
class errc_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "reprosgd"; }
  std::string message(int c) const override {
    switch (static_cast<errc>(c)) {
      case errc::invalid_configuration: return "invalid configuration";
      case errc::invalid_data: return "invalid data";
      case errc::io_error: return "I/O error";
      case errc::numerical_error: return "numerical error";
      case errc::checkpoint_invalid: return "invalid checkpoint";
      case errc::communication_error: return "communication error";
      case errc::process_failed: return "process failed";
      case errc::reproducibility_violation: return "reproducibility violation";
    }
    return "unknown reprosgd error";
  }
};
}  // namespace detail

/// The category of reprosgd::errc values.
inline const std::error_category& error_category() noexcept {
  static const detail::errc_category_impl cat;
  return cat;
}
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

/// Base of all reprosgd exceptions. Messages start with the function that detected the problem.
class error : public std::runtime_error {
 public:
  error(errc code, const std::string& what) : std::runtime_error(what), code_(code) {}
  [[nodiscard]] errc code() const noexcept { return code_; }

 private:
  errc code_;
};

/// Invalid options or hyperparameters; thrown by check()/constructors before any collective.
class config_error : public error {
 public:
  explicit config_error(const std::string& what) : error(errc::invalid_configuration, what) {}
};

/// Malformed or inconsistent input data (bad magic, truncated file, shape mismatch, NaN in data).
class data_error : public error {
 public:
  explicit data_error(const std::string& what) : error(errc::invalid_data, what) {}
};

/// A file that cannot be opened, read or written.
class io_error : public error {
 public:
  explicit io_error(const std::string& what) : error(errc::io_error, what) {}
};

/// NaN/Inf in gradients or loss, or a diverging run. Carries the step at which it was seen.
class numerics_error : public error {
 public:
  numerics_error(const std::string& what, long long step) : error(errc::numerical_error, what), step_(step) {}
  [[nodiscard]] long long step() const noexcept { return step_; }

 private:
  long long step_;
};

/// A checkpoint that cannot be used: damaged, from another configuration or a newer format.
class checkpoint_error : public error {
 public:
  explicit checkpoint_error(const std::string& what) : error(errc::checkpoint_invalid, what) {}
};

/// An MPI call that returned an error.
class comm_error : public error {
 public:
  explicit comm_error(const std::string& what) : error(errc::communication_error, what) {}
};

/**
 * One or more peer processes died (or gave up on the communicator). `agreed()` tells where it was
 * thrown: true from an agreement (MPIX_Comm_agree), which throws on every survivor together;
 * false from a collective, which may have failed on this rank and succeeded on others — such a
 * rank must join the agreement the others will reach (UlfmDataParallel::abandon_step) before
 * recovering, so that all survivors recover from the same point.
 */
class process_failure : public error {
 public:
  process_failure(const std::string& what, std::vector<int> failed_ranks, bool agreed = true)
      : error(errc::process_failed, what), failed_ranks_(std::move(failed_ranks)), agreed_(agreed) {}
  [[nodiscard]] const std::vector<int>& failed_ranks() const noexcept { return failed_ranks_; }
  /// Whether every survivor throws this exception from the same agreement.
  [[nodiscard]] bool agreed() const noexcept { return agreed_; }

 private:
  std::vector<int> failed_ranks_;
  bool agreed_;
};

/**
 * A peer died and the fault policy is RestartFromCheckpoint: the survivors stop without writing
 * anything (the newest checkpoint is the state to resume from) and the program should exit with
 * exit_code() (75, EX_TEMPFAIL), which scripts/relaunch.sh takes as "relaunch me on fewer ranks".
 */
class restart_required : public process_failure {
 public:
  restart_required(const std::string& what, std::vector<int> failed_ranks, int exit_code)
      : process_failure(what, std::move(failed_ranks)), exit_code_(exit_code) {}
  [[nodiscard]] int exit_code() const noexcept { return exit_code_; }

 private:
  int exit_code_;
};

/// The floating-point environment breaks the determinism contract (FTZ/DAZ, contraction, x87).
class reproducibility_error : public error {
 public:
  explicit reproducibility_error(const std::string& what) : error(errc::reproducibility_violation, what) {}
};

REPROSGD_END_NAMESPACE

template <>
struct std::is_error_code_enum<reprosgd::errc> : std::true_type {};
