// SPDX-License-Identifier: BSD-3-Clause
/// @file Agreement among ranks: the whole job's group (world), checks that throw on every rank
/// together, and the comparisons that prove every rank trains the same configuration.
///
/// A rank that threw alone would leave the others waiting in the next collective, so every check
/// that can fail on some ranks only goes through agreed(), and every value that must be equal on
/// every rank (a configuration hash, the step a resume starts from) through same_on_all_ranks().
/// Functions of a parallelism policy only; no training state.
#pragma once

#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>

#include <Kokkos_Core.hpp>
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// Every rank of the job: the policy itself, or a model-parallel policy's whole grid.
template <Parallelism Par>
auto& world_of(Par& par) {
  if constexpr (ShardedParallelism<Par>)
    return par.world();
  else
    return par;
}

/// This process's rank in world_of(par).
template <Parallelism Par>
int world_rank_of(Par& par) {
  if constexpr (ShardedParallelism<Par>)
    return par.world_rank();
  else
    return par.rank();
}

/// True when `value` is the same on every rank of the job (one integer max all-reduce of its
/// 16-bit pieces and their negations, so the negation is exact). @collective
template <Parallelism Par>
bool same_on_all_ranks(Par& par, std::uint64_t value) {
  auto& all = world_of(par);
  if (all.size() == 1) return true;
  Kokkos::View<std::int32_t*, Kokkos::HostSpace> pieces("reprosgd::same_on_all_ranks", 8);
  for (int i = 0; i < 4; ++i) {
    pieces(i) = static_cast<std::int32_t>((value >> (16 * i)) & 0xFFFFu);
    pieces(4 + i) = -pieces(i);
  }
  all.allreduce_max(pieces);
  bool same = true;
  for (int i = 0; i < 4; ++i) same = same && pieces(i) == -pieces(4 + i);
  return same;
}

/// Run a local check on every rank; if it failed anywhere, throw on every rank: the local error
/// where it failed, a config_error naming the cause elsewhere. @collective
template <Parallelism Par, class F>
void agreed(Par& par, const char* who, F&& check) {
  std::exception_ptr local;
  try {
    check();
  } catch (...) {
    local = std::current_exception();
  }
  if (par.agree(!local)) return;
  if (local) std::rethrow_exception(local);
  throw config_error(std::string(who) + ": another rank found invalid input (see its message)");
}

/// The smallest of every rank's `value` (below 2^bits) from `bits` agreements, each the AND of a
/// flag, so it holds under ULFM like agree(): from the top bit down, the ranks whose higher bits
/// equal the minimum's so far vote "my bit is 1" (the others vote true), and the minimum has a 1
/// there exactly when all of them do. For rare events (a callback's error), not per step. @collective
template <Parallelism Par>
unsigned agreed_min(Par& par, unsigned value, int bits) {
  unsigned min = 0;
  for (int b = bits - 1; b >= 0; --b) {
    const bool in_race = (value >> (b + 1)) == (min >> (b + 1));
    if (par.agree(!in_race || ((value >> b) & 1u) != 0)) min |= 1u << b;
  }
  return min;
}

/// Throw the reprosgd exception class of `code` (a numerics_error at `step`), so that a rank
/// reports an error of the kind another rank found, with its own message.
[[noreturn]] inline void throw_error_of_kind(errc code, const std::string& what, long long step) {
  switch (code) {
    case errc::invalid_configuration: throw config_error(what);
    case errc::invalid_data: throw data_error(what);
    case errc::io_error: throw io_error(what);
    case errc::numerical_error: throw numerics_error(what, step);
    case errc::checkpoint_invalid: throw checkpoint_error(what);
    case errc::communication_error: throw comm_error(what);
    case errc::reproducibility_violation: throw reproducibility_error(what);
    case errc::process_failed: break;  // never a callback's: the fault policy handles those
  }
  throw error(code, what);
}

/// All ranks must train the same configuration: compare a 64-bit hash of its description (and
/// the step count) over the job. @collective @throws config_error naming this rank's hash
template <Parallelism Par>
void check_same_configuration(Par& par, const std::vector<std::pair<std::string, std::string>>& config, long total) {
  if (world_of(par).size() == 1) return;
  std::string text;
  for (const auto& [k, v] : config) text += k + "=" + v + "\n";
  text += "total_steps=" + std::to_string(total) + "\n";
  const std::uint64_t h = XXH3_64bits(text.data(), text.size());
  if (same_on_all_ranks(par, h)) return;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  throw config_error("reprosgd::Trainer::fit: the ranks do not train the same configuration (layers, optimizer, "
                     "batch sizes, seed, schedule, data shape or step count differ); this rank's configuration "
                     "hash is " + std::string(buf) + " (rank " + std::to_string(par.rank()) + ")");
}

}  // namespace detail
REPROSGD_END_NAMESPACE
