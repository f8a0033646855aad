// SPDX-License-Identifier: BSD-3-Clause
/// @file The snapshot envelope's bytes: the fixed little-endian header layout, its encoding and
/// verified parsing, and the stream buffers that hash a payload while it is written or read.
/// Internal to checkpoint/snapshot.hpp (docs/checkpoints.md documents the layout).
#pragma once

#include <reprosgd/checkpoint/snapshot_info.hpp>

#include <reprosgd/checkpoint/atomic_file.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/version.hpp>

#include <cereal/cereal.hpp>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <initializer_list>
#include <istream>
#include <memory>
#include <optional>
#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

REPROSGD_BEGIN_NAMESPACE

namespace detail {

// ---- fixed header layout (all integers little-endian; docs/checkpoints.md) ----
inline constexpr std::size_t off_version = 8;
inline constexpr std::size_t off_header_bytes = 12;
inline constexpr std::size_t off_payload_bytes = 16;
inline constexpr std::size_t off_payload_checksum = 24;
inline constexpr std::size_t off_step = 40;
inline constexpr std::size_t off_epoch = 48;
inline constexpr std::size_t off_position = 56;
inline constexpr std::size_t off_format_version = 64;
inline constexpr std::size_t off_variable = 68;
inline constexpr std::size_t min_header_bytes = off_variable + 4 + 4 + 4 + 8 + 16;

inline void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void set_u64(std::string& out, std::size_t off, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[off + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}
inline std::uint32_t get_u32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}
inline std::uint64_t get_u64(const unsigned char* p) {
  return static_cast<std::uint64_t>(get_u32(p)) | static_cast<std::uint64_t>(get_u32(p + 4)) << 32;
}
inline void put_string(std::string& out, std::string_view s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}

/// The header with its checksum; payload size and checksum as given (patched after streaming).
inline std::string encode_header(const SnapshotInfo& info, std::string_view format_name, std::uint32_t format_version,
                                 std::uint64_t payload_bytes, const Checksum128& payload_checksum) {
  std::string h;
  h.append(snapshot_magic);
  put_u32(h, snapshot_format_version);
  put_u32(h, 0);  // header size, set below
  put_u64(h, payload_bytes);
  put_u64(h, payload_checksum.low);
  put_u64(h, payload_checksum.high);
  put_u64(h, info.step);
  put_u64(h, info.epoch);
  put_u64(h, info.position_in_epoch);
  put_u32(h, format_version);
  put_string(h, REPROSGD_VERSION_STRING);
  put_string(h, format_name);
  put_u32(h, static_cast<std::uint32_t>(info.config.size()));
  for (const auto& [k, v] : info.config.entries()) {
    put_string(h, k);
    put_string(h, v);
  }
  put_u64(h, info.config.hash());
  const auto total = static_cast<std::uint32_t>(h.size() + 16);
  for (int i = 0; i < 4; ++i) h[off_header_bytes + i] = static_cast<char>((total >> (8 * i)) & 0xFF);
  const XXH128_hash_t hc = XXH3_128bits(h.data(), h.size());
  put_u64(h, hc.low64);
  put_u64(h, hc.high64);
  return h;
}

/// Patches payload size and checksum into an encoded header and recomputes the header checksum.
inline void patch_header(std::string& h, std::uint64_t payload_bytes, const Checksum128& c) {
  set_u64(h, off_payload_bytes, payload_bytes);
  set_u64(h, off_payload_checksum, c.low);
  set_u64(h, off_payload_checksum + 8, c.high);
  const XXH128_hash_t hc = XXH3_128bits(h.data(), h.size() - 16);
  set_u64(h, h.size() - 16, hc.low64);
  set_u64(h, h.size() - 8, hc.high64);
}

/// A streambuf that appends to an AtomicFile and hashes every byte (XXH3-128, streaming). It
/// never throws (archives write from noexcept destructors); a failure is kept in error().
class HashingFileStreambuf final : public std::streambuf {
 public:
  explicit HashingFileStreambuf(AtomicFile& file) : file_(file), state_(XXH3_createState(), &XXH3_freeState), buf_(1 << 20) {
    if (!state_) throw std::bad_alloc();
    XXH3_128bits_reset(state_.get());
    setp(buf_.data(), buf_.data() + buf_.size());
  }
  /// Writes out what is buffered; returns the payload size and checksum.
  std::pair<std::uint64_t, Checksum128> finish() {
    flush_buffer();
    const XXH128_hash_t h = XXH3_128bits_digest(state_.get());
    return {bytes_, Checksum128{h.low64, h.high64}};
  }
  [[nodiscard]] const std::exception_ptr& error() const noexcept { return error_; }

