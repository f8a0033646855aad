// SPDX-License-Identifier: BSD-3-Clause
/// @file Atomic file replacement: temporary in the same directory, fsync, rename, fsync the directory.
#pragma once

#include <reprosgd/error.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE (glibc 2.28, Linux 3.15)
#include <sys/stat.h>
#include <unistd.h>

REPROSGD_BEGIN_NAMESPACE

namespace detail {
inline std::string errno_text(int err) { return std::strerror(err); }

/// The prefix of every temporary that AtomicFile creates for `target` (hidden, never a final name).
inline std::string atomic_temp_prefix(const std::filesystem::path& target) {
  return "." + target.filename().string() + ".tmp.";
}

inline void fsync_directory(const std::filesystem::path& dir, const char* who) {
  const std::filesystem::path d = dir.empty() ? std::filesystem::path(".") : dir;
  const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw io_error(std::string(who) + ": " + d.string() + ": cannot open directory to fsync it: " + errno_text(err));
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    // Some file systems cannot fsync a directory (EINVAL); the rename is then as durable as they allow.
    if (err != EINVAL) throw io_error(std::string(who) + ": " + d.string() + ": fsync of directory failed: " + errno_text(err));
    return;
  }
  ::close(fd);
}
}  // namespace detail

/**
 * A file that appears under its final name only complete: written to a unique temporary in the
 * same directory, then flushed, fsync'ed, renamed over the target, and the directory fsync'ed.
 *
 * Until commit() the target is untouched (an old file of that name stays as it was). If the object
 * is destroyed without commit() — an exception, an early return — the temporary is removed. A crash
 * (SIGKILL, power loss) can leave a temporary named `.<name>.tmp.<pid>.<n>` behind, never a
 * half-written file under the final name: rename(2) replaces the name atomically, and the data was
 * on disk before it.
 *
 * With `reuse`, an existing file in the same directory that the caller was going to delete anyway
 * (the checkpoint keep-last-K prunes after this one, CheckpointManager) becomes the temporary: it is
 * renamed to a temporary name at once (so it is gone under its old name from that moment, whatever
 * happens next), overwritten in place and cut to the new size at commit(). The file system then
 * allocates no blocks and drops no cached pages of a deleted file (synchronous checkpoints of a
 * 5.4 MB state every 10 steps slowed one-thread training by 13-15% instead of 20-24%, Intel Xeon,
 * ext4; bench/README.md, "Checkpoint overhead in training"). When `reuse` cannot be taken (it is
 * missing, in another directory, not a regular file, has another hard link, or the system has no
 * `renameat2(RENAME_NOREPLACE)`), a new temporary is created as without it. A process reading the
 * reused file at that moment sees it change (its checksums then refuse it), where after a deletion
 * it would have kept the old contents.
 *
 * Not thread-safe; one writer per target at a time.
 *
 * **Example**:
 * @code
 * reprosgd::AtomicFile f("out/model.bin");
 * f.write(bytes.data(), bytes.size());
 * f.commit();
 * @endcode
 */
