// SPDX-License-Identifier: BSD-3-Clause
/// @file CheckpointManager: numbered snapshots in a directory, keep the last K, resume from the newest good one.
#pragma once

#include <reprosgd/checkpoint/snapshot.hpp>
#include <reprosgd/checkpoint/writer_lock.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// A checkpoint file found in a directory.
struct CheckpointFile {
  std::uint64_t step = 0;
  std::filesystem::path path;
};

/// A checkpoint that resume_auto did not use, and why (the checkpoint_error message).
struct SkippedCheckpoint {
  std::filesystem::path path;
  std::string reason;
};

/// What resume_auto did.
struct ResumeResult {
  bool resumed = false;                  ///< false: no usable checkpoint, start fresh
  std::filesystem::path path;            ///< the checkpoint loaded (empty when not resumed)
  SnapshotInfo info;                     ///< its header (default when not resumed)
  std::vector<SkippedCheckpoint> skipped;  ///< newer checkpoints that failed verification, newest first
  explicit operator bool() const noexcept { return resumed; }
};

/**
 * Snapshots of one run in one directory, named by step: `<prefix><step, 12 digits><extension>`
 * (`ckpt-000000001234.rsgd`), so names sort by step.
 *
 * save() writes atomically and then deletes all but the newest `keep_last` (with `reuse_pruned`,
 * the file it would delete after the write is written over instead; below); resume_auto() loads
 * the newest checkpoint that verifies, falling back to older ones. One run per directory: a
 * directory holding checkpoints of another configuration is refused by both (nothing of another
 * run is ever loaded, pruned or shadowed), and one writing process per directory, enforced by a
 * lock the first save() takes (WriterLock; the writer also removes temporaries that a crashed
 * writer left behind).
 *
 * @tparam F the CheckpointFormat of every file.
 *
 * **Example**:
 * @code
 * reprosgd::CheckpointManager<> ckpts("run/checkpoints", {.keep_last = 3});
 * State staging = state;            // same shapes
 * if (auto r = ckpts.resume_auto(config, staging)) state = staging;  // else start fresh
 * ...
 * ckpts.save({.config = config, .step = step}, state);
 * @endcode
 */
template <CheckpointFormat F = DefaultCheckpointFormat>
class CheckpointManager {
 public:
  struct Options {
    std::size_t keep_last = 3;         ///< files kept after each save (at least 1)
    /// With keep_last ≥ 2 and keep_last files of earlier steps present, save() writes the new
    /// checkpoint over the oldest one (renamed to a temporary first) instead of creating a file
    /// and deleting that one afterwards: no new blocks to allocate, no cached pages of a deleted
    /// file to drop (a third of what synchronous checkpoints cost training, docs/checkpoints.md).
    /// The price: while the write runs, and after it failed, keep_last − 1 complete checkpoints
    /// remain instead of keep_last. Never with keep_last 1, whose only checkpoint stays until the
    /// new one is in place.
    bool reuse_pruned = true;
    std::string prefix = "ckpt-";      ///< file name before the step
    std::string extension = ".rsgd";   ///< file name after the step
    SnapshotLimits limits{};           ///< applied when loading
  };

