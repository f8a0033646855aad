// SPDX-License-Identifier: BSD-3-Clause
/// @file PhiloxStream: the coordinate map is injective, pinned, and gives the same words on every backend.
#include <doctest/doctest.h>

#include <reprosgd/concepts/rng_stream.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <Kokkos_Core.hpp>

#include <support/exec_spaces.hpp>

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using reprosgd::PhiloxStream;
using reprosgd::Purpose;
using reprosgd::StreamCoordinates;
using reprosgd::Uint32x4;

namespace {

std::array<std::uint32_t, 4> words(const Uint32x4& w) { return {w[0], w[1], w[2], w[3]}; }

// Boundary values of every field: 0, small neighbours, powers of two at word edges, the maximum.
std::vector<StreamCoordinates> boundary_coordinates() {
  const Purpose purposes[] = {Purpose::init, Purpose::dropout, Purpose::shuffle, Purpose::data, Purpose::user};
  const std::uint32_t layers[] = {0, 1, 2, 3, 4, (1u << 29), (1u << 30) - 1};
  const std::uint64_t steps[] = {0, 1, 0x80000000ull, 0xFFFFFFFFull};
  const std::uint64_t samples[] = {0, 1, 0x80000000ull, 0xFFFFFFFFull};
  const std::uint64_t elements[] = {0, 3, 4, 7, 8, 0x3FFFFFFFull, 0x40000000ull, 0xFFFFFFFBull, 0xFFFFFFFFull};
  std::vector<StreamCoordinates> out;
  for (auto p : purposes)
    for (auto l : layers)
      for (auto s : steps)
        for (auto n : samples)
          for (auto e : elements) out.push_back({p, l, s, n, e});
  return out;
}

}  // namespace

