// SPDX-License-Identifier: BSD-3-Clause
// AtomicFile: complete-or-absent replacement, temporaries removed on failure, errors name path and reason.
#include "checkpoint_test_support.hpp"

#include <reprosgd/checkpoint/atomic_file.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <sys/stat.h>  // mkfifo

namespace {
std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}
std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}
}  // namespace

TEST_SUITE("checkpoint.atomic_file") {
  TEST_CASE("writes the file and leaves no temporary") {
    ckpt_test::TempDir dir;
    reprosgd::write_file_atomically(dir / "a.bin", bytes_of("hello"));
    CHECK(ckpt_test::read_bytes(dir / "a.bin") == std::vector<unsigned char>{'h', 'e', 'l', 'l', 'o'});
    CHECK(names_in(dir.path()) == std::vector<std::string>{"a.bin"});
    reprosgd::write_file_atomically(dir / "a.bin", bytes_of("bye"));  // replaces
    CHECK(ckpt_test::read_bytes(dir / "a.bin") == std::vector<unsigned char>{'b', 'y', 'e'});
    CHECK(names_in(dir.path()) == std::vector<std::string>{"a.bin"});
  }

  TEST_CASE("until commit the target keeps its old contents; abandoning removes the temporary") {
    ckpt_test::TempDir dir;
    reprosgd::write_file_atomically(dir / "a.bin", bytes_of("old"));
    std::filesystem::path temp;
    {
      reprosgd::AtomicFile f(dir / "a.bin");
      temp = f.temporary();
      CHECK(temp.parent_path() == dir.path());
      CHECK(temp.filename().string().rfind(".a.bin.tmp.", 0) == 0);
      f.write("new contents", 12);
      f.write_at(0, "NEW", 3);
      CHECK(f.size() == 12);
      CHECK(std::filesystem::exists(temp));
      CHECK(ckpt_test::read_bytes(dir / "a.bin") == std::vector<unsigned char>{'o', 'l', 'd'});
    }  // no commit
    CHECK_FALSE(std::filesystem::exists(temp));
    CHECK(names_in(dir.path()) == std::vector<std::string>{"a.bin"});
    CHECK(ckpt_test::read_bytes(dir / "a.bin") == std::vector<unsigned char>{'o', 'l', 'd'});
    {
      reprosgd::AtomicFile f(dir / "a.bin");
      f.write("new contents", 12);
      f.write_at(0, "NEW", 3);
      f.commit();
    }
    const auto b = ckpt_test::read_bytes(dir / "a.bin");
    CHECK(std::string(b.begin(), b.end()) == "NEW contents");
  }

  TEST_CASE("two writers of one target get different temporaries") {
    ckpt_test::TempDir dir;
    reprosgd::AtomicFile a(dir / "x");
    reprosgd::AtomicFile b(dir / "x");
    CHECK(a.temporary() != b.temporary());
  }

  TEST_CASE("a target that is not a regular file (a FIFO, a directory, a link to a FIFO) is refused and left as it was") {
    ckpt_test::TempDir dir;
    const auto fifo = dir / "pipe";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::filesystem::create_directory(dir / "sub");
    std::filesystem::create_symlink(fifo, dir / "link");  // like /dev/stdout: a link to a pipe
    for (const auto& target : {fifo, dir / "sub", dir / "link"}) {
      CAPTURE(target.string());
      CHECK_THROWS_WITH_AS(reprosgd::write_file_atomically(target, bytes_of("x")),
                           ("reprosgd::AtomicFile: " + target.string() +
                            " exists and is not a regular file (a device, directory, FIFO or socket); nothing is "
                            "written over it")
                               .c_str(),
                           reprosgd::io_error);
    }
    CHECK(std::filesystem::is_fifo(fifo));
    CHECK(std::filesystem::is_directory(dir / "sub"));
    CHECK(std::filesystem::is_symlink(dir / "link"));
    CHECK(names_in(dir.path()).size() == 3);  // no temporary left
  }

  TEST_CASE("a missing directory is an io_error naming the path and the reason") {
    ckpt_test::TempDir dir;
    const auto target = dir / "no/such/dir/a.bin";
    try {
      reprosgd::write_file_atomically(target, bytes_of("x"));
      FAIL("no exception");
    } catch (const reprosgd::io_error& e) {
      const std::string msg = e.what();
      CHECK(msg.rfind("reprosgd::AtomicFile: " + target.string() + ": cannot create temporary file ", 0) == 0);
      CHECK(msg.ends_with(": No such file or directory"));
      CHECK(e.code() == reprosgd::errc::io_error);
    }
  }

  TEST_CASE("a write that fails (device full) throws io_error and leaves neither temporary nor target") {
    if (!std::filesystem::exists("/dev/full")) {
      MESSAGE("skipped: /dev/full is not available");
      return;
    }
    // /dev/full fails every write with ENOSPC: swap it in under the temporary's descriptor.
    ckpt_test::TempDir dir;
    std::filesystem::path temp;
    {
      reprosgd::AtomicFile f(dir / "full.bin");
      temp = f.temporary();
      int fd = -1;
      for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        if (std::filesystem::read_symlink(e.path(), ec) == temp) fd = std::stoi(e.path().filename().string());
      }
      REQUIRE(fd >= 0);
      const int full = ::open("/dev/full", O_WRONLY);
      REQUIRE(full >= 0);
      ::dup2(full, fd);
      ::close(full);
      try {
        f.write("data", 4);
        FAIL("no exception");
      } catch (const reprosgd::io_error& e) {
        CHECK(std::string(e.what()) == "reprosgd::AtomicFile: " + (dir / "full.bin").string() +
                                           ": write failed (temporary " + temp.string() + "): No space left on device");
      }
    }
    CHECK_FALSE(std::filesystem::exists(temp));
    CHECK_FALSE(std::filesystem::exists(dir / "full.bin"));
  }

  TEST_CASE("reuse: the file is renamed to the temporary at once, written over and cut to the new size") {
    ckpt_test::TempDir dir;
    const auto old = dir / "old.bin";
    const auto target = dir / "new.bin";
    ckpt_test::write_bytes(old, std::vector<unsigned char>(10000, 'o'));
    struct ::stat before {};
    REQUIRE(::stat(old.c_str(), &before) == 0);
    {
      reprosgd::AtomicFile f(target, old);
      CHECK(f.reused());
      CHECK_FALSE(std::filesystem::exists(old));  // gone under its old name before anything is written
      CHECK(f.temporary().filename().string().rfind(".new.bin.tmp.", 0) == 0);
      f.write("short", 5);
      f.write_at(0, "S", 1);
      f.commit();
    }
    CHECK(ckpt_test::read_bytes(target) == std::vector<unsigned char>{'S', 'h', 'o', 'r', 't'});
    struct ::stat after {};
    REQUIRE(::stat(target.c_str(), &after) == 0);
    CHECK(after.st_ino == before.st_ino);  // the same file, not a new one
    CHECK(names_in(dir.path()) == std::vector<std::string>{"new.bin"});
  }

  TEST_CASE("reuse: abandoned, the reused file is removed with the temporary and the target keeps its contents") {
    ckpt_test::TempDir dir;
    const auto old = dir / "old.bin";
    const auto target = dir / "new.bin";
    ckpt_test::write_bytes(old, std::vector<unsigned char>(100, 'o'));
    ckpt_test::write_bytes(target, {'k', 'e', 'p', 't'});
    {
      reprosgd::AtomicFile f(target, old);
      CHECK(f.reused());
      f.write("xx", 2);
    }
    CHECK(names_in(dir.path()) == std::vector<std::string>{"new.bin"});
    CHECK(ckpt_test::read_bytes(target) == std::vector<unsigned char>{'k', 'e', 'p', 't'});
  }

  TEST_CASE("reuse: a missing file, one in another directory, not a regular file or with another hard link gives a new temporary") {
    ckpt_test::TempDir dir;
    const auto target = dir / "new.bin";
    std::filesystem::create_directory(dir / "sub");
    const auto elsewhere = dir / "sub" / "old.bin";
    ckpt_test::write_bytes(elsewhere, {'o'});
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
    const auto linked = dir / "linked.bin";
    ckpt_test::write_bytes(linked, {'l', 'i', 'n', 'k'});
    std::filesystem::create_hard_link(linked, dir / "sub" / "kept.bin");  // a user's way to keep a checkpoint
    for (const auto& reuse : {dir / "missing.bin", elsewhere, dir / "fifo", linked}) {
      INFO(reuse.string());
      reprosgd::AtomicFile f(target, reuse);
      CHECK_FALSE(f.reused());
      f.write("new", 3);
      f.commit();
      CHECK(ckpt_test::read_bytes(target) == std::vector<unsigned char>{'n', 'e', 'w'});
    }
    CHECK(std::filesystem::exists(elsewhere));  // left alone
    CHECK(std::filesystem::is_fifo(dir / "fifo"));
    CHECK(ckpt_test::read_bytes(dir / "sub" / "kept.bin") == std::vector<unsigned char>{'l', 'i', 'n', 'k'});
    CHECK(std::filesystem::exists(linked));
  }
}
