// SPDX-License-Identifier: BSD-3-Clause
/// @file The exit codes of ReproSGD's applications (train_mlp, predict), by error kind, so scripts
/// can tell a typo from a diverging run: 2 configuration, 3 data, 4 numerics, 5 I/O, 6 checkpoint
/// or model file, 7 a failed process, 1 anything else.
#pragma once

#include <reprosgd/error.hpp>

namespace reprosgd_apps {

inline int exit_code(const reprosgd::error& e) {
  switch (e.code()) {
    case reprosgd::errc::invalid_configuration: return 2;
    case reprosgd::errc::invalid_data: return 3;
    case reprosgd::errc::numerical_error: return 4;
    case reprosgd::errc::io_error: return 5;
    case reprosgd::errc::checkpoint_invalid: return 6;
    case reprosgd::errc::process_failed: return 7;
    default: return 1;
  }
}

}  // namespace reprosgd_apps
