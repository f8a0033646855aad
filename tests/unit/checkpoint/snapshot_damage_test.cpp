// SPDX-License-Identifier: BSD-3-Clause
// Damage: every truncation and every flipped byte of a small snapshot is refused, in every format,
// and the staging object stays untouched. Also built with ASan+UBSan (tests/checkpoint/).
#include "checkpoint_test_support.hpp"

#include <doctest/doctest.h>

#include <string>

TEST_SUITE("checkpoint.damage") {
  TEST_CASE_TEMPLATE_DEFINE("every truncation and every flipped byte is refused", F, damage_every_offset) {
    ckpt_test::TempDir dir;
    const auto good = dir / "good.rsgd";
    const ckpt_test::State state = ckpt_test::make_state(9, 2, 3);
    reprosgd::save_snapshot<F>(good, ckpt_test::test_info(77), state);
    const auto bytes = ckpt_test::read_bytes(good);
    REQUIRE(bytes.size() > 150);
    const auto bad = dir / "bad.rsgd";
    const ckpt_test::State sentinel = ckpt_test::make_state(1234, 2, 3);

    // Allocated once: thousands of iterations must not each launch Kokkos initialisation kernels
    // (OpenMP fork/join per View is slow on an oversubscribed machine).
    ckpt_test::State staging = ckpt_test::shaped_like(sentinel);
    const auto check_refused = [&](const std::string& what) {
      // Reset the staging object to the sentinel's values.
      std::memcpy(staging.weights.data(), sentinel.weights.data(), sentinel.weights.size() * sizeof(float));
      std::memcpy(staging.moments.data(), sentinel.moments.data(), sentinel.moments.size() * sizeof(double));
      staging.extra = sentinel.extra;
      staging.counter = sentinel.counter;
      staging.lr = sentinel.lr;
      staging.note = sentinel.note;
      std::string msg;
      try {
        reprosgd::load_snapshot<F>(bad, ckpt_test::test_config(), staging);
      } catch (const reprosgd::checkpoint_error& e) {
        msg = e.what();
      }
      INFO(what);
      CHECK(msg.rfind("reprosgd::load_snapshot: " + bad.string() + ": ", 0) == 0);
      CHECK(ckpt_test::same_bits(staging, sentinel));  // untouched
    };

    for (std::size_t len = 0; len < bytes.size(); ++len) {
      ckpt_test::write_bytes(bad, std::vector<unsigned char>(bytes.begin(), bytes.begin() + static_cast<long>(len)));
      check_refused("truncated to " + std::to_string(len) + " of " + std::to_string(bytes.size()) + " bytes");
    }
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      for (const unsigned char mask : {0x01, 0x80, 0xFF}) {
        auto flipped = bytes;
        flipped[i] ^= mask;
        ckpt_test::write_bytes(bad, flipped);
        check_refused("byte " + std::to_string(i) + " xor " + std::to_string(mask));
      }
    }
    // The original still loads (the loop did not damage it).
    reprosgd::load_snapshot<F>(good, ckpt_test::test_config(), staging);
    CHECK(ckpt_test::same_bits(staging, state));
  }
  TEST_CASE_TEMPLATE_APPLY(damage_every_offset, ckpt_test::all_formats);
}
