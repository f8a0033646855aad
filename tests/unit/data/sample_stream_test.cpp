// SPDX-License-Identifier: BSD-3-Clause
/// @file SampleStream: the replacement rules, canonical order, batch selection, errors, serialisation.
#include <doctest/doctest.h>

#include <reprosgd/data/sample_stream.hpp>

#include <cereal/archives/portable_binary.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Stream = reprosgd::SampleStream<Kokkos::HostSpace>;
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using Ids = Kokkos::View<std::uint64_t*, Kokkos::HostSpace>;

// The sample with logical id `id`: features and target are functions of the id alone.
float feature(std::uint64_t id, int j) { return std::sin(0.37f * static_cast<float>(id) + static_cast<float>(j)); }
float target(std::uint64_t id) { return std::cos(0.11f * static_cast<float>(id)); }

struct Rows {
  Ids ids;
  Matrix x, t;
};
// Rows for `ids`, in the order given (a rank's or thread's order, say).
Rows rows_of(const std::vector<std::uint64_t>& ids) {
  Rows r{Ids("ids", ids.size()), Matrix("x", ids.size(), 3), Matrix("t", ids.size(), 1)};
  for (std::size_t i = 0; i < ids.size(); ++i) {
    r.ids(i) = ids[i];
    for (int j = 0; j < 3; ++j) r.x(i, j) = feature(ids[i], j);
    r.t(i, 0) = target(ids[i]);
  }
  return r;
}
void offer(Stream& s, const std::vector<std::uint64_t>& ids) {
  const Rows r = rows_of(ids);
  s.append(Kokkos::DefaultHostExecutionSpace(), r.ids, r.x, r.t);
}
Stream make(std::size_t capacity, reprosgd::Replacement rule, std::uint64_t seed = 7) {
  return Stream({.capacity = capacity, .features = 3, .targets = 1, .replacement = rule, .seed = seed});
}
std::vector<std::uint64_t> range(std::uint64_t first, std::uint64_t n) {
  std::vector<std::uint64_t> v(n);
  for (std::uint64_t i = 0; i < n; ++i) v[i] = first + i;
  return v;
}
// Every held row is the sample its id names (rows and ids never drift apart).
void check_rows_match_ids(const Stream& s) {
  const auto d = s.contents();
  REQUIRE(d.size() == s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    for (int j = 0; j < 3; ++j) CHECK(d.features(i, j) == feature(s.ids()[i], j));
    CHECK(d.targets(i, 0) == target(s.ids()[i]));
  }
}

}  // namespace

