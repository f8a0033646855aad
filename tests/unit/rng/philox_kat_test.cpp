// SPDX-License-Identifier: BSD-3-Clause
/// @file Random123's published Philox known-answer vectors, checked on the host and on every backend.
#include <doctest/doctest.h>

#include <reprosgd/rng/philox.hpp>

#include <Kokkos_Core.hpp>

#include <support/exec_spaces.hpp>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

// A copy of ../shared/data/philox_kat_vectors.txt (Random123's published vectors), kept in the tree;
// the environment's REPROSGD_TEST_DATA_DIR replaces the tree's data folder (scripts/device_check.sh
// carries the tests to a machine without the tree).
const std::string kat_path = std::string(std::getenv("REPROSGD_TEST_DATA_DIR") ? std::getenv("REPROSGD_TEST_DATA_DIR")
                                                                              : REPROSGD_TEST_DATA_DIR) +
                             "/kat/philox_kat_vectors.txt";
constexpr int kat_count_in_file = 24;  // 4 generators x 2 round counts x 3 vectors

enum class Generator : int { p2x32, p4x32, p2x64, p4x64 };

// One line of the file; 32-bit words are held in 64-bit slots so that one layout fits all four.
struct KatVector {
  Generator gen;
  unsigned rounds;
  int n;  // words of counter and output; the key has n / 2
  std::uint64_t ctr[4];
  std::uint64_t key[2];
  std::uint64_t expected[4];
};

struct KatFile {
  std::vector<KatVector> vectors;
  int non_comment_lines = 0;
};

KatFile read_kat_file() {
  std::ifstream in(kat_path);
  REQUIRE_MESSAGE(in.good(), "cannot open " << kat_path);
  KatFile f;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos || line[line.find_first_not_of(" \t")] == '#')
      continue;
    ++f.non_comment_lines;
    std::istringstream ls(line);
    std::string name;
    KatVector v{};
    ls >> name >> v.rounds;
    if (name == "philox2x32") v.gen = Generator::p2x32, v.n = 2;
    else if (name == "philox4x32") v.gen = Generator::p4x32, v.n = 4;
    else if (name == "philox2x64") v.gen = Generator::p2x64, v.n = 2;
    else if (name == "philox4x64") v.gen = Generator::p4x64, v.n = 4;
    else FAIL(kat_path << ":" << line_no << ": unknown generator '" << name << "'");
    ls >> std::hex;
    for (int i = 0; i < v.n; ++i) ls >> v.ctr[i];
    for (int i = 0; i < v.n / 2; ++i) ls >> v.key[i];
    for (int i = 0; i < v.n; ++i) ls >> v.expected[i];
    std::string rest;
    ls >> rest;
    REQUIRE_MESSAGE((!ls.fail() || ls.eof()), kat_path << ":" << line_no << ": malformed line");
    REQUIRE_MESSAGE(rest.empty(), kat_path << ":" << line_no << ": extra field '" << rest << "'");
    REQUIRE_MESSAGE((v.rounds == 7 || v.rounds == 10), kat_path << ":" << line_no << ": rounds " << v.rounds
                                                                 << " not instantiated by this test");
    f.vectors.push_back(v);
  }
  return f;
}

template <unsigned R>
KOKKOS_INLINE_FUNCTION void compute_rounds(const KatVector& v, std::uint64_t out[4]) {
  using U = std::uint32_t;
  switch (v.gen) {
    case Generator::p2x32: {
      const auto r = reprosgd::philox2x32<R>({{U(v.ctr[0]), U(v.ctr[1])}}, {{U(v.key[0])}});
      for (int i = 0; i < 2; ++i) out[i] = r[i];
    } break;
    case Generator::p4x32: {
      const auto r = reprosgd::philox4x32<R>({{U(v.ctr[0]), U(v.ctr[1]), U(v.ctr[2]), U(v.ctr[3])}},
                                             {{U(v.key[0]), U(v.key[1])}});
      for (int i = 0; i < 4; ++i) out[i] = r[i];
    } break;
    case Generator::p2x64: {
      const auto r = reprosgd::philox2x64<R>({{v.ctr[0], v.ctr[1]}}, {{v.key[0]}});
      for (int i = 0; i < 2; ++i) out[i] = r[i];
    } break;
    case Generator::p4x64: {
      const auto r = reprosgd::philox4x64<R>({{v.ctr[0], v.ctr[1], v.ctr[2], v.ctr[3]}}, {{v.key[0], v.key[1]}});
      for (int i = 0; i < 4; ++i) out[i] = r[i];
    } break;
  }
}

KOKKOS_INLINE_FUNCTION void compute(const KatVector& v, std::uint64_t out[4]) {
  for (int i = 0; i < 4; ++i) out[i] = 0;
  if (v.rounds == 7) compute_rounds<7>(v, out);
  else if (v.rounds == 10) compute_rounds<10>(v, out);
}

