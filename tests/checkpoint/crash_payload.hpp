// SPDX-License-Identifier: BSD-3-Clause
/// @file The synthetic payload of the crash-safety test: a pure function of the step.
#pragma once

#include <reprosgd/checkpoint/checkpoint_manager.hpp>

#include <cereal/types/vector.hpp>

#include <bit>
#include <cstdint>
#include <vector>

namespace crash_test {

struct Payload {
  std::uint64_t step = 0;
  std::vector<float> values;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(CEREAL_NVP(step), CEREAL_NVP(values));
  }
};

/// About 1 MiB, its size varying with the step so that kills land at many different offsets.
inline Payload payload_for(std::uint64_t step) {
  Payload p;
  p.step = step;
  p.values.resize(250000 + (step % 13) * 1531);
  std::uint64_t x = step * 0x9E3779B97F4A7C15ULL;
  for (auto& v : p.values) {
    x += 0x9E3779B97F4A7C15ULL;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    v = std::bit_cast<float>(static_cast<std::uint32_t>(z ^ (z >> 31)));
  }
  return p;
}

inline reprosgd::ConfigDescription config() { return {{"test", "crash_safety"}, {"payload", "synthetic-v1"}}; }

using Manager = reprosgd::CheckpointManager<reprosgd::PortableBinaryFormat>;
inline constexpr std::size_t keep_last = 3;

}  // namespace crash_test
