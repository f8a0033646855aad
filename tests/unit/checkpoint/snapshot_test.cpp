// SPDX-License-Identifier: BSD-3-Clause
// Snapshot envelope: recorded fields, byte layout, determinism, and each refusal with its exact message.
#include "checkpoint_test_support.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

using ckpt_test::checkpoint_error_of;

namespace {
std::uint64_t le64(const std::vector<unsigned char>& b, std::size_t off) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[off + i];
  return v;
}
// The user format, as an older build that reads only version 1 of it would define it.
struct OldLab : user_formats::LabBinaryFormat {
  static constexpr std::uint32_t format_version = 1;
};
// A state with fewer members than ckpt_test::State.
struct Smaller {
  Kokkos::View<float**, Kokkos::HostSpace> weights;
  template <class A>
  void serialize(A& ar) {
    ar(CEREAL_NVP(weights));
  }
};
}  // namespace

TEST_SUITE("checkpoint.snapshot") {
  TEST_CASE_TEMPLATE_DEFINE("save then load gives the same state and every header field", F, snapshot_round_trip) {
    ckpt_test::TempDir dir;
    const auto path = dir / "s.rsgd";
    const ckpt_test::State state = ckpt_test::make_state(5);
    reprosgd::save_snapshot<F>(path, ckpt_test::test_info(1234), state);

    ckpt_test::State staging = ckpt_test::shaped_like(state);
    const reprosgd::SnapshotInfo info = reprosgd::load_snapshot<F>(path, ckpt_test::test_config(), staging);
    CHECK(ckpt_test::same_bits(state, staging));
    CHECK(info.snapshot_version == reprosgd::snapshot_format_version);
    CHECK(info.library_version == REPROSGD_VERSION_STRING);
    CHECK(info.format_name == F::name);
    CHECK(info.format_version == F::format_version);
    CHECK(info.config.entries() == ckpt_test::test_config().entries());
    CHECK(info.config_hash == ckpt_test::test_config().hash());
    CHECK(info.step == 1234);
    CHECK(info.epoch == 12);
    CHECK(info.position_in_epoch == 34 * 16);

    const auto bytes = ckpt_test::read_bytes(path);
    CHECK(info.header_bytes + info.payload_bytes == bytes.size());
    CHECK(std::string(bytes.begin(), bytes.begin() + 8) == "RSGDCKPT");
    CHECK(le64(bytes, 16) == info.payload_bytes);
    CHECK(le64(bytes, 40) == 1234);
    const XXH128_hash_t h = XXH3_128bits(bytes.data() + info.header_bytes, info.payload_bytes);
    CHECK(info.payload_checksum == reprosgd::Checksum128{h.low64, h.high64});

    const reprosgd::SnapshotInfo header_only = reprosgd::read_snapshot_info(path);
    CHECK(header_only.step == 1234);
    CHECK(header_only.payload_checksum == info.payload_checksum);

    // An unshaped staging object is allocated from the file.
    ckpt_test::State empty;
    reprosgd::load_snapshot<F>(path, ckpt_test::test_config(), empty);
    CHECK(ckpt_test::same_bits(state, empty));

    // Deterministic bytes: the same state saved again gives the same file.
    reprosgd::save_snapshot<F>(dir / "t.rsgd", ckpt_test::test_info(1234), state);
    CHECK(ckpt_test::read_bytes(dir / "t.rsgd") == bytes);
  }
  TEST_CASE_TEMPLATE_APPLY(snapshot_round_trip, ckpt_test::all_formats);

  TEST_CASE("configuration: key order does not matter, every difference is named with both values") {
    using reprosgd::ConfigDescription;
    const ConfigDescription a{{"x", "1"}, {"y", "2"}};
    const ConfigDescription b{{"y", "2"}, {"x", "1"}};
    CHECK(a == b);
    CHECK(a.hash() == b.hash());
    CHECK(a.hash() != ConfigDescription({{"x", "1"}, {"y", "3"}}).hash());
    CHECK(*a.first_difference({{"x", "1"}, {"y", "3"}}) == "y is 2 in checkpoint, 3 in program");
    CHECK(*a.first_difference({{"x", "1"}}) == "y is 2 in checkpoint, absent in program");
    CHECK(*a.first_difference({{"x", "1"}, {"y", "2"}, {"z", "0"}}) == "z is absent in checkpoint, 0 in program");
    CHECK_THROWS_WITH_AS(ConfigDescription({{"x", "1"}, {"x", "2"}}), "reprosgd::ConfigDescription::add: key \"x\" given twice",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS(ConfigDescription({{"", "1"}}), "reprosgd::ConfigDescription::add: empty key", reprosgd::config_error);

    ckpt_test::TempDir dir;
    const auto path = dir / "c.rsgd";
    const auto state = ckpt_test::make_state(1);
    reprosgd::save_snapshot<reprosgd::PortableBinaryFormat>(path, ckpt_test::test_info(7), state);
    auto other = ckpt_test::test_config().entries();
    other[1].second = "128";
    ckpt_test::State staging = ckpt_test::shaped_like(state);
    CHECK(checkpoint_error_of([&] {
            reprosgd::load_snapshot<reprosgd::PortableBinaryFormat>(path, ConfigDescription(other), staging);
          }) == "reprosgd::load_snapshot: " + path.string() +
                    ": configuration differs: layer.2.width is 256 in checkpoint, 128 in program");
    CHECK(staging.counter == 0);  // untouched
  }

  TEST_CASE("each refusal has its own exact message") {
    ckpt_test::TempDir dir;
    const auto state = ckpt_test::make_state(2);
    const auto good = dir / "good.rsgd";
    reprosgd::save_snapshot<reprosgd::PortableBinaryFormat>(good, ckpt_test::test_info(3), state);
    const auto good_bytes = ckpt_test::read_bytes(good);
    ckpt_test::State staging = ckpt_test::shaped_like(state);
    const auto load = [&](const std::filesystem::path& p) {
      return checkpoint_error_of(
          [&] { reprosgd::load_snapshot<reprosgd::PortableBinaryFormat>(p, ckpt_test::test_config(), staging); });
    };
    const std::string pre = "reprosgd::load_snapshot: ";

    CHECK(load(dir / "missing.rsgd") == pre + (dir / "missing.rsgd").string() + ": no such file");

    std::filesystem::create_directory(dir / "adir");
    CHECK(load(dir / "adir") == pre + (dir / "adir").string() + ": is a directory, not a checkpoint file");

    ckpt_test::write_bytes(dir / "empty.rsgd", {});
    CHECK(load(dir / "empty.rsgd") == pre + (dir / "empty.rsgd").string() + ": empty file (0 bytes)");

    ckpt_test::write_bytes(dir / "short.rsgd", {'R', 'S', 'G'});
    CHECK(load(dir / "short.rsgd") ==
          pre + (dir / "short.rsgd").string() + ": truncated: file is 3 bytes, a snapshot header needs at least 104");

    auto bytes = good_bytes;
    std::memcpy(bytes.data(), "XXXXXXXX", 8);
    ckpt_test::write_bytes(dir / "magic.rsgd", bytes);
    CHECK(load(dir / "magic.rsgd") == pre + (dir / "magic.rsgd").string() +
                                          ": not a ReproSGD checkpoint (magic bytes are 58 58 58 58 58 58 58 58, "
                                          "expected \"RSGDCKPT\")");

    bytes = good_bytes;
    bytes[8] = 3;  // envelope version 3
    ckpt_test::write_bytes(dir / "newer.rsgd", bytes);
    CHECK(load(dir / "newer.rsgd") ==
          pre + (dir / "newer.rsgd").string() + ": written by a newer ReproSGD (format 3, this build reads up to 1)");

    reprosgd::save_snapshot<reprosgd::JsonFormat>(dir / "json.rsgd", ckpt_test::test_info(3), state);
    CHECK(load(dir / "json.rsgd") ==
          pre + (dir / "json.rsgd").string() + ": written in format json, this program reads portable_binary");

    reprosgd::save_snapshot<user_formats::LabBinaryFormat>(dir / "lab.rsgd", ckpt_test::test_info(3), state);
    CHECK(checkpoint_error_of([&] {
            reprosgd::load_snapshot<OldLab>(dir / "lab.rsgd", ckpt_test::test_config(), staging);
          }) == pre + (dir / "lab.rsgd").string() +
                    ": written in format mylab.binary version 2, this build reads up to version 1");

    bytes = good_bytes;
    bytes.push_back(0);
    ckpt_test::write_bytes(dir / "trailing.rsgd", bytes);
    const auto info = reprosgd::read_snapshot_info(good);
    CHECK(load(dir / "trailing.rsgd") == pre + (dir / "trailing.rsgd").string() + ": damaged: 1 bytes follow the " +
                                             std::to_string(info.payload_bytes) + "-byte payload");

    bytes = good_bytes;
    bytes.pop_back();
    ckpt_test::write_bytes(dir / "cut.rsgd", bytes);
    CHECK(load(dir / "cut.rsgd") == pre + (dir / "cut.rsgd").string() + ": truncated: the header announces " +
                                        std::to_string(info.payload_bytes) + " payload bytes, the file holds " +
                                        std::to_string(info.payload_bytes - 1));

    bytes = good_bytes;
    bytes[20] ^= 1;  // payload size, inside the header
    ckpt_test::write_bytes(dir / "header.rsgd", bytes);
    CHECK(load(dir / "header.rsgd") == pre + (dir / "header.rsgd").string() + ": header checksum mismatch (the header is damaged)");

    bytes = good_bytes;
    bytes.back() ^= 0x80;
    ckpt_test::write_bytes(dir / "payload.rsgd", bytes);
    const std::string msg = load(dir / "payload.rsgd");
    CHECK(msg.rfind(pre + (dir / "payload.rsgd").string() + ": payload checksum mismatch (stored " +
                        info.payload_checksum.to_string() + ", computed ",
                    0) == 0);
    CHECK(msg.ends_with("): the payload is damaged"));

    CHECK(staging.counter == 0);  // nothing above wrote into the staging object
    CHECK(staging.note.empty());
  }

  TEST_CASE("a payload of another shape is reported as possibly partially loaded") {
    ckpt_test::TempDir dir;
    const auto path = dir / "shape.rsgd";
    reprosgd::save_snapshot<reprosgd::BinaryFormat>(path, ckpt_test::test_info(1), ckpt_test::make_state(1, 3, 5));
    ckpt_test::State staging = ckpt_test::shaped_like(ckpt_test::make_state(1, 3, 6));
    CHECK(checkpoint_error_of([&] {
            reprosgd::load_snapshot<reprosgd::BinaryFormat>(path, ckpt_test::test_config(), staging);
          }) == "reprosgd::load_snapshot: " + path.string() +
                    ": the payload does not fit the program's state (the staging object may be partially written): "
                    "reprosgd: loading View \"weights\": the checkpoint holds extents 3x5, the destination has 3x6");

    Smaller smaller;
    const std::string msg = checkpoint_error_of(
        [&] { reprosgd::load_snapshot<reprosgd::BinaryFormat>(path, ckpt_test::test_config(), smaller); });
    CHECK(msg.ends_with("payload bytes were left unread (the program's state is smaller)"));
  }

  TEST_CASE("a file the process may not read: permission denied") {
    ckpt_test::TempDir dir;
    const auto path = dir / "secret.rsgd";
    reprosgd::save_snapshot<reprosgd::PortableBinaryFormat>(path, ckpt_test::test_info(1), ckpt_test::make_state(1));
    std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all | std::filesystem::perms::others_exec |
                                                 std::filesystem::perms::group_exec);
    std::filesystem::permissions(path, std::filesystem::perms::none);
    const std::string expected =
        "reprosgd::load_snapshot: " + path.string() + ": permission denied (cannot open for reading)";
    if (::geteuid() != 0) {
      ckpt_test::State staging;
      CHECK(checkpoint_error_of([&] {
              reprosgd::load_snapshot<reprosgd::PortableBinaryFormat>(path, ckpt_test::test_config(), staging);
            }) == expected);
      return;
    }
    // root reads any file: check as an unprivileged user (nobody, 65534) in a child process.
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      std::string out;
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) {
        out = "<cannot drop privileges>";
      } else {
        ckpt_test::State staging;
        out = checkpoint_error_of(
            [&] { reprosgd::load_snapshot<reprosgd::PortableBinaryFormat>(path, ckpt_test::test_config(), staging); });
      }
      const ssize_t n = ::write(fds[1], out.data(), out.size());
      ::_exit(n == static_cast<ssize_t>(out.size()) ? 0 : 1);
    }
    ::close(fds[1]);
    std::string got;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) got.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (got == "<cannot drop privileges>") {
      MESSAGE("skipped: running as root and cannot switch to uid 65534 to test an unreadable file");
      return;
    }
    CHECK(WIFEXITED(status));
    CHECK(got == expected);
  }
}
