// SPDX-License-Identifier: BSD-3-Clause
/// @file Learning-rate schedules: a pure function of the step, so their state is the step itself.
#pragma once

#include <reprosgd/error.hpp>
#include <reprosgd/math/elementary.hpp>
#include <reprosgd/optim/describe.hpp>

#include <cstdint>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/// The shape of a learning-rate schedule.
enum class ScheduleKind { constant, step, cosine };

/**
 * A learning-rate schedule: lr(step) = base_lr * factor(step).
 *
 * - constant: factor 1.
 * - step: factor = gamma^floor(step / step_size) (multiplied out in a fixed order, no pow).
 * - cosine with warm-up: factor = (step+1)/warmup during the warm-up, then
 *   min_factor + (1 - min_factor) * (1 + cos(pi * t)) / 2 with t = (step - warmup)/(total - warmup),
 *   using the library's own cospi so every platform gets the same bits.
 *
 * The schedule has no state besides the step: resuming at step s continues it exactly.
 */
struct Schedule {
  ScheduleKind kind = ScheduleKind::constant;
  long step_size = 1000;      ///< step: steps between decays
  double gamma = 0.1;         ///< step: decay factor
  long warmup_steps = 0;      ///< cosine: linear warm-up steps
  long total_steps = 0;       ///< cosine: length of the whole schedule (0: the Trainer sets it)
  double min_factor = 0.0;    ///< cosine: final factor

  void check() const {
    if (kind == ScheduleKind::step) {
      if (step_size <= 0) throw config_error("reprosgd::Schedule: step_size must be > 0, got " + std::to_string(step_size));
      if (!(gamma > 0.0 && gamma <= 1.0))
        throw config_error("reprosgd::Schedule: gamma must be in (0, 1], got " + detail::number_text(gamma));
    }
    if (kind == ScheduleKind::cosine) {
      if (warmup_steps < 0) throw config_error("reprosgd::Schedule: warmup_steps must be >= 0");
      if (total_steps <= warmup_steps)
        throw config_error("reprosgd::Schedule: total_steps (" + std::to_string(total_steps) +
                           ") must exceed warmup_steps (" + std::to_string(warmup_steps) + ")");
      if (!(min_factor >= 0.0 && min_factor <= 1.0))
        throw config_error("reprosgd::Schedule: min_factor must be in [0, 1]");
    }
  }

  /// The multiplier of the base learning rate at `step` (0-based). @deterministic
  [[nodiscard]] double factor(std::uint64_t step) const {
    switch (kind) {
      case ScheduleKind::constant: return 1.0;
      case ScheduleKind::step: {
        double f = 1.0;
        for (std::uint64_t i = 0, n = step / static_cast<std::uint64_t>(step_size); i < n && f > 0.0; ++i) f *= gamma;
        return f;
      }
      case ScheduleKind::cosine: {
        const auto s = static_cast<double>(step);
        if (static_cast<long>(step) < warmup_steps) return (s + 1.0) / static_cast<double>(warmup_steps);
        double t = (s - static_cast<double>(warmup_steps)) / static_cast<double>(total_steps - warmup_steps);
        t = t > 1.0 ? 1.0 : t;
        return min_factor + (1.0 - min_factor) * (0.5 * (1.0 + math::cospi(t)));
      }
    }
    return 1.0;
  }

  /// The learning rate at `step`, rounded once to float.
  [[nodiscard]] float lr(float base_lr, std::uint64_t step) const {
    return static_cast<float>(static_cast<double>(base_lr) * factor(step));
  }

  [[nodiscard]] std::string describe() const {
    switch (kind) {
      case ScheduleKind::constant: return "constant";
      case ScheduleKind::step:
        return "step(" + std::to_string(step_size) + "," + detail::exact_text(gamma) + ")";
      case ScheduleKind::cosine:
        return "cosine(" + std::to_string(warmup_steps) + "," + std::to_string(total_steps) + "," +
               detail::exact_text(min_factor) + ")";
    }
    return "?";
  }
};

REPROSGD_END_NAMESPACE
