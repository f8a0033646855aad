// SPDX-License-Identifier: BSD-3-Clause
/// @file fingerprint(): a 128-bit hash of the raw bytes of a model's parameters and optimizer state.
#pragma once

#include <reprosgd/config.hpp>

#include <Kokkos_Core.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>

REPROSGD_BEGIN_NAMESPACE

/// A 128-bit XXH3 hash; equal fingerprints mean (with overwhelming probability) equal bits.
struct Fingerprint {
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  /// 32 lowercase hex digits, high word first.
  [[nodiscard]] std::string hex() const {
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(high),
                  static_cast<unsigned long long>(low));
    return buf;
  }
  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};

/**
 * Streams the raw bytes of Views (from any memory space) and trivially copyable scalars into an
 * XXH3-128 state. Canonical order is the caller's: fingerprint() below fixes it for models.
 */
class FingerprintBuilder {
 public:
  FingerprintBuilder() { XXH3_128bits_reset(&state_); }
  FingerprintBuilder(const FingerprintBuilder&) = delete;
  FingerprintBuilder& operator=(const FingerprintBuilder&) = delete;

  /// Add the bytes of a contiguous View (copied to the host first when it lives elsewhere).
  template <class View>
    requires Kokkos::is_view<View>::value
  FingerprintBuilder& add(const View& v) {
    if (v.size() == 0) return *this;
    if (!v.span_is_contiguous()) throw std::invalid_argument("reprosgd::FingerprintBuilder: View is not contiguous");
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    XXH3_128bits_update(&state_, h.data(), h.span() * sizeof(typename View::value_type));
    return *this;
  }
  /// Add the bytes of a scalar (step counts, running products).
  template <class T>
    requires(std::is_arithmetic_v<T>)
  FingerprintBuilder& add(const T& x) {
    XXH3_128bits_update(&state_, &x, sizeof x);
    return *this;
  }
  [[nodiscard]] Fingerprint finish() const {
    const XXH128_hash_t h = XXH3_128bits_digest(&state_);
    return {h.high64, h.low64};
  }

 private:
  XXH3_state_t state_;
};

/// The fingerprint of a buffer's bytes alone.
template <class View>
  requires Kokkos::is_view<View>::value
[[nodiscard]] Fingerprint fingerprint(const View& v) {
  FingerprintBuilder b;
  b.add(v);
  return b.finish();
}

/**
 * The fingerprint of a model and its optimizer state: the parameter buffer's bytes, then every
 * element of the optimizer state in the order its visit() gives (buffers' bytes, scalars' bytes).
 * The contract's tests compare these across threads, backends, compilers, ranks and restarts.
 *
 * @param model  anything with parameters() returning a View (e.g. Sequential)
 * @param state  an optimizer state_type (or a TrainState's .optimizer)
 */
template <class Model, class State>
  requires requires(const Model& m) { m.parameters(); }
[[nodiscard]] Fingerprint fingerprint(const Model& model, const State& state) {
  FingerprintBuilder b;
  b.add(model.parameters());
  state.visit([&](const char*, const auto& x) { b.add(x); });
  return b.finish();
}

REPROSGD_END_NAMESPACE
