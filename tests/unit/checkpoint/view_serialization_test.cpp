// SPDX-License-Identifier: BSD-3-Clause
// Kokkos View serialization: shapes, layouts, memory spaces, every format; extents checks and budgets.
#include "checkpoint_test_support.hpp"

#include <support/exec_spaces.hpp>

#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <sstream>
#include <string>

namespace {

template <class F, class V>
std::string save_to_string(const V& v) {
  std::stringstream ss;
  {
    typename F::output_archive ar(ss);
    ar(cereal::make_nvp("v", v));
  }
  return ss.str();
}

template <class F, class V>
void load_from_string(const std::string& bytes, V& v) {
  std::stringstream ss(bytes);
  typename F::input_archive ar(ss);
  ar(cereal::make_nvp("v", v));
}

// Fills a host-accessible View of any rank <= 3 with distinct bit patterns, some special.
template <class V>
void fill(const V& host, std::uint32_t seed) {
  std::uint32_t k = seed * 2654435761u;
  auto value = [&]() {
    k = k * 1664525u + 1013904223u;
    using T = typename V::non_const_value_type;
    if constexpr (sizeof(T) == 4) {
      return std::bit_cast<T>(k % 7 == 0 ? 0x7fc00000u + (k & 0xff) : k);
    } else {
      return std::bit_cast<T>((static_cast<std::uint64_t>(k) << 32) | (k ^ 0x5555u));
    }
  };
  if constexpr (V::rank == 1) {
    for (std::size_t i = 0; i < host.extent(0); ++i) host(i) = value();
  } else if constexpr (V::rank == 2) {
    for (std::size_t i = 0; i < host.extent(0); ++i)
      for (std::size_t j = 0; j < host.extent(1); ++j) host(i, j) = value();
  } else {
    for (std::size_t i = 0; i < host.extent(0); ++i)
      for (std::size_t j = 0; j < host.extent(1); ++j)
        for (std::size_t l = 0; l < host.extent(2); ++l) host(i, j, l) = value();
  }
}

template <class A, class B>
bool same_bits(const A& a, const B& b) {
  if (static_cast<unsigned>(A::rank) != static_cast<unsigned>(B::rank)) return false;
  for (unsigned r = 0; r < A::rank; ++r)
    if (a.extent(r) != b.extent(r)) return false;
  using T = typename A::non_const_value_type;
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  bool ok = true;
  if constexpr (A::rank == 1) {
    for (std::size_t i = 0; i < a.extent(0); ++i) ok &= std::bit_cast<U>(a(i)) == std::bit_cast<U>(b(i));
  } else if constexpr (A::rank == 2) {
    for (std::size_t i = 0; i < a.extent(0); ++i)
      for (std::size_t j = 0; j < a.extent(1); ++j) ok &= std::bit_cast<U>(a(i, j)) == std::bit_cast<U>(b(i, j));
  } else {
    for (std::size_t i = 0; i < a.extent(0); ++i)
      for (std::size_t j = 0; j < a.extent(1); ++j)
        for (std::size_t l = 0; l < a.extent(2); ++l) ok &= std::bit_cast<U>(a(i, j, l)) == std::bit_cast<U>(b(i, j, l));
  }
  return ok;
}

template <class F, class V, class... Extents>
void check_round_trip(Extents... extents) {
  V v("v", extents...);
  auto host = Kokkos::create_mirror_view(v);
  fill(host, static_cast<std::uint32_t>(sizeof...(extents) * 31 + v.size()));
  Kokkos::deep_copy(v, host);
  const std::string bytes = save_to_string<F>(v);

  V allocated("dst", extents...);  // an allocated destination of the same shape
  load_from_string<F>(bytes, allocated);
  CHECK(same_bits(host, Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), allocated)));

  V fresh;  // an unallocated destination is allocated with the stored extents
  load_from_string<F>(bytes, fresh);
  CHECK(same_bits(host, Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), fresh)));
}

}  // namespace

