// SPDX-License-Identifier: BSD-3-Clause
/// @file The checkpoint formats: BinaryFormat, PortableBinaryFormat (default) and JsonFormat.
#pragma once

#include <reprosgd/checkpoint/json_archive.hpp>
#include <reprosgd/concepts/checkpoint_format.hpp>

#include <cereal/archives/binary.hpp>
#include <cereal/archives/portable_binary.hpp>

#include <bit>
#include <cstdint>
#include <string_view>

REPROSGD_BEGIN_NAMESPACE

/**
 * cereal's binary archives: the host's byte order, the smallest and fastest encoding.
 *
 * Files are readable only on machines of the same byte order; the order is part of the name
 * ("binary_le" / "binary_be"), so a file of the other order is refused with a clear message rather
 * than read as garbage. Floats are stored as their raw bits, so they round-trip exactly.
 */
struct BinaryFormat {
  using output_archive = cereal::BinaryOutputArchive;
  using input_archive = cereal::BinaryInputArchive;
  static constexpr std::string_view name = std::endian::native == std::endian::little ? "binary_le" : "binary_be";
  static constexpr std::uint32_t format_version = 1;
};
static_assert(CheckpointFormat<BinaryFormat>);

/**
 * cereal's portable binary archives: little-endian on every machine (the default format).
 *
 * On little-endian hosts it costs the same as BinaryFormat (a one-byte endianness tag at the start
 * of the payload, no byte swapping); on big-endian hosts values are swapped while they are copied.
 */
struct PortableBinaryFormat {
  using output_archive = cereal::PortableBinaryOutputArchive;
  using input_archive = cereal::PortableBinaryInputArchive;
  static constexpr std::string_view name = "portable_binary";
  static constexpr std::uint32_t format_version = 1;
};
static_assert(CheckpointFormat<PortableBinaryFormat>);

/**
 * Readable JSON (reprosgd::JsonOutputArchive): floats are strings in exact_float_text form
 * ("0.1", "-0", "inf", "nan:7fc00001"), so they round-trip bit for bit.
 *
 * About 3–4x larger and much slower than the binary formats: for inspection, diffs and tests.
 */
struct JsonFormat {
  using output_archive = JsonOutputArchive;
  using input_archive = JsonInputArchive;
  static constexpr std::string_view name = "json";
  static constexpr std::uint32_t format_version = 1;
};
static_assert(CheckpointFormat<JsonFormat>);

/// The format used when none is named.
using DefaultCheckpointFormat = PortableBinaryFormat;

REPROSGD_END_NAMESPACE