int count_matches(const KatVector& v, const std::uint64_t out[4]) {
  int ok = 1;
  for (int i = 0; i < v.n; ++i) {
    CHECK_MESSAGE(out[i] == v.expected[i], "generator " << int(v.gen) << " rounds " << v.rounds << " word " << i
                                                        << ": got " << std::hex << out[i] << " expected "
                                                        << v.expected[i]);
    if (out[i] != v.expected[i]) ok = 0;
  }
  return ok;
}

}  // namespace

TEST_SUITE("rng/philox") {

TEST_CASE("philox KAT: every vector of the file, on the host") {
  const KatFile f = read_kat_file();
  CHECK(f.non_comment_lines == kat_count_in_file);
  int checked = 0, matched = 0;
  for (const auto& v : f.vectors) {
    std::uint64_t out[4];
    compute(v, out);
    matched += count_matches(v, out);
    ++checked;
  }
  CHECK(checked == kat_count_in_file);
  CHECK(matched == kat_count_in_file);
}

TEST_CASE_TEMPLATE_DEFINE("philox KAT: every vector of the file, inside a parallel_for", Space, philox_kat_backend) {
  const KatFile f = read_kat_file();
  const int n = static_cast<int>(f.vectors.size());
  REQUIRE(n == kat_count_in_file);
  using MemSpace = typename Space::memory_space;
  Kokkos::View<KatVector*, MemSpace> in("kat_in", n);
  Kokkos::View<std::uint64_t* [4], MemSpace> out("kat_out", n);
  auto in_h = Kokkos::create_mirror_view(in);
  for (int i = 0; i < n; ++i) in_h(i) = f.vectors[i];
  Kokkos::deep_copy(in, in_h);
  Kokkos::parallel_for(
      "philox_kat", Kokkos::RangePolicy<Space>(Space(), 0, n), KOKKOS_LAMBDA(int i) {
        std::uint64_t r[4];
        compute(in(i), r);
        for (int w = 0; w < 4; ++w) out(i, w) = r[w];
      });
  Space().fence();
  auto out_h = Kokkos::create_mirror_view(out);
  Kokkos::deep_copy(out_h, out);
  int matched = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t r[4] = {out_h(i, 0), out_h(i, 1), out_h(i, 2), out_h(i, 3)};
    matched += count_matches(f.vectors[i], r);
  }
  CHECK(matched == kat_count_in_file);
}
TEST_CASE_TEMPLATE_APPLY(philox_kat_backend, reprosgd_test::spaces);

TEST_CASE("philox is usable in constant expressions (KAT at compile time)") {
  using namespace reprosgd;
  static_assert(philox4x32<10>({{0, 0, 0, 0}}, {{0, 0}}) ==
                Philox4x32Counter{{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  static_assert(philox2x64<10>({{~0ull, ~0ull}}, {{~0ull}}) ==
                Philox2x64Counter{{0x65b021d60cd8310full, 0x4d02f3222f86df20ull}});
  // A one-bit change of counter or key changes the output (a sanity check of the key schedule).
  CHECK(philox4x32<10>({{0, 0, 0, 1}}, {{0, 0}}) != philox4x32<10>({{0, 0, 0, 0}}, {{0, 0}}));
  CHECK(philox4x32<10>({{0, 0, 0, 0}}, {{0, 1}}) != philox4x32<10>({{0, 0, 0, 0}}, {{0, 0}}));
}

TEST_CASE("64-bit mulhi (native and portable) agrees with a reference schoolbook product") {
  auto ref = [](std::uint64_t a, std::uint64_t b) {
    const std::uint64_t al = a & 0xFFFFFFFFu, ah = a >> 32, bl = b & 0xFFFFFFFFu, bh = b >> 32;
    const std::uint64_t ll = al * bl, hl = ah * bl, lh = al * bh, hh = ah * bh;
    const std::uint64_t mid = (ll >> 32) + (hl & 0xFFFFFFFFu) + (lh & 0xFFFFFFFFu);
    return hh + (hl >> 32) + (lh >> 32) + (mid >> 32);
  };
  const std::uint64_t vals[] = {0, 1, 2, 0xFFFFFFFFull, 0x100000000ull, ~0ull, ~0ull - 1, 0xD2B74407B1CE6E93ull,
                                0x8000000000000000ull, 0x123456789ABCDEF0ull};
  for (auto a : vals)
    for (auto b : vals) {
      CHECK(reprosgd::detail::mulhi(a, b) == ref(a, b));
      CHECK(reprosgd::detail::mulhi_portable(a, b) == ref(a, b));
    }
}

}  // TEST_SUITE
