// SPDX-License-Identifier: BSD-3-Clause
/// @file Shared helpers of the checkpoint tests: temporary directories, a test payload, a user format.
#pragma once

#include <reprosgd/checkpoint/checkpoint_manager.hpp>
#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/checkpoint/snapshot.hpp>
#include <reprosgd/checkpoint/view_serialization.hpp>

#include <cereal/archives/binary.hpp>
#include <cereal/types/string.hpp>
#include <cereal/types/vector.hpp>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

// A format defined outside reprosgd: proves that a user's policy plugs in.
namespace user_formats {
struct LabBinaryFormat {
  using output_archive = cereal::BinaryOutputArchive;
  using input_archive = cereal::BinaryInputArchive;
  static constexpr std::string_view name = "mylab.binary";
  static constexpr std::uint32_t format_version = 2;
};
}  // namespace user_formats
static_assert(reprosgd::CheckpointFormat<user_formats::LabBinaryFormat>);

namespace ckpt_test {

using all_formats = std::tuple<reprosgd::BinaryFormat, reprosgd::PortableBinaryFormat, reprosgd::JsonFormat,
                               user_formats::LabBinaryFormat>;

/// A fresh directory under the system temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "reprosgd-ckpt-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    if (p == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::vector<unsigned char> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
inline void write_bytes(const std::filesystem::path& p, const std::vector<unsigned char>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// A training-like state: Views, a vector, scalars (special floats included), a string.
struct State {
  Kokkos::View<float**, Kokkos::HostSpace> weights;
  Kokkos::View<double*, Kokkos::HostSpace> moments;
  std::vector<float> extra;
  std::uint64_t counter = 0;
  float lr = 0;
  std::string note;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(CEREAL_NVP(weights), CEREAL_NVP(moments), CEREAL_NVP(extra), CEREAL_NVP(counter), CEREAL_NVP(lr), CEREAL_NVP(note));
  }
};

/// Deterministic contents derived from `seed`, including NaN payloads, ±inf, -0 and subnormals.
inline State make_state(std::uint64_t seed, int rows = 3, int cols = 5) {
  State s;
  s.weights = Kokkos::View<float**, Kokkos::HostSpace>("weights", rows, cols);
  s.moments = Kokkos::View<double*, Kokkos::HostSpace>("moments", 7);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  const auto next = [&x] {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545F4914F6CDD1DULL;
  };
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) s.weights(i, j) = std::bit_cast<float>(static_cast<std::uint32_t>(next()));
  for (int i = 0; i < 7; ++i) s.moments(i) = std::bit_cast<double>(next());
  s.extra = {std::bit_cast<float>(0x7fc00001u), std::bit_cast<float>(0xff800000u), -0.0f,
             std::bit_cast<float>(0x00000001u), static_cast<float>(seed)};
  s.counter = seed;
  s.lr = 0.001f;
  s.note = "seed " + std::to_string(seed);
  return s;
}

/// An empty state of the same shapes (a staging object).
inline State shaped_like(const State& s) {
  State t;
  t.weights = Kokkos::View<float**, Kokkos::HostSpace>("weights", s.weights.extent(0), s.weights.extent(1));
  t.moments = Kokkos::View<double*, Kokkos::HostSpace>("moments", s.moments.extent(0));
  return t;
}

/// Bitwise equality of two states.
inline bool same_bits(const State& a, const State& b) {
  if (a.weights.extent(0) != b.weights.extent(0) || a.weights.extent(1) != b.weights.extent(1)) return false;
  if (a.moments.extent(0) != b.moments.extent(0)) return false;
  if (std::memcmp(a.weights.data(), b.weights.data(), a.weights.size() * sizeof(float)) != 0) return false;
  if (std::memcmp(a.moments.data(), b.moments.data(), a.moments.size() * sizeof(double)) != 0) return false;
  if (a.extra.size() != b.extra.size()) return false;
  if (!a.extra.empty() && std::memcmp(a.extra.data(), b.extra.data(), a.extra.size() * sizeof(float)) != 0) return false;
  return a.counter == b.counter && std::bit_cast<std::uint32_t>(a.lr) == std::bit_cast<std::uint32_t>(b.lr) &&
         a.note == b.note;
}

inline reprosgd::ConfigDescription test_config() {
  return {{"layers", "784,256,10"}, {"layer.2.width", "256"}, {"optimizer", "adam"},
          {"lr", "0.001"},          {"micro_batch", "16"},     {"seed", "42"}};
}

inline reprosgd::SnapshotInfo test_info(std::uint64_t step) {
  reprosgd::SnapshotInfo info;
  info.config = test_config();
  info.step = step;
  info.epoch = step / 100;
  info.position_in_epoch = (step % 100) * 16;
  return info;
}

/// The message of the reprosgd::checkpoint_error that f throws ("" if none; "<other>" for other exceptions).
template <class F>
std::string checkpoint_error_of(F&& f) {
  try {
    f();
  } catch (const reprosgd::checkpoint_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<other exception> ") + e.what();
  }
  return "";
}

}  // namespace ckpt_test