  /// Uses (and creates, if needed) `directory`. @throws reprosgd::io_error / config_error.
  explicit CheckpointManager(std::filesystem::path directory, Options options = {})
      : dir_(std::move(directory)), options_(std::move(options)) {
    if (options_.keep_last == 0) throw config_error("reprosgd::CheckpointManager: keep_last must be at least 1");
    if (options_.prefix.empty() || options_.prefix.front() == '.') {
      throw config_error("reprosgd::CheckpointManager: prefix must be non-empty and must not start with '.'");
    }
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) throw io_error("reprosgd::CheckpointManager: " + dir_.string() + ": cannot create directory: " + ec.message());
  }

  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return dir_; }
  [[nodiscard]] const Options& options() const noexcept { return options_; }

  /// The file name used for `step`.
  [[nodiscard]] std::filesystem::path path_for(std::uint64_t step) const {
    char digits[32];
    std::snprintf(digits, sizeof(digits), "%012llu", static_cast<unsigned long long>(step));
    return dir_ / (options_.prefix + digits + options_.extension);
  }

  /// The checkpoint files present, by ascending step (names only; nothing is verified).
  [[nodiscard]] std::vector<CheckpointFile> list() const {
    std::vector<CheckpointFile> files;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (auto step = parse_step(name)) files.push_back({*step, it->path()});
    }
    if (ec) throw io_error("reprosgd::CheckpointManager::list: " + dir_.string() + ": " + ec.message());
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
    return files;
  }

  /**
   * Saves `payload` as the checkpoint of `info.step` (atomically), then deletes checkpoints of
   * later steps (an abandoned timeline) and the oldest beyond keep_last. A crash at any moment
   * leaves the new one either complete or absent and every existing checkpoint intact but, with
   * Options::reuse_pruned, the oldest one, which this save deletes anyway (it is written over).
   * @returns the path written. @throws what save_snapshot throws.
   */
  template <class Payload>
    requires SavableSnapshotPayload<Payload, F>
  std::filesystem::path save(const SnapshotInfo& info, const Payload& payload) {
    if (!checked_) {
      lock_->acquire(dir_);  // one writing process (no-op where the file system has no locks)
      refuse_other_runs(info.config);
      checked_ = true;
    }
    remove_stale_temporaries();
    // A writer killed between its rename and its pruning left one file too many; prune first so
    // that crashes never accumulate more than keep_last + 1 files (the newest ones are kept).
    const std::vector<CheckpointFile> before = list();
    prune_oldest(before);
    const std::filesystem::path path = path_for(info.step);
    // The file the pruning below will delete, written over instead (Options::reuse_pruned): the
    // oldest kept one, when all keep_last kept files are of earlier steps (later steps are an
    // abandoned timeline, deleted below; a file of this step is replaced). `before` is sorted.
    std::filesystem::path reuse;
    const std::size_t k = options_.keep_last;
    if (options_.reuse_pruned && k >= 2 && before.size() >= k && before.back().step < info.step)
      reuse = before[before.size() - k].path;
    save_snapshot<F>(path, info, payload, reuse);
    std::vector<CheckpointFile> files = list();
    // Files of later steps belong to an abandoned timeline (a run resumed from an older checkpoint
    // because they were damaged): left in place they would shadow this one at the next resume.
    std::vector<CheckpointFile> kept;
    for (const auto& f : files) {
      std::error_code ec;
      if (f.step > info.step) {
        std::filesystem::remove(f.path, ec);
      } else {
        kept.push_back(f);
      }
    }
    prune_oldest(kept);
    return path;
  }

  /**
   * Loads the newest checkpoint that verifies into `staging`.
   *
   * Tries the files from the newest step down; each one that fails (damaged, truncated, other
   * format, a name whose step differs from its header) is listed in `skipped` with its reason, and
   * the next older one is tried. No checkpoint at all, or none usable, gives `resumed == false`
   * (not an exception), so training starts fresh. A checkpoint whose intact header names another
   * configuration is not this run's: it throws (below) rather than start fresh over another run's
   * files, which the next save would prune.
   * @throws checkpoint_error "reprosgd::CheckpointManager: <dir> holds checkpoints of another
   *         configuration (<file>: <first difference>); ..." (nothing is loaded)
   *
   * `staging` holds the loaded checkpoint's state when resumed. A checkpoint that failed during
   * deserialisation (listed in skipped) may have written into it before an older one was loaded
   * over it; when nothing was resumed it may hold such partial data and must not be used.
   */
  template <class Payload>
    requires LoadableSnapshotPayload<Payload, F>
  ResumeResult resume_auto(const ConfigDescription& expected, Payload& staging) const {
    refuse_other_runs(expected);
    ResumeResult result;
    std::vector<CheckpointFile> files = list();
    for (auto it = files.rbegin(); it != files.rend(); ++it) {
      try {
        SnapshotInfo info = load_snapshot<F>(it->path, expected, staging, options_.limits);
        if (info.step != it->step) {
          result.skipped.push_back({it->path, "reprosgd::CheckpointManager::resume_auto: " + it->path.string() +
                                                  ": the name says step " + std::to_string(it->step) +
                                                  ", the header says " + std::to_string(info.step)});
          continue;
        }
        result.resumed = true;
        result.path = it->path;
        result.info = std::move(info);
        return result;
      } catch (const error& e) {
        result.skipped.push_back({it->path, e.what()});
      }
    }
    return result;
  }

 private:
  /// Throws when a checkpoint in the directory has an intact header of another configuration.
  /// Headers only (read_snapshot_info: bounded by the limits); a file whose header does not parse
  /// is not judged (it may be this run's, damaged: resume_auto skips it and says why).
  void refuse_other_runs(const ConfigDescription& config) const {
    for (const auto& f : list()) {
      SnapshotInfo info;
      try {
        info = read_snapshot_info(f.path, options_.limits);
      } catch (const error&) {
        continue;
      }
      if (auto diff = info.config.first_difference(config)) {
        throw checkpoint_error("reprosgd::CheckpointManager: " + dir_.string() +
                               " holds checkpoints of another configuration (" + f.path.filename().string() + ": " +
                               *diff + "); give this run a directory of its own");
      }
    }
  }

  [[nodiscard]] std::optional<std::uint64_t> parse_step(const std::string& name) const {
    const std::string& pre = options_.prefix;
    const std::string& ext = options_.extension;
    if (name.size() <= pre.size() + ext.size()) return std::nullopt;
    if (name.compare(0, pre.size(), pre) != 0) return std::nullopt;
    if (name.compare(name.size() - ext.size(), ext.size(), ext) != 0) return std::nullopt;
    const char* b = name.data() + pre.size();
    const char* e = name.data() + name.size() - ext.size();
    for (const char* p = b; p != e; ++p) {
      if (*p < '0' || *p > '9') return std::nullopt;
    }
    std::uint64_t step = 0;
    const auto r = std::from_chars(b, e, step);
    if (r.ec != std::errc{} || r.ptr != e) return std::nullopt;
    return step;
  }

  /// Removes all but the newest keep_last of `files` (sorted by step; best effort: an extra old
  /// file harms nothing).
  void prune_oldest(const std::vector<CheckpointFile>& files) const {
    for (std::size_t i = 0; i + options_.keep_last < files.size(); ++i) {
      std::error_code ec;
      std::filesystem::remove(files[i].path, ec);
    }
  }

  void remove_stale_temporaries() const {
    // AtomicFile names temporaries ".<final name>.tmp.<pid>.<n>"; with one writer per directory any
    // such file of ours is debris from a crash.
    const std::string marker = ".tmp.";
    std::error_code ec;
    std::vector<std::filesystem::path> stale;
    for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() < 2 || name[0] != '.') continue;
      const auto at = name.find(marker);
      if (at == std::string::npos) continue;
      if (parse_step(name.substr(1, at - 1))) stale.push_back(it->path());
    }
    for (const auto& p : stale) std::filesystem::remove(p, ec);
  }

  std::filesystem::path dir_;
  Options options_;
  std::shared_ptr<WriterLock> lock_ = std::make_shared<WriterLock>();  // shared by copies
  bool checked_ = false;  // the first save took the lock and found no other run's checkpoints
};

REPROSGD_END_NAMESPACE
