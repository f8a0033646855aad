// SPDX-License-Identifier: BSD-3-Clause
/// @file What a snapshot records besides its payload: the configuration description, the step
/// and position, the checksum, the limits a reader enforces, and which payloads a format can
/// save or load. The envelope's byte layout is in checkpoint/detail/snapshot_layout.hpp, the
/// save and load functions in checkpoint/snapshot.hpp.
#pragma once

#include <reprosgd/concepts/checkpoint_format.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/version.hpp>

#include <cereal/cereal.hpp>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// The snapshot envelope version this build writes, and the newest it reads.
inline constexpr std::uint32_t snapshot_format_version = 1;
/// The 8 bytes every snapshot starts with.
inline constexpr std::string_view snapshot_magic = "RSGDCKPT";

/**
 * The configuration a checkpoint belongs to: an ordered list of (key, value) strings.
 *
 * The caller describes everything that must match for a checkpoint to be resumable: architecture,
 * policies, hyperparameters, micro-batch size, seed. Write floats with exact_float_text so that
 * equal text means equal bits. Keys are unique; the order is kept for display, but two
 * descriptions with the same entries in another order are the same configuration (and hash).
 *
 * **Example**: `ConfigDescription{{"layers", "784,256,10"}, {"optimizer", "adam"}, {"lr", "0.001"}}`.
 */
class ConfigDescription {
 public:
  using entry = std::pair<std::string, std::string>;

  ConfigDescription() = default;
  /// @throws reprosgd::config_error on an empty or repeated key.
  ConfigDescription(std::initializer_list<entry> entries) {
    for (const auto& e : entries) add(e.first, e.second);
  }
  /// @throws reprosgd::config_error on an empty or repeated key.
  explicit ConfigDescription(std::vector<entry> entries) {
    for (auto& e : entries) add(std::move(e.first), std::move(e.second));
  }

  /// Appends an entry. @throws reprosgd::config_error on an empty or repeated key.
  ConfigDescription& add(std::string key, std::string value) {
    if (key.empty()) throw config_error("reprosgd::ConfigDescription::add: empty key");
    if (find(key)) throw config_error("reprosgd::ConfigDescription::add: key \"" + key + "\" given twice");
    entries_.emplace_back(std::move(key), std::move(value));
    return *this;
  }

  /// The value of `key`, or nullptr.
  [[nodiscard]] const std::string* find(std::string_view key) const noexcept {
    for (const auto& e : entries_) {
      if (e.first == key) return &e.second;
    }
    return nullptr;
  }

  [[nodiscard]] const std::vector<entry>& entries() const noexcept { return entries_; }
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }

  /// XXH3-64 of the entries sorted by key (each as u32 length + bytes, little-endian).
  [[nodiscard]] std::uint64_t hash() const {
    std::vector<const entry*> sorted;
    for (const auto& e : entries_) sorted.push_back(&e);
    std::sort(sorted.begin(), sorted.end(), [](const entry* a, const entry* b) { return a->first < b->first; });
    std::string canonical;
    const auto put = [&](const std::string& s) {
      const auto n = static_cast<std::uint32_t>(s.size());
      for (int i = 0; i < 4; ++i) canonical.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
      canonical += s;
    };
    for (const entry* e : sorted) {
      put(e->first);
      put(e->second);
    }
    return XXH3_64bits(canonical.data(), canonical.size());
  }

  /**
   * The first difference between this (a checkpoint's) description and `program`'s, worded as
   * "<key> is <a> in checkpoint, <b> in program" ("absent" for a missing key); nullopt if equal.
   * Program keys are examined in the program's order, then keys only the checkpoint has.
   */
  [[nodiscard]] std::optional<std::string> first_difference(const ConfigDescription& program) const {
    for (const auto& [key, value] : program.entries_) {
      const std::string* mine = find(key);
      if (mine == nullptr) return key + " is absent in checkpoint, " + value + " in program";
      if (*mine != value) return key + " is " + *mine + " in checkpoint, " + value + " in program";
    }
    for (const auto& [key, value] : entries_) {
      if (program.find(key) == nullptr) return key + " is " + value + " in checkpoint, absent in program";
    }
    return std::nullopt;
  }

  friend bool operator==(const ConfigDescription& a, const ConfigDescription& b) {
    return a.size() == b.size() && !a.first_difference(b);
  }

 private:
  std::vector<entry> entries_;
};

/// A 128-bit checksum (XXH3-128 of the payload bytes).
struct Checksum128 {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  friend bool operator==(const Checksum128&, const Checksum128&) = default;
  /// 32 lower-case hex digits, high half first.
  [[nodiscard]] std::string to_string() const {
    char buf[33];
    std::snprintf(buf, sizeof(buf), "%016llx%016llx", static_cast<unsigned long long>(high),
                  static_cast<unsigned long long>(low));
    return buf;
  }
};

/**
 * What a snapshot records besides the payload.
 *
 * The caller fills `config`, `step`, `epoch` and `position_in_epoch` to save. load_snapshot fills
 * every field, including the ones written by the library (the "recorded" group, ignored by save).
 */
struct SnapshotInfo {
  ConfigDescription config;          ///< must match the program's to load
  std::uint64_t step = 0;            ///< optimizer steps completed
  std::uint64_t epoch = 0;           ///< epoch of the data cursor
  std::uint64_t position_in_epoch = 0;  ///< samples of that epoch already consumed

  // recorded by save_snapshot
  std::uint32_t snapshot_version = 0;  ///< envelope version (snapshot_format_version)
  std::string library_version;         ///< REPROSGD_VERSION_STRING of the writer
  std::string format_name;             ///< CheckpointFormat::name of the payload
  std::uint32_t format_version = 0;    ///< CheckpointFormat::format_version of the writer
  std::uint64_t config_hash = 0;       ///< config.hash()
  std::uint64_t header_bytes = 0;      ///< where the payload starts
  std::uint64_t payload_bytes = 0;     ///< payload size
  Checksum128 payload_checksum;        ///< XXH3-128 of the payload
};

/// Hard limits applied to a file before anything is allocated from its header.
struct SnapshotLimits {
  std::uint64_t max_header_bytes = std::uint64_t{1} << 20;   ///< 1 MiB of header (config strings)
  std::uint64_t max_payload_bytes = std::uint64_t{1} << 40;  ///< 1 TiB of payload
};

/// A payload that format F can save: `template <class Archive> void save(Archive&) const` or serialize.
template <class P, class F>
concept SavableSnapshotPayload =
    CheckpointFormat<F> && cereal::traits::is_output_serializable<P, typename F::output_archive>::value;
/// A payload (staging object) that format F can load into.
template <class P, class F>
concept LoadableSnapshotPayload =
    CheckpointFormat<F> && cereal::traits::is_input_serializable<P, typename F::input_archive>::value;

REPROSGD_END_NAMESPACE
