// SPDX-License-Identifier: BSD-3-Clause
/// @file append_from_every_rank: every rank's share of a step's samples, gathered into the replicated
/// stream, gives the stream one process gets from all of them in one append (any rank count, any
/// split of the rows); a bad share on one rank throws on every rank and appends nothing anywhere.
#include <doctest/doctest.h>

#include <reprosgd/data/sample_stream.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/data/gather_samples.hpp>
#include <reprosgd/parallel/serial.hpp>

#include <Kokkos_Core.hpp>

#include "world.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {
using Host = Kokkos::DefaultHostExecutionSpace;
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using Ids = Kokkos::View<std::uint64_t*, Kokkos::HostSpace>;
using Labels = Kokkos::View<std::int32_t*, Kokkos::HostSpace>;
using Stream = reprosgd::SampleStream<Kokkos::HostSpace>;
using reprosgd_test::world_rank;
using reprosgd_test::world_size;

constexpr std::uint64_t cells = 37;  // not a multiple of any rank count tested

float feature(std::uint64_t id, int j) { return static_cast<float>((id * 7 + static_cast<std::uint64_t>(j) * 3) % 19) / 19.0f; }
float target(std::uint64_t id) { return static_cast<float>(id % 11) * 0.25f; }

// Rows [first, last) of time step t's cells, in reverse id order (the order must not matter).
struct Share {
  Ids ids;
  Matrix x, y;
  Labels labels;
  Share(std::uint64_t t, std::uint64_t first, std::uint64_t last)
      : ids("ids", last - first), x("x", last - first, 2), y("y", last - first, 1), labels("labels", last - first) {
    for (std::uint64_t i = 0; i < last - first; ++i) {
      const std::uint64_t id = t * cells + (last - 1 - i);
      ids(i) = id;
      x(i, 0) = feature(id, 0);
      x(i, 1) = feature(id, 1);
      y(i, 0) = target(id);
      labels(i) = static_cast<std::int32_t>(id % 3);
    }
  }
};

Stream::Options options(bool classification) {
  Stream::Options o{.capacity = 64, .features = 2, .replacement = reprosgd::Replacement::reservoir, .seed = 5};
  (classification ? o.num_classes : o.targets) = classification ? 3 : 1;
  return o;
}

// This rank's rows of the cells: an uneven split, rank r gets [C r / P, C (r + 1) / P).
std::pair<std::uint64_t, std::uint64_t> my_rows() {
  const auto r = static_cast<std::uint64_t>(world_rank()), p = static_cast<std::uint64_t>(world_size());
  return {cells * r / p, cells * (r + 1) / p};
}

void expect_same(const Stream& a, const Stream& b) {
  REQUIRE(a.ids() == b.ids());
  const auto da = a.contents(), db = b.contents();
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(da.features(i, 0) == db.features(i, 0));
    CHECK(da.features(i, 1) == db.features(i, 1));
    if (a.is_regression())
      CHECK(da.targets(i, 0) == db.targets(i, 0));
    else
      CHECK(da.labels(i) == db.labels(i));
  }
}
}  // namespace