TEST_SUITE("checkpoint.view_serialization") {
  TEST_CASE_TEMPLATE_DEFINE("Views of several shapes and layouts round-trip in every format", F, views_every_format) {
    using Kokkos::HostSpace;
    using Kokkos::LayoutLeft;
    using Kokkos::LayoutRight;
    check_round_trip<F, Kokkos::View<float*, HostSpace>>(1);
    check_round_trip<F, Kokkos::View<float*, HostSpace>>(1000);
    check_round_trip<F, Kokkos::View<double*, HostSpace>>(17);
    check_round_trip<F, Kokkos::View<float**, LayoutRight, HostSpace>>(3, 5);
    check_round_trip<F, Kokkos::View<float**, LayoutLeft, HostSpace>>(3, 5);
    check_round_trip<F, Kokkos::View<float**, LayoutRight, HostSpace>>(1, 64);
    check_round_trip<F, Kokkos::View<double***, LayoutLeft, HostSpace>>(2, 3, 4);
    check_round_trip<F, Kokkos::View<float***, LayoutRight, HostSpace>>(4, 1, 2);
    check_round_trip<F, Kokkos::View<float* [3], HostSpace>>(4);
  }
  TEST_CASE_TEMPLATE_APPLY(views_every_format, ckpt_test::all_formats);

  TEST_CASE_TEMPLATE_DEFINE("Views in every backend's memory space round-trip", Space, views_every_space) {
    using memory_space = typename Space::memory_space;
    check_round_trip<reprosgd::PortableBinaryFormat, Kokkos::View<float**, memory_space>>(6, 7);
    check_round_trip<reprosgd::JsonFormat, Kokkos::View<float**, Kokkos::LayoutLeft, memory_space>>(2, 9);
  }
  TEST_CASE_TEMPLATE_APPLY(views_every_space, reprosgd_test::spaces);

  TEST_CASE("the bytes do not depend on the layout: row-major order always") {
    Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> r("r", 3, 4);
    Kokkos::View<float**, Kokkos::LayoutLeft, Kokkos::HostSpace> l("l", 3, 4);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) r(i, j) = l(i, j) = static_cast<float>(10 * i + j);
    CHECK(save_to_string<reprosgd::PortableBinaryFormat>(r) == save_to_string<reprosgd::PortableBinaryFormat>(l));
    CHECK(save_to_string<reprosgd::JsonFormat>(r) == save_to_string<reprosgd::JsonFormat>(l));
    // A non-contiguous subview saves its logical elements.
    Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace> big("big", 3, 8);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 8; ++j) big(i, j) = j < 4 ? r(i, j) : -1.0f;
    auto sub = Kokkos::subview(big, Kokkos::ALL, std::make_pair(0, 4));
    CHECK(save_to_string<reprosgd::BinaryFormat>(sub) == save_to_string<reprosgd::BinaryFormat>(r));
  }

  TEST_CASE("binary encoding: rank, extents, count, raw little-endian elements") {
    Kokkos::View<float*, Kokkos::HostSpace> v("v", 2);
    v(0) = 1.0f;  // 0x3f800000
    v(1) = -0.0f;
    const std::string b = save_to_string<reprosgd::PortableBinaryFormat>(v);
    // 1 byte endianness tag, u64 rank, u64 extent, u64 count, 2 x 4 bytes.
    REQUIRE(b.size() == 1 + 8 + 8 + 8 + 8);
    CHECK(b.substr(1, 8) == std::string("\x01\0\0\0\0\0\0\0", 8));
    CHECK(b.substr(9, 8) == std::string("\x02\0\0\0\0\0\0\0", 8));
    CHECK(b.substr(17, 8) == std::string("\x02\0\0\0\0\0\0\0", 8));
    CHECK(b.substr(25, 8) == std::string("\0\0\x80\x3f\0\0\0\x80", 8));
  }

  TEST_CASE("an allocated destination of another shape is refused before anything is read into it") {
    Kokkos::View<float**, Kokkos::HostSpace> v("weights", 3, 4);
    const std::string bytes = save_to_string<reprosgd::BinaryFormat>(v);
    Kokkos::View<float**, Kokkos::HostSpace> dst("layer1.w", 3, 5);
    Kokkos::deep_copy(dst, 7.0f);
    CHECK_THROWS_WITH_AS(load_from_string<reprosgd::BinaryFormat>(bytes, dst),
                         "reprosgd: loading View \"layer1.w\": the checkpoint holds extents 3x4, the destination has 3x5",
                         reprosgd::checkpoint_error);
    CHECK(dst(0, 0) == 7.0f);
    Kokkos::View<float*, Kokkos::HostSpace> rank1("bias", 12);
    CHECK_THROWS_WITH_AS(load_from_string<reprosgd::BinaryFormat>(bytes, rank1),
                         "reprosgd: loading View \"bias\": the checkpoint holds a rank-2 View (3x4), the destination has rank 1",
                         reprosgd::checkpoint_error);
    Kokkos::View<float* [5], Kokkos::HostSpace> fixed;
    CHECK_THROWS_WITH_AS(load_from_string<reprosgd::BinaryFormat>(bytes, fixed),
                         "reprosgd: loading View \"\": the checkpoint holds extents 3x4, the destination's static extent 1 is 5",
                         reprosgd::checkpoint_error);
  }

  TEST_CASE("a forged extent is refused by the budget, before allocating") {
    Kokkos::View<float*, Kokkos::HostSpace> v("v", 4);
    std::string bytes = save_to_string<reprosgd::BinaryFormat>(v);
    // Forge extent and count to 2^40 elements (4 TiB).
    const std::string huge("\0\0\0\0\0\x01\0\0", 8);
    bytes.replace(8, 8, huge);
    bytes.replace(16, 8, huge);
    Kokkos::View<float*, Kokkos::HostSpace> fresh;
    {
      reprosgd::ScopedViewLoadBudget budget(bytes.size());
      CHECK_THROWS_WITH_AS(load_from_string<reprosgd::BinaryFormat>(bytes, fresh),
                           "reprosgd: loading View \"\": 1099511627776 elements announced, but at most 40 bytes of payload "
                           "remain (a damaged or forged size; nothing was allocated)",
                           reprosgd::checkpoint_error);
    }
    CHECK(fresh.data() == nullptr);
    // Without a scope the default budget (64 GiB) still stops it.
    CHECK_THROWS_AS(load_from_string<reprosgd::BinaryFormat>(bytes, fresh), reprosgd::checkpoint_error);
    CHECK(fresh.data() == nullptr);
  }

  TEST_CASE("a short binary stream fails instead of reading past its end") {
    Kokkos::View<double*, Kokkos::HostSpace> v("v", 100);
    const std::string bytes = save_to_string<reprosgd::BinaryFormat>(v);
    Kokkos::View<double*, Kokkos::HostSpace> dst("dst", 100);
    CHECK_THROWS_AS(load_from_string<reprosgd::BinaryFormat>(bytes.substr(0, bytes.size() - 1), dst), cereal::Exception);
  }
}