 protected:
  int_type overflow(int_type ch) override {
    if (!flush_buffer()) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    const auto room = static_cast<std::streamsize>(epptr() - pptr());
    if (n <= room) {
      std::memcpy(pptr(), s, static_cast<std::size_t>(n));
      pbump(static_cast<int>(n));
      return n;
    }
    if (!flush_buffer()) return 0;
    if (n < static_cast<std::streamsize>(buf_.size())) {
      std::memcpy(pptr(), s, static_cast<std::size_t>(n));
      pbump(static_cast<int>(n));
      return n;
    }
    // Large blocks (a View's data) go to the file straight from the caller's memory.
    return emit(s, static_cast<std::size_t>(n)) ? n : 0;
  }
  int sync() override { return flush_buffer() ? 0 : -1; }

 private:
  bool emit(const char* p, std::size_t n) {
    if (error_) return false;
    try {
      XXH3_128bits_update(state_.get(), p, n);
      file_.write(p, n);
      bytes_ += n;
      return true;
    } catch (...) {
      error_ = std::current_exception();
      return false;
    }
  }
  bool flush_buffer() {
    const auto n = static_cast<std::size_t>(pptr() - pbase());
    setp(buf_.data(), buf_.data() + buf_.size());
    return n == 0 ? !error_ : emit(buf_.data(), n);
  }

  AtomicFile& file_;
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state_;
  std::vector<char> buf_;
  std::uint64_t bytes_ = 0;
  std::exception_ptr error_;
};

/// A read-only streambuf over memory (the mapped payload): reads are plain memcpy.
class MemoryStreambuf final : public std::streambuf {
 public:
  MemoryStreambuf(const char* data, std::size_t size) {
    char* p = const_cast<char*>(data);  // the get area is only read
    setg(p, p, p + size);
  }
  [[nodiscard]] std::size_t remaining() const noexcept { return static_cast<std::size_t>(egptr() - gptr()); }
};

/// A whole file in memory: mapped read-only (no copy) or, if mapping fails, read.
class FileBytes {
 public:
  FileBytes() = default;
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  ~FileBytes() {
    if (map_ != nullptr) ::munmap(map_, size_);
  }
  [[nodiscard]] const unsigned char* data() const noexcept {
    return map_ != nullptr ? static_cast<const unsigned char*>(map_) : copy_.data();
  }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  /// Opens `path`, checks that it is a readable, non-empty regular file, and maps it.
  /// Errors name the path; each kind of failure has its own wording.
  void open(const std::filesystem::path& path, const char* who) {
    const auto fail = [&](const std::string& what) -> void {
      throw checkpoint_error(std::string(who) + ": " + path.string() + ": " + what);
    };
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == ENOENT) fail("no such file");
      if (err == EACCES || err == EPERM) fail("permission denied (cannot open for reading)");
      if (err == EISDIR) fail("is a directory, not a checkpoint file");
      fail("cannot open: " + errno_text(err));
    }
    struct FdCloser {
      int fd;
      ~FdCloser() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      fail("cannot stat: " + errno_text(err));
    }
    if (S_ISDIR(st.st_mode)) fail("is a directory, not a checkpoint file");
    if (!S_ISREG(st.st_mode)) fail("not a regular file");
    if (st.st_size == 0) fail("empty file (0 bytes)");
    size_ = static_cast<std::size_t>(st.st_size);
    // MAP_POPULATE maps every page up front: hashing then runs without page faults.
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (m != MAP_FAILED) {
      map_ = m;
      return;
    }
    copy_.resize(size_);
    std::size_t done = 0;
    while (done < size_) {
      const ::ssize_t n = ::read(fd, copy_.data() + done, size_ - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        fail("read failed: " + errno_text(err));
      }
      if (n == 0) fail("file shrank while being read");
      done += static_cast<std::size_t>(n);
    }
  }

 private:
  void* map_ = nullptr;
  std::size_t size_ = 0;
  std::vector<unsigned char> copy_;
};

