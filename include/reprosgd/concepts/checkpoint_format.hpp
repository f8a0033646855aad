// SPDX-License-Identifier: BSD-3-Clause
/// @file The CheckpointFormat concept: which cereal archive pair writes a checkpoint's payload.
#pragma once

#include <reprosgd/config.hpp>

#include <cereal/details/helpers.hpp>

#include <concepts>
#include <cstdint>
#include <istream>
#include <ostream>
#include <string_view>
#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

/**
 * A policy naming the cereal archives that serialise a snapshot's payload.
 *
 * Syntactic requirements (checked):
 * | member | meaning |
 * |---|---|
 * | `output_archive` | a cereal output archive constructible from `std::ostream&` |
 * | `input_archive`  | a cereal input archive constructible from `std::istream&` |
 * | `static constexpr std::string_view name` | recorded in every snapshot header; a snapshot is only read by the format of the same name |
 * | `static constexpr std::uint32_t format_version` | recorded too; a reader refuses a newer version |
 *
 * Semantic requirements (not checkable by the compiler):
 * - **Bit-exact:** every value loads back to the same bits it was saved with. For floats that
 *   includes NaN (sign and payload), ±inf, -0 and subnormals. Binary archives get this for free;
 *   a text archive must print floats exactly (see reprosgd::JsonOutputArchive).
 * - **Deterministic:** the bytes written depend only on the values serialised, never on the thread
 *   count, backend, rank count, addresses or time, so equal states give byte-equal checkpoints.
 * - **Stable name:** `name` identifies the byte encoding. Two formats whose files cannot be read by
 *   each other's archives must have different names (BinaryFormat puts the byte order into its name).
 * - **Compatible versions:** a reader of `format_version` N reads every file of versions 1..N of
 *   the same name. Bump it when the encoding changes in a way old readers cannot read.
 * - Not collective: a format is used by the one rank that writes or reads a file.
 *
 * Models: BinaryFormat, PortableBinaryFormat (the default), JsonFormat in
 * <reprosgd/checkpoint/formats.hpp>. A user format is any struct with these members, e.g.
 * @code
 * namespace mylab {
 * struct XmlFormat {
 *   using output_archive = cereal::XMLOutputArchive;
 *   using input_archive = cereal::XMLInputArchive;
 *   static constexpr std::string_view name = "mylab.xml";
 *   static constexpr std::uint32_t format_version = 1;
 * };
 * }
 * @endcode
 * (cereal's XML archive does not round-trip NaN payloads, so it meets the bit-exact requirement
 * only for states without NaN.)
 *
 * See docs/checkpoints.md.
 */
template <class F>
concept CheckpointFormat =
    requires {
      typename F::output_archive;
      typename F::input_archive;
      requires std::same_as<std::remove_cv_t<decltype(F::name)>, std::string_view>;
      requires std::same_as<std::remove_cv_t<decltype(F::format_version)>, std::uint32_t>;
      requires F::name.size() > 0;  // also forces `name` to be a constant expression
      requires F::format_version >= 1;
    } &&
    std::derived_from<typename F::output_archive, cereal::detail::OutputArchiveBase> &&
    std::derived_from<typename F::input_archive, cereal::detail::InputArchiveBase> &&
    std::constructible_from<typename F::output_archive, std::ostream&> &&
    std::constructible_from<typename F::input_archive, std::istream&>;

REPROSGD_END_NAMESPACE
