// SPDX-License-Identifier: BSD-3-Clause
/// @file BuddyStore: the ring of shard copies, and recovery for every set of lost members, over
/// DataParallel's BuddyExchange operations (MPI).
#include <doctest/doctest.h>

#include <reprosgd/fault/buddy_store.hpp>
#include <reprosgd/parallel/data_parallel.hpp>

#include <mpi.h>

#include "world.hpp"

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace {
using reprosgd_test::world_rank;
using reprosgd_test::world_size;
/// A group over `comm` (BuddyExchange) on the host.
using Group = reprosgd::DataParallel<Kokkos::DefaultHostExecutionSpace>;
/// Member `id`'s shard: 37*id + 5 bytes of an id-dependent pattern (sizes differ between members).
std::vector<std::byte> shard_of(int id) {
  std::vector<std::byte> s(static_cast<std::size_t>(37 * id + 5));
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<std::byte>((i * 131 + static_cast<std::size_t>(id) * 17 + 1) & 0xFF);
  return s;
}
bool equal(std::span<const std::byte> a, const std::vector<std::byte>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}
}  // namespace

TEST_SUITE("fault/buddy_store") {
  TEST_CASE("refresh keeps my shard and my left neighbour's") {
    const int p = world_size(), r = world_rank();
    reprosgd::BuddyStore store;
    CHECK_FALSE(store.has_snapshot());
    const auto mine = shard_of(r);
    Group world(MPI_COMM_WORLD);
    store.refresh(world, mine, 40);
    CHECK(store.has_snapshot());
    CHECK(store.step() == 40);
    CHECK(store.id() == r);
    CHECK(store.buddy_id() == (r - 1 + p) % p);
    CHECK(equal(store.own_copy(), mine));
    CHECK(equal(store.buddy_copy(), shard_of((r - 1 + p) % p)));
    store.clear();  // e.g. at the start of a new fit(): no snapshot until the next refresh
    CHECK_FALSE(store.has_snapshot());
    CHECK(store.own_copy().empty());
    CHECK(store.buddy_copy().empty());
  }

  TEST_CASE("every set of lost members: all shards rebuilt unless a member and its holder are both lost") {
    const int p = world_size(), r = world_rank();
    reprosgd::BuddyStore store;
    Group world(MPI_COMM_WORLD);
    store.refresh(world, shard_of(r), 7);
    for (unsigned lost = 0; lost + 1 < (1u << p); ++lost) {  // every subset but "all lost"
      CAPTURE(lost);
      const bool alive = (lost & (1u << r)) == 0;
      MPI_Comm survivors = MPI_COMM_NULL;
      MPI_Comm_split(MPI_COMM_WORLD, alive ? 0 : MPI_UNDEFINED, r, &survivors);
      if (!alive) continue;  // a lost member takes no part (as if dead)
      Group group(survivors);  // a duplicate: free the original now
      MPI_Comm_free(&survivors);
      const reprosgd::BuddyRecovery rec = store.recover(group);
      std::vector<int> expected_missing;
      for (int id = 0; id < p; ++id)
        if ((lost & (1u << id)) && (lost & (1u << ((id + 1) % p)))) expected_missing.push_back(id);
      CHECK(rec.step == 7);
      CHECK(rec.missing == expected_missing);
      CHECK(rec.complete() == expected_missing.empty());
      REQUIRE(rec.shards.size() == static_cast<std::size_t>(p));
      for (int id = 0; id < p; ++id) {
        const bool gone = std::find(expected_missing.begin(), expected_missing.end(), id) != expected_missing.end();
        CHECK(rec.shards[static_cast<std::size_t>(id)] == (gone ? std::vector<std::byte>{} : shard_of(id)));
      }
    }
  }

  TEST_CASE("a newcomer without a snapshot (a recruited spare) receives every shard, lost ones included") {
    const int p = world_size(), r = world_rank();
    if (p < 3) return;
    // Members 0..p-2 snapshot; rank p-1 stands for a newcomer (a fresh store, as a recruited spare's).
    reprosgd::BuddyStore store;
    MPI_Comm first = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, r < p - 1 ? 0 : MPI_UNDEFINED, r, &first);
    if (r < p - 1) {
      Group old(first);
      MPI_Comm_free(&first);
      store.refresh(old, shard_of(r), 12);
    }
    // Member 0 is lost: the survivors 1..p-2 and the newcomer p-1 recover.
    MPI_Comm after = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, r > 0 ? 0 : MPI_UNDEFINED, r, &after);
    if (r == 0) return;
    Group group(after);
    MPI_Comm_free(&after);
    const reprosgd::BuddyRecovery rec = store.recover(group);
    CHECK(rec.step == 12);
    CHECK(rec.complete());
    REQUIRE(rec.shards.size() == static_cast<std::size_t>(p - 1));
    for (int id = 0; id < p - 1; ++id) CHECK(rec.shards[static_cast<std::size_t>(id)] == shard_of(id));
  }

  TEST_CASE("a shard staged in place: the same snapshot, the replaced one freed at commit, a pending one "
            "leaves the current intact") {
    const int p = world_size(), r = world_rank();
    reprosgd::BuddyStore store;
    Group world(MPI_COMM_WORLD);
    for (std::uint64_t step : {5u, 10u}) {
      CAPTURE(step);
      auto mine = shard_of(r + static_cast<int>(step));  // a new shard every refresh
      std::vector<std::byte>& staged = store.staging();
      staged.resize(mine.size());
      std::copy(mine.begin(), mine.end(), staged.begin());
      store.prepare_staged(world, step);
      store.commit();
      CHECK(store.step() == step);
      CHECK(equal(store.own_copy(), mine));
      CHECK(equal(store.buddy_copy(), shard_of((r - 1 + p) % p + static_cast<int>(step))));
      // Between refreshes the store holds the own and the buddy copy only.
      CHECK(store.staging().capacity() == 0);
    }
    // Prepared but not committed (an agreement failed): the snapshot of step 10 stays current.
    store.prepare(world, shard_of(r + 15), 15);
    CHECK(store.step() == 10);
    CHECK(equal(store.own_copy(), shard_of(r + 10)));
    CHECK(equal(store.buddy_copy(), shard_of((r - 1 + p) % p + 10)));
  }

  TEST_CASE("members that snapshot different steps all throw") {
    if (world_size() < 2) return;
    reprosgd::BuddyStore store;
    Group world(MPI_COMM_WORLD);
    const std::uint64_t step = world_rank() == 0 ? 3 : 4;
    CHECK_THROWS_WITH_AS(store.refresh(world, shard_of(world_rank()), step),
                         ("reprosgd::BuddyStore::refresh: the members snapshot different steps (this one " +
                          std::to_string(step) + ")")
                             .c_str(),
                         reprosgd::config_error);
  }

  TEST_CASE("recover without a snapshot is refused on every survivor") {
    reprosgd::BuddyStore store;
    Group world(MPI_COMM_WORLD);
    CHECK_THROWS_WITH_AS((void)store.recover(world),
                         "reprosgd::BuddyStore::recover: no survivor has a snapshot (call refresh() first)",
                         reprosgd::config_error);
  }
}