/// Parses and verifies the header (magic, version, size bounds, header checksum); does not look at
/// the payload. Every failure throws checkpoint_error("<who>: <path>: <reason>").
inline SnapshotInfo parse_header(const unsigned char* data, std::size_t size, const std::filesystem::path& path,
                                 const char* who, const SnapshotLimits& limits) {
  const auto fail = [&](const std::string& what) -> void {
    throw checkpoint_error(std::string(who) + ": " + path.string() + ": " + what);
  };
  if (size < off_header_bytes + 4) {
    fail("truncated: file is " + std::to_string(size) + " bytes, a snapshot header needs at least " +
         std::to_string(min_header_bytes));
  }
  if (std::memcmp(data, snapshot_magic.data(), snapshot_magic.size()) != 0) {
    std::string found;
    for (std::size_t i = 0; i < 8; ++i) {
      char b[4];
      std::snprintf(b, sizeof(b), "%s%02x", i ? " " : "", data[i]);
      found += b;
    }
    fail("not a ReproSGD checkpoint (magic bytes are " + found + ", expected \"RSGDCKPT\")");
  }
  SnapshotInfo info;
  info.snapshot_version = get_u32(data + off_version);
  if (info.snapshot_version > snapshot_format_version) {
    fail("written by a newer ReproSGD (format " + std::to_string(info.snapshot_version) + ", this build reads up to " +
         std::to_string(snapshot_format_version) + ")");
  }
  if (info.snapshot_version == 0) fail("invalid snapshot format version 0 (damaged header)");
  const std::uint64_t header = get_u32(data + off_header_bytes);
  if (header < min_header_bytes || header > limits.max_header_bytes) {
    fail("damaged header: header size " + std::to_string(header) + " is outside [" + std::to_string(min_header_bytes) +
         ", " + std::to_string(limits.max_header_bytes) + "]");
  }
  if (header > size) {
    fail("truncated: file is " + std::to_string(size) + " bytes, its header alone needs " + std::to_string(header));
  }
  const XXH128_hash_t hc = XXH3_128bits(data, header - 16);
  if (hc.low64 != get_u64(data + header - 16) || hc.high64 != get_u64(data + header - 8)) {
    fail("header checksum mismatch (the header is damaged)");
  }
  // The header is intact from here on; the bounds checks below guard against a writer bug.
  info.header_bytes = header;
  info.payload_bytes = get_u64(data + off_payload_bytes);
  info.payload_checksum = {get_u64(data + off_payload_checksum), get_u64(data + off_payload_checksum + 8)};
  info.step = get_u64(data + off_step);
  info.epoch = get_u64(data + off_epoch);
  info.position_in_epoch = get_u64(data + off_position);
  info.format_version = get_u32(data + off_format_version);
  std::size_t pos = off_variable;
  const std::size_t end = header - 16;
  const auto get_string = [&]() -> std::string {
    if (end - pos < 4) fail("damaged header: a string runs past the header");
    const std::uint32_t n = get_u32(data + pos);
    pos += 4;
    if (end - pos < n) fail("damaged header: a string runs past the header");
    std::string s(reinterpret_cast<const char*>(data + pos), n);
    pos += n;
    return s;
  };
  info.library_version = get_string();
  info.format_name = get_string();
  if (end - pos < 4) fail("damaged header: configuration runs past the header");
  const std::uint32_t entries = get_u32(data + pos);
  pos += 4;
  if (entries > (end - pos) / 8) fail("damaged header: configuration runs past the header");
  std::vector<ConfigDescription::entry> config;
  config.reserve(entries);
  for (std::uint32_t i = 0; i < entries; ++i) {
    std::string k = get_string();
    std::string v = get_string();
    config.emplace_back(std::move(k), std::move(v));
  }
  if (end - pos != 8) fail("damaged header: configuration hash is not where the header ends");
  info.config_hash = get_u64(data + pos);
  try {
    info.config = ConfigDescription(std::move(config));
  } catch (const config_error& e) {
    fail(std::string("damaged header: ") + e.what());
  }
  if (info.config.hash() != info.config_hash) fail("damaged header: configuration hash does not match its entries");
  if (info.payload_bytes > limits.max_payload_bytes) {
    fail("payload size " + std::to_string(info.payload_bytes) + " exceeds the limit of " +
         std::to_string(limits.max_payload_bytes) + " bytes");
  }
  return info;
}

}  // namespace detail

REPROSGD_END_NAMESPACE