TEST_SUITE("data") {
  TEST_CASE("fifo keeps the newest samples, slot n mod capacity, in id order within an append") {
    Stream s = make(5, reprosgd::Replacement::fifo);
    offer(s, {12, 10, 11});  // put in id order: 10, 11, 12 in slots 0, 1, 2
    CHECK(s.ids() == std::vector<std::uint64_t>{10, 11, 12});
    offer(s, {15, 13, 14, 16});  // 13 14 | 15 16 wrap to slots 0 1
    CHECK(s.size() == 5);
    CHECK(s.offered() == 7);
    CHECK(s.ids() == std::vector<std::uint64_t>{15, 16, 12, 13, 14});
    check_rows_match_ids(s);
    offer(s, range(100, 12));  // more than the capacity in one append: the last five, as one by one
    CHECK(s.ids() == std::vector<std::uint64_t>{108, 109, 110, 111, 107});  // samples 7..18 to slots 2, 3, 4, 0, ...: the newest five
    check_rows_match_ids(s);
  }

  TEST_CASE_TEMPLATE("the contents depend on the appends' sets, not on the order rows arrive in", Rule,
                     std::integral_constant<reprosgd::Replacement, reprosgd::Replacement::fifo>,
                     std::integral_constant<reprosgd::Replacement, reprosgd::Replacement::reservoir>) {
    Stream a = make(16, Rule::value), b = make(16, Rule::value), one_by_one = make(16, Rule::value);
    for (std::uint64_t step = 0; step < 10; ++step) {
      std::vector<std::uint64_t> ids = range(step * 1000, 9);
      offer(a, ids);
      for (std::uint64_t id : ids) offer(one_by_one, {id});
      std::reverse(ids.begin(), ids.end());  // another decomposition's order
      std::rotate(ids.begin(), ids.begin() + 4, ids.end());
      offer(b, ids);
    }
    CHECK(a.ids() == b.ids());
    CHECK(a.ids() == one_by_one.ids());  // one append of a set is the same as its samples one by one, in id order
    CHECK(a.offered() == 90);
    check_rows_match_ids(a);
    check_rows_match_ids(b);
    const std::set<std::uint64_t> distinct(a.ids().begin(), a.ids().end());
    CHECK(distinct.size() == a.size());
  }

  TEST_CASE("reservoir: a keyed uniform sample of everything offered") {
    Stream s = make(64, reprosgd::Replacement::reservoir, 3);
    offer(s, range(0, 40));
    CHECK(s.ids() == range(0, 40));  // below the capacity every sample is kept, in order
    offer(s, range(40, 6360));
    CHECK(s.size() == 64);
    CHECK(s.offered() == 6400);
    check_rows_match_ids(s);
    // Uniform over the 6,400 offered: about 16 of the 64 come from each quarter (not the newest 64 as fifo keeps).
    int per_quarter[4] = {0, 0, 0, 0};
    for (std::uint64_t id : s.ids()) ++per_quarter[id / 1600];
    for (int q = 0; q < 4; ++q) {
      CHECK(per_quarter[q] >= 6);
      CHECK(per_quarter[q] <= 28);
    }
    Stream same = make(64, reprosgd::Replacement::reservoir, 3), other = make(64, reprosgd::Replacement::reservoir, 4);
    offer(same, range(0, 6400));
    offer(other, range(0, 6400));
    CHECK(same.ids() == s.ids());
    CHECK(other.ids() != s.ids());
  }

  TEST_CASE("batch slots: distinct held slots, a function of the step and the contents") {
    Stream s = make(100, reprosgd::Replacement::fifo);
    offer(s, range(0, 70));
    const auto b3 = s.batch_slots(3, 32);
    CHECK(b3.size() == 32);
    CHECK(std::set<std::uint64_t>(b3.begin(), b3.end()).size() == 32);
    CHECK(*std::max_element(b3.begin(), b3.end()) < 70);
    CHECK(s.batch_slots(3, 32) == b3);
    CHECK(s.batch_slots(4, 32) != b3);
    // batches(): step j's rows are batch_slots(first + j)'s samples, in that order.
    const auto w = s.batches(Kokkos::DefaultHostExecutionSpace(), 3, 2, 32);
    CHECK(w.size() == 64);
    CHECK(w.stream_capacity() == 100);
    const auto b4 = s.batch_slots(4, 32);
    for (std::size_t i = 0; i < 32; ++i) {
      CHECK(w.targets(i, 0) == target(s.ids()[b3[i]]));
      CHECK(w.features(32 + i, 2) == feature(s.ids()[b4[i]], 2));
    }
  }

  TEST_CASE("bad appends and requests are refused with one clear line and change nothing") {
    Stream s = make(8, reprosgd::Replacement::fifo);
    offer(s, {1, 2, 3});
    const auto before = s.ids();
    Rows r = rows_of({4, 5});
    auto expect_refused = [&](auto&& call, const std::string& message) {
      CHECK_THROWS_WITH_AS(call(), message.c_str(), reprosgd::data_error);
      CHECK(s.ids() == before);
      CHECK(s.offered() == 3);
    };
    const auto host = Kokkos::DefaultHostExecutionSpace();
    Matrix wide("wide", 2, 4);
    expect_refused([&] { s.append(host, r.ids, wide, r.t); },
                   "reprosgd::SampleStream::append: features are 2 x 4, expected 2 x 3 (one row per id); nothing appended");
    Matrix short_t("t", 1, 1);
    expect_refused([&] { s.append(host, r.ids, r.x, short_t); },
                   "reprosgd::SampleStream::append: targets are 1 x 1, expected 2 x 1 (one row per id); nothing appended");
    Rows dup = rows_of({9, 4, 9});
    expect_refused([&] { s.append(host, dup.ids, dup.x, dup.t); },
                   "reprosgd::SampleStream::append: id 9 appears in rows 0 and 2 (ids are logical sample identities: "
                   "unique within an append); nothing appended");
    r.x(1, 2) = std::numeric_limits<float>::quiet_NaN();
    expect_refused([&] { s.append(host, r.ids, r.x, r.t); },
                   "reprosgd::SampleStream::append: NaN in row 1 (id 5), feature 2; nothing appended");
    r.x(1, 2) = 0.0f;
    r.t(0, 0) = -std::numeric_limits<float>::infinity();
    expect_refused([&] { s.append(host, r.ids, r.x, r.t); },
                   "reprosgd::SampleStream::append: -Inf in row 0 (id 4), target 0; nothing appended");
    CHECK_THROWS_WITH_AS((void)s.batch_slots(0, 4),
                         "reprosgd::SampleStream: a step needs 4 samples but the stream holds 3 (of capacity 8); append "
                         "more before training",
                         reprosgd::data_error);
    CHECK_THROWS_WITH_AS(Stream({.capacity = 0, .features = 3, .targets = 1}),
                         "reprosgd::SampleStream: capacity must be in [1, 2^40), got 0", reprosgd::config_error);
    CHECK_THROWS_WITH_AS(Stream({.capacity = 4, .features = 3, .targets = 1, .num_classes = 10}),
                         "reprosgd::SampleStream: exactly one of targets (regression, got 1) and num_classes "
                         "(classification, got 10) must be positive",
                         reprosgd::config_error);
    reprosgd::SampleStream<Kokkos::HostSpace> labelled({.capacity = 4, .features = 3, .num_classes = 2});
    Kokkos::View<std::int32_t*, Kokkos::HostSpace> y("y", 2);
    y(1) = 2;
    CHECK_THROWS_WITH_AS(labelled.append_labelled(host, r.ids, r.x, y),
                         "reprosgd::SampleStream::append_labelled: label 2 of row 1 (id 5) is outside [0, 2); nothing appended",
                         reprosgd::data_error);
    CHECK(labelled.size() == 0);
    y(1) = 1;
    labelled.append_labelled(host, r.ids, r.x, y);
    CHECK(labelled.contents().labels(1) == 1);
  }

  TEST_CASE("the stream's state round-trips through an archive, and a mismatched or forged one is refused") {
    Stream s = make(16, reprosgd::Replacement::reservoir);
    offer(s, range(0, 50));
    std::stringstream bytes;
    {
      cereal::PortableBinaryOutputArchive out(bytes);
      out(s);
    }
    Stream back = make(16, reprosgd::Replacement::reservoir);
    {
      cereal::PortableBinaryInputArchive in(bytes);
      in(back);
    }
    CHECK(back.ids() == s.ids());
    CHECK(back.offered() == 50);
    check_rows_match_ids(back);
    offer(s, range(50, 30));
    offer(back, range(50, 30));
    CHECK(back.ids() == s.ids());  // the draws go on from the same count

    std::stringstream again;
    {
      cereal::PortableBinaryOutputArchive out(again);
      out(s);
    }
    const std::string saved = again.str();
    Stream bigger = make(32, reprosgd::Replacement::reservoir);
    {
      std::stringstream in_bytes(saved);
      cereal::PortableBinaryInputArchive in(in_bytes);
      CHECK_THROWS_WITH_AS(in(bigger), "reprosgd::SampleStream: the checkpoint's stream has capacity 16, this one 32",
                           reprosgd::checkpoint_error);
    }
    CHECK(bigger.size() == 0);
    Stream fifo = make(16, reprosgd::Replacement::fifo);
    {
      std::stringstream in_bytes(saved);
      cereal::PortableBinaryInputArchive in(in_bytes);
      CHECK_THROWS_WITH_AS(in(fifo), "reprosgd::SampleStream: the checkpoint's stream has replacement reservoir, this one fifo",
                           reprosgd::checkpoint_error);
    }
  }
}
