// SPDX-License-Identifier: BSD-3-Clause
/// @file A stream written in a user's namespace models RngStream and plugs into generic library-style code.
#include <doctest/doctest.h>

#include <reprosgd/concepts/rng_stream.hpp>
#include <reprosgd/rng/distributions.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <support/exec_spaces.hpp>

#include <cstdint>
#include <memory>
#include <set>
#include <string>

// The skeleton of docs/concepts/rng_stream.md, as a user would write it: a counter-based hash
// (SplitMix64's finaliser over the coordinates) keyed by the seed. Not as strong as Philox, but a
// valid model: pure, stateless, trivially copyable, device-callable.
namespace user_rng {

class SplitMixStream {
  std::uint64_t seed_;

  KOKKOS_INLINE_FUNCTION static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 public:
  KOKKOS_INLINE_FUNCTION constexpr explicit SplitMixStream(std::uint64_t seed) noexcept : seed_(seed) {}
  static constexpr const char* name() noexcept { return "user-splitmix"; }
  KOKKOS_INLINE_FUNCTION constexpr std::uint64_t seed() const noexcept { return seed_; }

  KOKKOS_INLINE_FUNCTION constexpr reprosgd::Uint32x4 generate(const reprosgd::StreamCoordinates& c) const noexcept {
    std::uint64_t h = mix(seed_);
    h = mix(h ^ (std::uint64_t(static_cast<std::uint8_t>(c.purpose)) << 32 | c.layer));
    h = mix(h ^ c.step);
    h = mix(h ^ c.sample);
    h = mix(h ^ (c.element >> 2));  // the block of four elements
    const std::uint64_t h2 = mix(h);
    return {{std::uint32_t(h), std::uint32_t(h >> 32), std::uint32_t(h2), std::uint32_t(h2 >> 32)}};
  }
  KOKKOS_INLINE_FUNCTION constexpr std::uint32_t uint32(const reprosgd::StreamCoordinates& c) const noexcept {
    return generate(c)[static_cast<int>(c.element & 3u)];
  }
  KOKKOS_INLINE_FUNCTION constexpr SplitMixStream substream(std::uint64_t id) const noexcept {
    return SplitMixStream(mix(seed_ ^ mix(id)));
  }
};

// Not models: each breaks one requirement.
struct Stateful {  // holds a pointer to state: not trivially copyable
  std::shared_ptr<std::uint64_t> state;
  explicit Stateful(std::uint64_t) {}
  static const char* name() { return "stateful"; }
  std::uint64_t seed() const { return 0; }
  reprosgd::Uint32x4 generate(const reprosgd::StreamCoordinates&) const { return {}; }
  std::uint32_t uint32(const reprosgd::StreamCoordinates&) const { return 0; }
  Stateful substream(std::uint64_t) const { return Stateful(0); }
};
struct NoUint32 {  // lacks the element accessor
  std::uint64_t s;
  explicit NoUint32(std::uint64_t x) : s(x) {}
  static const char* name() { return "no-uint32"; }
  std::uint64_t seed() const { return s; }
  reprosgd::Uint32x4 generate(const reprosgd::StreamCoordinates&) const { return {}; }
  NoUint32 substream(std::uint64_t) const { return *this; }
};
struct WrongBlock {  // generate returns 64 bits, not 4 x 32
  std::uint64_t s;
  explicit WrongBlock(std::uint64_t x) : s(x) {}
  static const char* name() { return "wrong-block"; }
  std::uint64_t seed() const { return s; }
  std::uint64_t generate(const reprosgd::StreamCoordinates&) const { return 0; }
  std::uint32_t uint32(const reprosgd::StreamCoordinates&) const { return 0; }
  WrongBlock substream(std::uint64_t) const { return *this; }
};

}  // namespace user_rng

static_assert(reprosgd::RngStream<user_rng::SplitMixStream>);
static_assert(reprosgd::RngStream<reprosgd::PhiloxStream>);
static_assert(!reprosgd::RngStream<user_rng::Stateful>);
static_assert(!reprosgd::RngStream<user_rng::NoUint32>);
static_assert(!reprosgd::RngStream<user_rng::WrongBlock>);
static_assert(!reprosgd::RngStream<int>);

namespace {

// Library-style generic code: constrained by the concept, works with any model.
template <class Space, reprosgd::RngStream Rng>
Kokkos::View<float*, typename Space::memory_space> uniform_weights(const Rng& rng, std::uint32_t layer, int n) {
  Kokkos::View<float*, typename Space::memory_space> w("w", n);
  Kokkos::parallel_for(
      "uniform_weights", Kokkos::RangePolicy<Space>(Space(), 0, n), KOKKOS_LAMBDA(int i) {
        w(i) = reprosgd::uniform_float(rng.uint32({reprosgd::Purpose::init, layer, 0, 0, std::uint64_t(i)}));
      });
  Space().fence();
  return w;
}

}  // namespace

TEST_SUITE("rng/custom_stream") {

TEST_CASE_TEMPLATE_DEFINE("a user-namespace stream plugs into generic code on every backend", Space, custom_stream) {
  const user_rng::SplitMixStream rng(99);
  constexpr int n = 4096;
  auto w = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), uniform_weights<Space>(rng, 3, n));
  int mismatches = 0;
  std::set<float> distinct;
  for (int i = 0; i < n; ++i) {
    const float expect = reprosgd::uniform_float(rng.uint32({reprosgd::Purpose::init, 3, 0, 0, std::uint64_t(i)}));
    mismatches += w(i) != expect;
    distinct.insert(w(i));
    CHECK((w(i) >= 0.0f && w(i) < 1.0f));
  }
  CHECK(mismatches == 0);
  CHECK(distinct.size() > n - 10);  // 4096 draws from 2^24 values: a handful of repeats at most
  CHECK(std::string(user_rng::SplitMixStream::name()) == "user-splitmix");
  CHECK(rng.substream(1).seed() != rng.substream(2).seed());
  // The same generic code with the library's stream.
  auto wp = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), uniform_weights<Space>(reprosgd::PhiloxStream(99), 3, n));
  CHECK(wp(0) == reprosgd::uniform_float(reprosgd::PhiloxStream(99).uint32({reprosgd::Purpose::init, 3, 0, 0, 0})));
}
TEST_CASE_TEMPLATE_APPLY(custom_stream, reprosgd_test::spaces);

}  // TEST_SUITE
