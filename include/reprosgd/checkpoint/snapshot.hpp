// SPDX-License-Identifier: BSD-3-Clause
/// @file The snapshot envelope: a verified header, a cereal payload and its 128-bit checksum —
/// save_snapshot(), read_snapshot_info() and load_snapshot(). What a snapshot records is in
/// checkpoint/snapshot_info.hpp; the byte layout in checkpoint/detail/snapshot_layout.hpp.
#pragma once

#include <reprosgd/checkpoint/atomic_file.hpp>
#include <reprosgd/checkpoint/detail/snapshot_layout.hpp>
#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/checkpoint/snapshot_info.hpp>
#include <reprosgd/checkpoint/view_serialization.hpp>
#include <reprosgd/concepts/checkpoint_format.hpp>
#include <reprosgd/error.hpp>

#include <cereal/cereal.hpp>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/**
 * Writes a snapshot of `payload` to `path` atomically (see AtomicFile), in format F.
 *
 * The payload is streamed through F's output archive straight into the file while its checksum is
 * computed; the header (fixed size) is then patched with payload size and checksum, and the file
 * fsync'ed and renamed into place. The bytes depend only on `info` and the payload's values.
 *
 * @tparam F the CheckpointFormat of the payload.
 * @param info config, step, epoch and position_in_epoch are recorded; the other fields are ignored.
 * @param payload saved as `ar(cereal::make_nvp("payload", payload))`.
 * @param reuse an existing file of the same directory to write over instead of creating one (it is
 *        consumed whether or not the save succeeds; AtomicFile), or empty.
 * @throws reprosgd::io_error when the file cannot be written (the target is then unchanged);
 *         reprosgd::checkpoint_error when the payload does not serialise;
 *         reprosgd::config_error when the configuration does not fit a header.
 * Not collective: call it on the one rank that writes.
 *
 * **Example**: `save_snapshot<PortableBinaryFormat>("run/ckpt.rsgd", {.config = cfg, .step = 100}, state);`
 */
template <CheckpointFormat F, class Payload>
  requires SavableSnapshotPayload<Payload, F>
void save_snapshot(const std::filesystem::path& path, const SnapshotInfo& info, const Payload& payload,
                   const std::filesystem::path& reuse = {}) {
  std::string header = detail::encode_header(info, F::name, F::format_version, 0, {});
  if (header.size() > SnapshotLimits{}.max_header_bytes) {
    throw config_error("reprosgd::save_snapshot: " + path.string() + ": the configuration needs a " +
                       std::to_string(header.size()) + "-byte header, more than the " +
                       std::to_string(SnapshotLimits{}.max_header_bytes) + " readers accept");
  }
  AtomicFile file(path, reuse);
  file.write(header.data(), header.size());
  detail::HashingFileStreambuf sb(file);
  std::string serialise_error;
  try {
    std::ostream os(&sb);
    {
      typename F::output_archive ar(os);
      ar(cereal::make_nvp("payload", payload));
    }
    os.flush();
  } catch (const std::exception& e) {
    serialise_error = e.what();
  }
  if (sb.error()) std::rethrow_exception(sb.error());  // the I/O failure is the root cause
  if (!serialise_error.empty()) {
    throw checkpoint_error("reprosgd::save_snapshot: " + path.string() + ": cannot serialise the payload: " +
                           serialise_error);
  }
  const auto [bytes, checksum] = sb.finish();
  if (sb.error()) std::rethrow_exception(sb.error());
  detail::patch_header(header, bytes, checksum);
  file.write_at(0, header.data(), header.size());
  file.commit();
}

/**
 * Reads only the header of a snapshot, in any format, and verifies it (magic, version, header
 * checksum). The payload is neither checked nor read.
 * @throws reprosgd::checkpoint_error naming the path and the problem.
 */