TEST_SUITE("rng/philox_stream") {

TEST_CASE("pinned golden outputs: the coordinate map and the key cannot change silently") {
  const PhiloxStream rng(42);
  CHECK(PhiloxStream::name() == std::string("philox4x32-10"));
  CHECK(rng.seed() == 42u);
  using W = std::array<std::uint32_t, 4>;
  // Values produced by this implementation when the map was fixed (its Philox passes the
  // Random123 vectors); a change to the map, the key or the block rule breaks them.
  CHECK(words(rng.generate({Purpose::init, 0, 0, 0, 0})) == W{0x9ceaf053u, 0x77f5493bu, 0x12bf50adu, 0x5742b3d7u});
  CHECK(words(rng.generate({Purpose::init, 0, 0, 0, 5})) == W{0xfcdb2127u, 0x53ba6cfdu, 0x838f5a6eu, 0x744e06fbu});
  CHECK(words(rng.generate({Purpose::dropout, 3, 1000, 59999, 127})) ==
        W{0x6089f8d9u, 0xa3d20fc5u, 0x5d7fcf43u, 0xf477560bu});
  CHECK(words(rng.generate({Purpose::shuffle, 1, 2, 3, 4})) == W{0xf28c217au, 0x92e35abbu, 0xf674cb01u, 0xf45b007fu});
  CHECK(words(rng.generate({Purpose::data, 9, 1, 0, 0})) == W{0x9637010eu, 0x586ffdc4u, 0x85d06533u, 0xd37e501eu});
  CHECK(words(rng.generate({Purpose::user, (1u << 30) - 1, 0xFFFFFFFFull, 0xFFFFFFFFull, 0xFFFFFFFFull})) ==
        W{0x21644671u, 0xbca61a64u, 0xa4638bd3u, 0x41409555u});
  CHECK(rng.uint32({Purpose::init, 0, 0, 0, 5}) == 0x53ba6cfdu);
  CHECK(rng.uint32({Purpose::dropout, 3, 1000, 59999, 127}) == 0xf477560bu);
  CHECK(rng.substream(0).seed() == 0xec7a8ccc40757d01ull);
  CHECK(rng.substream(7).seed() == 0x722bd6f8996a1a18ull);
  // The generator is the Philox4x32-10 of the KAT file: the zero block of seed 0 is its first vector.
  CHECK(words(PhiloxStream(0).generate({Purpose::init, 0, 0, 0, 0})) ==
        W{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
}

TEST_CASE("the counter map: the documented layout, exactly") {
  // dropout (1), layer 3, step 1000, sample 59999, element 127 -> block 31, word 3.
  const StreamCoordinates c{Purpose::dropout, 3, 1000, 59999, 127};
  const auto ctr = PhiloxStream::counter(c);
  CHECK(ctr[0] == ((3u << 30) | 31u));  // layer bits 0..1 above the block
  CHECK(ctr[1] == (1u << 28));          // purpose nibble, layer bits 2..29 (here 0)
  CHECK(ctr[2] == 59999u);
  CHECK(ctr[3] == 1000u);
  const StreamCoordinates top{Purpose::user, (1u << 30) - 1, 0xFFFFFFFFull, 0xFFFFFFFFull, 0xFFFFFFFFull};
  const auto ctr_top = PhiloxStream::counter(top);
  CHECK(ctr_top[0] == 0xFFFFFFFFu);
  CHECK(ctr_top[1] == 0x4FFFFFFFu);
  CHECK(ctr_top[2] == 0xFFFFFFFFu);
  CHECK(ctr_top[3] == 0xFFFFFFFFu);
  // generate is Philox4x32-10 of that counter under the seed's halves.
  const PhiloxStream rng(0x0123456789ABCDEFull);
  CHECK(rng.key()[0] == 0x89ABCDEFu);
  CHECK(rng.key()[1] == 0x01234567u);
  CHECK(rng.generate(c) == reprosgd::philox4x32<10>(ctr, {{0x89ABCDEFu, 0x01234567u}}));
}

TEST_CASE("injectivity: distinct in-range blocks give distinct counters and distinct words") {
  const auto coords = boundary_coordinates();
  const PhiloxStream rng(7);
  std::set<std::tuple<int, std::uint32_t, std::uint64_t, std::uint64_t, std::uint64_t>> blocks;
  std::set<std::array<std::uint32_t, 4>> counters, outputs;
  std::set<std::uint32_t> single_words;
  for (const auto& c : coords) {
    REQUIRE(PhiloxStream::in_range(c));
    const auto ctr = PhiloxStream::counter(c);
    CHECK((ctr[1] >> 28) == static_cast<std::uint32_t>(c.purpose));  // never a reserved nibble
    blocks.insert({static_cast<int>(c.purpose), c.layer, c.step, c.sample, c.element / 4});
    counters.insert(words(ctr));
    outputs.insert(words(rng.generate(c)));
    single_words.insert(rng.uint32(c));
  }
  CHECK(blocks.size() < coords.size());  // the list does contain elements sharing a block
  CHECK(counters.size() == blocks.size());
  CHECK(outputs.size() == blocks.size());
  // 32-bit words of distinct elements: with this many, a collision would be a 1-in-300 accident;
  // the set is fixed, so this pins that there is none.
  CHECK(single_words.size() == coords.size());
}

TEST_CASE("each coordinate changes the words; elements of one block share it; uint32 picks word e % 4") {
  const PhiloxStream rng(2024);
  const StreamCoordinates base{Purpose::dropout, 5, 77, 1234, 40};
  const auto w = rng.generate(base);
  auto differs = [&](StreamCoordinates c) { return rng.generate(c) != w; };
  auto with = [&](auto mutate) {
    StreamCoordinates c = base;
    mutate(c);
    return c;
  };
  CHECK(differs(with([](auto& c) { c.purpose = Purpose::init; })));
  CHECK(differs(with([](auto& c) { c.layer = 6; })));
  CHECK(differs(with([](auto& c) { c.step = 78; })));
  CHECK(differs(with([](auto& c) { c.sample = 1235; })));
  CHECK(differs(with([](auto& c) { c.element = 44; })));
  CHECK(PhiloxStream(2025).generate(base) != w);
  for (std::uint64_t e = 40; e < 44; ++e) {
    const auto c = with([e](auto& cc) { cc.element = e; });
    CHECK(rng.generate(c) == w);
    CHECK(rng.uint32(c) == w[static_cast<int>(e % 4)]);
  }
}

TEST_CASE("in_range / check_coordinates: the limits, with exact messages") {
  const StreamCoordinates ok{Purpose::user, (1u << 30) - 1, 0xFFFFFFFFull, 0xFFFFFFFFull, 0xFFFFFFFFull};
  CHECK(PhiloxStream::in_range(ok));
  CHECK_NOTHROW(PhiloxStream::check_coordinates(ok));
  auto message = [](StreamCoordinates c) -> std::string {
    CHECK_FALSE(PhiloxStream::in_range(c));
    try {
      PhiloxStream::check_coordinates(c);
    } catch (const reprosgd::config_error& e) {
      CHECK(e.code() == reprosgd::errc::invalid_configuration);
      return e.what();
    }
    return "no exception";
  };
  auto bad = ok;
  bad.purpose = static_cast<Purpose>(14);
  CHECK(message(bad) == "reprosgd::PhiloxStream::check_coordinates: purpose = 14 is not a Purpose enumerator (<= 4)");
  bad = ok;
  bad.layer = 1u << 30;
  CHECK(message(bad) == "reprosgd::PhiloxStream::check_coordinates: layer = 1073741824 is not < 2^30");
  bad = ok;
  bad.step = 1ull << 32;
  CHECK(message(bad) == "reprosgd::PhiloxStream::check_coordinates: step = 4294967296 is not < 2^32");
  bad = ok;
  bad.sample = 1ull << 32;
  CHECK(message(bad) == "reprosgd::PhiloxStream::check_coordinates: sample = 4294967296 is not < 2^32");
  bad = ok;
  bad.element = 1ull << 32;
  CHECK(message(bad) == "reprosgd::PhiloxStream::check_coordinates: element = 4294967296 is not < 2^32");
}

TEST_CASE("substream: deterministic, distinct per id, distinct from the parent, a bijection on ids") {
  const PhiloxStream rng(42);
  CHECK(rng.substream(7).seed() == rng.substream(7).seed());
  std::set<std::uint64_t> seeds{rng.seed()};
  for (std::uint64_t id = 0; id < 1000; ++id) seeds.insert(rng.substream(id).seed());
  seeds.insert(rng.substream(~0ull).seed());
  CHECK(seeds.size() == 1002);
  CHECK(PhiloxStream(43).substream(7).seed() != rng.substream(7).seed());
  static_assert(reprosgd::RngStream<PhiloxStream>);
  static_assert(std::is_trivially_copyable_v<PhiloxStream>);
}

TEST_CASE_TEMPLATE_DEFINE("same coordinates, same words on every backend", Space, philox_stream_backend) {
  const auto coords = boundary_coordinates();
  const int n = static_cast<int>(coords.size());
  using MemSpace = typename Space::memory_space;
  Kokkos::View<StreamCoordinates*, MemSpace> in("coords", n);
  Kokkos::View<std::uint32_t* [6], MemSpace> out("words", n);
  auto in_h = Kokkos::create_mirror_view(in);
  for (int i = 0; i < n; ++i) in_h(i) = coords[i];
  Kokkos::deep_copy(in, in_h);
  const PhiloxStream rng(0xDEADBEEFCAFEF00Dull);
  Kokkos::parallel_for(
      "philox_stream", Kokkos::RangePolicy<Space>(Space(), 0, n), KOKKOS_LAMBDA(int i) {
        const auto w = rng.generate(in(i));
        for (int k = 0; k < 4; ++k) out(i, k) = w[k];
        out(i, 4) = rng.uint32(in(i));
        out(i, 5) = static_cast<std::uint32_t>(rng.substream(static_cast<std::uint64_t>(i)).seed() >> 17);
      });
  Space().fence();
  auto out_h = Kokkos::create_mirror_view(out);
  Kokkos::deep_copy(out_h, out);
  int mismatches = 0;
  for (int i = 0; i < n; ++i) {
    const auto w = rng.generate(coords[i]);
    for (int k = 0; k < 4; ++k) mismatches += out_h(i, k) != w[k];
    mismatches += out_h(i, 4) != rng.uint32(coords[i]);
    mismatches += out_h(i, 5) != static_cast<std::uint32_t>(rng.substream(std::uint64_t(i)).seed() >> 17);
  }
  CHECK(mismatches == 0);
}
TEST_CASE_TEMPLATE_APPLY(philox_stream_backend, reprosgd_test::spaces);

}  // TEST_SUITE