TEST_SUITE("data/gather_samples") {
  TEST_CASE("every rank's share gathered: the stream one process fills with all the rows, on every rank") {
    for (const bool classification : {false, true}) {
      CAPTURE(classification);
      INFO("rank " << world_rank() << " of " << world_size());
      reprosgd::DataParallel<Host> par;
      Stream gathered(options(classification)), alone(options(classification));
      const auto [first, last] = my_rows();
      for (std::uint64_t t = 0; t < 4; ++t) {  // 4 x 37 samples into 64 slots: the reservoir replaces
        const Share mine(t, first, last), all(t, 0, cells);
        if (classification) {
          reprosgd::append_from_every_rank(par, gathered, Host(), mine.ids, mine.x, mine.labels);
          alone.append_labelled(Host(), all.ids, all.x, all.labels);
        } else {
          reprosgd::append_from_every_rank(par, gathered, Host(), mine.ids, mine.x, mine.y);
          alone.append(Host(), all.ids, all.x, all.y);
        }
      }
      CHECK(gathered.offered() == 4 * cells);
      expect_same(gathered, alone);
      // Serial: the rows go straight to append().
      Stream serial(options(classification));
      for (std::uint64_t t = 0; t < 4; ++t) {
        const Share all(t, 0, cells);
        if (classification)
          reprosgd::append_from_every_rank(reprosgd::Serial<Host>{}, serial, Host(), all.ids, all.x, all.labels);
        else
          reprosgd::append_from_every_rank(reprosgd::Serial<Host>{}, serial, Host(), all.ids, all.x, all.y);
      }
      expect_same(serial, alone);
    }
  }

  TEST_CASE("a share of the wrong width on the last rank: data_error on every rank, nothing appended anywhere") {
    reprosgd::DataParallel<Host> par;
    Stream stream(options(false));
    const auto [first, last] = my_rows();
    const Share mine(0, first, last);
    reprosgd::append_from_every_rank(par, stream, Host(), mine.ids, mine.x, mine.y);
    const std::vector<std::uint64_t> before = stream.ids();
    const bool bad = world_rank() == world_size() - 1;
    const Matrix x = bad ? Matrix("wide", last - first, 3) : mine.x;
    const std::string expected =
        "reprosgd::append_from_every_rank: a rank offered rows of the wrong shape (each id needs 2 features and 1 "
        "targets; rank " + std::to_string(world_rank()) + " offered " + std::to_string(last - first) + " ids, features " +
        std::to_string(last - first) + " x " + (bad ? "3" : "2") + ", targets " + std::to_string(last - first) +
        " x 1); nothing appended on any rank";
    const Share next(1, first, last);
    CHECK_THROWS_WITH_AS(reprosgd::append_from_every_rank(par, stream, Host(), next.ids, x, next.y), expected.c_str(),
                         reprosgd::data_error);
    CHECK(stream.ids() == before);
    CHECK(stream.offered() == cells);
  }

  TEST_CASE("class labels one short on rank 0: data_error on every rank, nothing appended anywhere") {
    reprosgd::DataParallel<Host> par;
    Stream stream(options(true));
    const auto [first, last] = my_rows();
    const Share mine(0, first, last);
    reprosgd::append_from_every_rank(par, stream, Host(), mine.ids, mine.x, mine.labels);
    const std::vector<std::uint64_t> before = stream.ids();
    const Share next(1, first, last);
    const std::size_t n = last - first;
    const bool bad = world_rank() == 0 && n > 0;
    const Labels labels = bad ? Labels(Kokkos::subview(next.labels, std::make_pair(std::size_t{0}, n - 1))) : next.labels;
    const std::string expected =
        "reprosgd::append_from_every_rank: a rank offered rows of the wrong shape (each id needs 2 features and a "
        "label; rank " + std::to_string(world_rank()) + " offered " + std::to_string(n) + " ids, features " +
        std::to_string(n) + " x 2, labels " + std::to_string(bad ? n - 1 : n) + "); nothing appended on any rank";
    CHECK_THROWS_WITH_AS(reprosgd::append_from_every_rank(par, stream, Host(), next.ids, next.x, labels), expected.c_str(),
                         reprosgd::data_error);
    CHECK(stream.ids() == before);
    CHECK(stream.offered() == cells);
  }

  TEST_CASE("a NaN on one rank: append()'s own error on every rank, nothing appended") {
    reprosgd::DataParallel<Host> par;
    Stream stream(options(false));
    const auto [first, last] = my_rows();
    Share mine(0, first, last);
    if (world_rank() == 0 && last > first) mine.y(0, 0) = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_AS(reprosgd::append_from_every_rank(par, stream, Host(), mine.ids, mine.x, mine.y), reprosgd::data_error);
    CHECK(stream.size() == 0);
    CHECK(stream.offered() == 0);
  }
}