inline SnapshotInfo read_snapshot_info(const std::filesystem::path& path, const SnapshotLimits& limits = {}) {
  detail::FileBytes file;
  file.open(path, "reprosgd::read_snapshot_info");
  return detail::parse_header(file.data(), file.size(), path, "reprosgd::read_snapshot_info", limits);
}

/**
 * Loads a snapshot into `staging` after verifying everything that can be verified first.
 *
 * Order of checks: the file exists, is a regular file, is readable and not empty; magic; envelope
 * version; header size and header checksum; format name and version; payload size against the file
 * and against `limits`; payload checksum over the payload bytes; configuration, key by key. Only
 * then is the payload deserialised, into `staging` and nothing else, so a caller can load into a
 * staging copy and commit it to the live model only when this returns.
 *
 * @tparam F the CheckpointFormat the file must have been written with.
 * @param expected the program's configuration; the first differing key is named with both values.
 * @param staging loaded as `ar(cereal::make_nvp("payload", staging))`. Untouched when a check
 *        fails; when deserialisation itself fails (a payload of another shape) the message says it
 *        may be partially written.
 * @returns every header field (SnapshotInfo).
 * @throws reprosgd::checkpoint_error, always "reprosgd::load_snapshot: <path>: <reason>".
 * Not collective.
 */
template <CheckpointFormat F, class Payload>
  requires LoadableSnapshotPayload<Payload, F>
SnapshotInfo load_snapshot(const std::filesystem::path& path, const ConfigDescription& expected, Payload& staging,
                           const SnapshotLimits& limits = {}) {
  constexpr const char* who = "reprosgd::load_snapshot";
  const auto fail = [&](const std::string& what) -> void {
    throw checkpoint_error(std::string(who) + ": " + path.string() + ": " + what);
  };
  detail::FileBytes file;
  file.open(path, who);
  SnapshotInfo info = detail::parse_header(file.data(), file.size(), path, who, limits);
  if (info.format_name != F::name) {
    fail("written in format " + info.format_name + ", this program reads " + std::string(F::name));
  }
  if (info.format_version > F::format_version) {
    fail("written in format " + info.format_name + " version " + std::to_string(info.format_version) +
         ", this build reads up to version " + std::to_string(F::format_version));
  }
  const std::uint64_t available = file.size() - info.header_bytes;
  if (available < info.payload_bytes) {
    fail("truncated: the header announces " + std::to_string(info.payload_bytes) + " payload bytes, the file holds " +
         std::to_string(available));
  }
  if (available > info.payload_bytes) {
    fail("damaged: " + std::to_string(available - info.payload_bytes) + " bytes follow the " +
         std::to_string(info.payload_bytes) + "-byte payload");
  }
  const unsigned char* payload = file.data() + info.header_bytes;
  const XXH128_hash_t h = XXH3_128bits(payload, static_cast<std::size_t>(info.payload_bytes));
  const Checksum128 computed{h.low64, h.high64};
  if (computed != info.payload_checksum) {
    fail("payload checksum mismatch (stored " + info.payload_checksum.to_string() + ", computed " +
         computed.to_string() + "): the payload is damaged");
  }
  if (auto diff = info.config.first_difference(expected)) fail("configuration differs: " + *diff);

  detail::MemoryStreambuf sb(reinterpret_cast<const char*>(payload), static_cast<std::size_t>(info.payload_bytes));
  std::string problem;
  try {
    std::istream is(&sb);
    ScopedViewLoadBudget budget(info.payload_bytes);
    typename F::input_archive ar(is);
    ar(cereal::make_nvp("payload", staging));
    if constexpr (!cereal::traits::is_text_archive<typename F::input_archive>::value) {
      if (sb.remaining() != 0) {
        problem = std::to_string(sb.remaining()) + " payload bytes were left unread (the program's state is smaller)";
      }
    }
  } catch (const std::exception& e) {
    problem = e.what();
  }
  if (!problem.empty()) {
    fail("the payload does not fit the program's state (the staging object may be partially written): " + problem);
  }
  return info;
}

REPROSGD_END_NAMESPACE