class AtomicFile {
 public:
  /// Creates the temporary next to `target` (or takes `reuse` as it, above). @throws
  /// reprosgd::io_error naming the path and strerror.
  explicit AtomicFile(std::filesystem::path target, const std::filesystem::path& reuse = {})
      : target_(std::move(target)) {
    // The rename would replace whatever the name is, a device too (as root, --save-model /dev/full
    // turned /dev/full into a regular file): only a name that is, or links to, a regular file is
    // ever replaced (a link is replaced by the file, as before; /dev/stdout links to a pipe or a
    // terminal and is refused).
    struct ::stat existing {};
    if (::stat(target_.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode))
      throw io_error("reprosgd::AtomicFile: " + target_.string() +
                     " exists and is not a regular file (a device, directory, FIFO or socket); nothing is written "
                     "over it");
    const std::filesystem::path dir = target_.parent_path();
    std::random_device rd;
    std::mt19937_64 gen((static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^ static_cast<std::uint64_t>(::getpid()));
    const auto temp_name = [&] {
      return dir / (detail::atomic_temp_prefix(target_) + std::to_string(::getpid()) + "." +
                    std::to_string(gen() % 1000000000000ULL));
    };
    if (!reuse.empty() && reuse.parent_path() == dir && take_over(reuse, temp_name)) return;
    for (int attempt = 0; attempt < 16; ++attempt) {
      temp_ = temp_name();
      fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd_ >= 0) return;
      if (errno != EEXIST) break;
    }
    const int err = errno;
    throw io_error("reprosgd::AtomicFile: " + target_.string() + ": cannot create temporary file " + temp_.string() +
                   ": " + detail::errno_text(err));
  }

  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  /// Removes the temporary unless commit() succeeded. Never throws.
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
  }

  /// Appends `size` bytes. @throws reprosgd::io_error (e.g. "No space left on device").
  void write(const void* data, std::size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      // Linux writes at most 0x7ffff000 bytes per call.
      const std::size_t chunk = size < (std::size_t{1} << 30) ? size : (std::size_t{1} << 30);
      const ::ssize_t n = ::write(fd_, p, chunk);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("write failed");
      }
      p += n;
      size -= static_cast<std::size_t>(n);
      written_ += static_cast<std::uint64_t>(n);
    }
  }

  /// Overwrites `size` bytes at `offset` of what was already written (e.g. a header patched at the end).
  void write_at(std::uint64_t offset, const void* data, std::size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ::ssize_t n = ::pwrite(fd_, p, size, static_cast<::off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("write failed");
      }
      p += n;
      size -= static_cast<std::size_t>(n);
      offset += static_cast<std::uint64_t>(n);
    }
  }

  /// Bytes appended so far.
  [[nodiscard]] std::uint64_t size() const noexcept { return written_; }
  /// The final name.
  [[nodiscard]] const std::filesystem::path& target() const noexcept { return target_; }
  /// The temporary's name (for tests and diagnostics).
  [[nodiscard]] const std::filesystem::path& temporary() const noexcept { return temp_; }
  /// Whether the temporary is the `reuse` file of the constructor (written over in place).
  [[nodiscard]] bool reused() const noexcept { return reused_; }

  /// fsync, close, rename over the target, fsync the directory. After it the file is durable.
  void commit() {
    // A reused file may be longer than what was written over it.
    if (reused_ && ::ftruncate(fd_, static_cast<::off_t>(written_)) != 0) fail("truncate failed");
    if (::fsync(fd_) != 0) fail("fsync failed");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close failed");
    if (::rename(temp_.c_str(), target_.c_str()) != 0) {
      const int err = errno;
      throw io_error("reprosgd::AtomicFile: " + target_.string() + ": cannot rename " + temp_.string() +
                     " over it: " + detail::errno_text(err));
    }
    committed_ = true;
    detail::fsync_directory(target_.parent_path(), "reprosgd::AtomicFile");
  }

 private:
  /// Renames `file` to a fresh temporary name (never over an existing name) and opens it for
  /// writing from its start; false, with nothing changed, when either cannot be done.
  template <class TempName>
  bool take_over(const std::filesystem::path& file, TempName temp_name) {
#ifdef RENAME_NOREPLACE
    struct ::stat st {};
    // A file with another name (a hard link someone made to keep it) is not ours to write over.
    if (::lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) return false;
    for (int attempt = 0; attempt < 16; ++attempt) {
      temp_ = temp_name();
      if (::renameat2(AT_FDCWD, file.c_str(), AT_FDCWD, temp_.c_str(), RENAME_NOREPLACE) != 0) {
        if (errno == EEXIST) continue;
        temp_.clear();
        return false;
      }
      fd_ = ::open(temp_.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd_ < 0) {  // renamed but not writable: it was to be deleted; a new temporary follows
        ::unlink(temp_.c_str());
        temp_.clear();
        return false;
      }
      reused_ = true;
      return true;
    }
    temp_.clear();
#else
    (void)file;
    (void)temp_name;
#endif
    return false;
  }

  [[noreturn]] void fail(const char* what) {
    const int err = errno;
    throw io_error("reprosgd::AtomicFile: " + target_.string() + ": " + what + " (temporary " + temp_.string() +
                   "): " + detail::errno_text(err));
  }

  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  std::uint64_t written_ = 0;
  bool committed_ = false;
  bool reused_ = false;
};

/**
 * Writes `bytes` to `target` atomically (see AtomicFile).
 * @throws reprosgd::io_error naming the path and the system's reason; the target is then unchanged.
 */
inline void write_file_atomically(const std::filesystem::path& target, std::span<const std::byte> bytes) {
  AtomicFile f(target);
  f.write(bytes.data(), bytes.size());
  f.commit();
}

REPROSGD_END_NAMESPACE
