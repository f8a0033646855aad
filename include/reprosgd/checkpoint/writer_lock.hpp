// SPDX-License-Identifier: BSD-3-Clause
/// @file WriterLock: one writing process per checkpoint directory, enforced with a POSIX record
/// lock, so that two runs pointed at the same directory cannot prune or overwrite each other's files.
#pragma once

#include <reprosgd/error.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

REPROSGD_BEGIN_NAMESPACE

/**
 * An exclusive lock on `<directory>/.reprosgd-writer.lock`, held from acquire() until the object
 * is destroyed or the process ends (a killed writer releases it: the kernel drops a dead process's
 * locks, so a crash never leaves a directory locked).
 *
 * A POSIX record lock (fcntl F_SETLK) belongs to the process, not to the file descriptor: several
 * CheckpointManagers of one process on one directory share it (a Trainer's and an application's),
 * and another process is refused. (The same rule means that the process's lock ends when any of
 * its WriterLocks on that directory is destroyed; the copies of one CheckpointManager share one.)
 * On a file system without record locks (ENOLCK, EINVAL, EOPNOTSUPP) acquire() does nothing: the
 * rule stays documented, unenforced.
 */
class WriterLock {
 public:
  WriterLock() = default;
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  ~WriterLock() {
    if (fd_ >= 0) ::close(fd_);
  }

  /// Takes the lock of `directory` (idempotent). @throws checkpoint_error naming the process that
  /// holds it; io_error when the lock file cannot be opened.
  void acquire(const std::filesystem::path& directory) {
    if (fd_ >= 0) return;
    const std::filesystem::path path = directory / ".reprosgd-writer.lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      throw io_error("reprosgd::CheckpointManager: " + path.string() + ": cannot open the writer lock: " +
                     std::strerror(errno));
    }
    struct flock want {};
    want.l_type = F_WRLCK;
    want.l_whence = SEEK_SET;
    if (::fcntl(fd, F_SETLK, &want) == 0) {
      fd_ = fd;
      return;
    }
    const int err = errno;
    if (err != EACCES && err != EAGAIN) {  // no record locks on this file system
      ::close(fd);
      return;
    }
    struct flock holder = want;
    const bool known = ::fcntl(fd, F_GETLK, &holder) == 0 && holder.l_type != F_UNLCK;
    ::close(fd);
    throw checkpoint_error("reprosgd::CheckpointManager: " + directory.string() +
                           " is being written by another process" +
                           (known ? " (pid " + std::to_string(holder.l_pid) + ")" : std::string()) +
                           "; one writer per directory: give each run a checkpoint directory of its own");
  }

  [[nodiscard]] bool held() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

REPROSGD_END_NAMESPACE
