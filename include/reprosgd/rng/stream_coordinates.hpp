// SPDX-License-Identifier: BSD-3-Clause
/// @file StreamCoordinates and Purpose: the logical address of a random word, the vocabulary of
/// the RngStream concept (concepts/rng_stream.hpp) and of every stream in rng/.
#pragma once

#include <reprosgd/version.hpp>

// Device-callable without the rest of Kokkos (tests/cuda builds this with a macros-only shim).
#ifndef KOKKOS_INLINE_FUNCTION
#include <Kokkos_Macros.hpp>
#endif

#include <cstdint>

REPROSGD_BEGIN_NAMESPACE

/// What a random number is for. Each purpose has its own part of the counter space, so, e.g., the
/// dropout mask of a sample can never reuse the words of a weight initialisation.
enum class Purpose : std::uint8_t {
  init = 0,     ///< parameter initialisation
  dropout = 1,  ///< dropout masks
  shuffle = 2,  ///< data order (the keyed permutation's round functions use their own domain)
  data = 3,     ///< data augmentation, synthetic data
  user = 4,     ///< free for user code
};

/**
 * The logical coordinates of a random word: what it is for and where it belongs in the training.
 * None of them is a thread, team or rank-local counter (that would tie the numbers to the
 * decomposition, which is what the determinism contract forbids).
 */
struct StreamCoordinates {
  Purpose purpose = Purpose::user;  ///< what the number is for
  std::uint32_t layer = 0;          ///< layer index in the model (or any small tag)
  std::uint64_t step = 0;           ///< global optimisation step
  std::uint64_t sample = 0;         ///< global sample index (independent of rank and micro-batch)
  std::uint64_t element = 0;        ///< element index inside (layer, sample), e.g. a neuron

  friend KOKKOS_INLINE_FUNCTION constexpr bool operator==(const StreamCoordinates& a,
                                                          const StreamCoordinates& b) noexcept {
    return a.purpose == b.purpose && a.layer == b.layer && a.step == b.step && a.sample == b.sample &&
           a.element == b.element;
  }
};

REPROSGD_END_NAMESPACE
