// SPDX-License-Identifier: BSD-3-Clause
/// @file Save/load throughput of snapshots in each format against raw write+fsync and raw read, as JSON lines.
//
// Usage: checkpoint_bench [--smoke] [--mb N] [--json-mb N] [--repeats N] [--dir DIRECTORY]
//
// The payload is a model-like set of float Views (N MiB in all, default 128). Each repeat measures,
// back to back on the same bytes: a raw write (open, write, fsync, close) of the snapshot's size,
// save_snapshot to a new name (it also renames and fsyncs the directory), a raw read (open, read into a
// preallocated buffer, close) of the snapshot file, and load_snapshot into a preallocated staging
// state. Both reads find the file in the page cache (it was just written), so the comparison is of
// the library's overhead (checksum, deserialisation copy) against the kernel's copy alone. The
// median of the repeats is reported. JSON is measured on a smaller payload (--json-mb, default 16):
// it is a text format, two orders of magnitude slower.
#include <reprosgd/checkpoint/snapshot.hpp>

#include "bench_common.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace {

using view = Kokkos::View<float*, Kokkos::HostSpace>;

struct Model {
  std::vector<view> params;
  template <class Archive>
  void save(Archive& ar) const {
    ar(cereal::make_size_tag(static_cast<cereal::size_type>(params.size())));
    for (const auto& p : params) ar(p);
  }
  template <class Archive>
  void load(Archive& ar) {
    cereal::size_type n = 0;
    ar(cereal::make_size_tag(n));
    if (n != params.size()) throw reprosgd::checkpoint_error("bench: parameter count differs");
    for (auto& p : params) ar(p);
  }
};

Model make_model(std::size_t total_floats, bool fill) {
  // Four tensors in the proportions of an MLP's weights and optimizer moments.
  const std::size_t parts[4] = {total_floats / 2, total_floats / 4, total_floats / 8, 0};
  Model m;
  std::size_t used = 0;
  for (int i = 0; i < 4; ++i) {
    const std::size_t n = i < 3 ? parts[i] : total_floats - used;
    used += n;
    m.params.emplace_back(view(Kokkos::view_alloc(Kokkos::WithoutInitializing, "p" + std::to_string(i)), n));
    std::uint32_t s = 12345u + static_cast<std::uint32_t>(i);
    for (std::size_t j = 0; j < n; ++j) {
      s = s * 1664525u + 1013904223u;
      m.params.back()(j) = fill ? static_cast<float>(static_cast<int>(s >> 8) - (1 << 23)) * 0x1p-23f : 0.0f;
    }
  }
  return m;
}

using reprosgd_bench::seconds_now;
using reprosgd_bench::upper_median_of;  // the reported median (the upper middle time for an even --repeats)

void check(bool ok, const char* what) {
  if (!ok) {
    std::perror(what);
    std::exit(1);
  }
}

double raw_write(const std::filesystem::path& p, const std::vector<char>& bytes) {
  std::filesystem::remove(p);
  const double t0 = seconds_now();
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(fd >= 0, "open");
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    check(n > 0, "write");
    done += static_cast<std::size_t>(n);
  }
  check(::fsync(fd) == 0, "fsync");
  ::close(fd);
  return seconds_now() - t0;
}

double raw_read(const std::filesystem::path& p, std::vector<char>& buffer) {
  const double t0 = seconds_now();
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd >= 0, "open");
  std::size_t done = 0;
  while (done < buffer.size()) {
    const ssize_t n = ::read(fd, buffer.data() + done, buffer.size() - done);
    check(n > 0, "read");
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return seconds_now() - t0;
}

template <class F>
void run(const char* label, std::size_t mib, int repeats, const std::filesystem::path& dir) {
  const std::size_t floats = mib * (std::size_t{1} << 20) / sizeof(float);
  const Model model = make_model(floats, true);
  Model staging = make_model(floats, false);
  const reprosgd::ConfigDescription config{{"bench", "checkpoint"}, {"floats", std::to_string(floats)}};
  reprosgd::SnapshotInfo info;
  info.config = config;
  info.step = 1;
  const auto snap = dir / (std::string("bench.") + label + ".rsgd");
  const auto raw = dir / "bench.raw";

  reprosgd::save_snapshot<F>(snap, info, model);  // warm-up (allocations, page cache)
  const std::uintmax_t file_bytes = std::filesystem::file_size(snap);
  std::vector<char> bytes(file_bytes, 1);
  std::vector<char> buffer(file_bytes);
  reprosgd::load_snapshot<F>(snap, config, staging);
  raw_read(snap, buffer);

  std::vector<double> t_raw_w, t_save, t_raw_r, t_load;
  for (int r = 0; r < repeats; ++r) {
    t_raw_w.push_back(raw_write(raw, bytes));
    // Like the raw write, the save creates a new file: freeing the previous snapshot's blocks (a
    // rename over it) is not part of either measurement.
    std::filesystem::remove(snap);
    double t0 = seconds_now();
    reprosgd::save_snapshot<F>(snap, info, model);
    t_save.push_back(seconds_now() - t0);
    t_raw_r.push_back(raw_read(snap, buffer));
    t0 = seconds_now();
    reprosgd::load_snapshot<F>(snap, config, staging);
    t_load.push_back(seconds_now() - t0);
  }
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    if (std::memcmp(model.params[i].data(), staging.params[i].data(), model.params[i].size() * sizeof(float)) != 0) {
      std::fprintf(stderr, "checkpoint_bench: %s: loaded state differs from the saved one\n", label);
      std::exit(1);
    }
  }
  std::filesystem::remove(raw);
  std::filesystem::remove(snap);

  const double payload = static_cast<double>(floats * sizeof(float));
  const double save = upper_median_of(t_save), raw_w = upper_median_of(t_raw_w), load = upper_median_of(t_load),
               raw_r = upper_median_of(t_raw_r);
  std::printf(
      "{\"bench\":\"checkpoint\",\"format\":\"%s\",\"state_bytes\":%.0f,\"file_bytes\":%ju,\"size_ratio\":%.6f,"
      "\"repeats\":%d,\"save_s\":%.6f,\"raw_write_fsync_s\":%.6f,\"save_vs_raw\":%.3f,\"save_GBps\":%.3f,"
      "\"load_s\":%.6f,\"raw_read_s\":%.6f,\"load_vs_raw\":%.3f,\"load_GBps\":%.3f,\"git_sha\":\"%s\"}\n",
      label, payload, file_bytes, static_cast<double>(file_bytes) / payload, repeats, save, raw_w, raw_w / save,
      payload / save * 1e-9, load, raw_r, raw_r / load, payload / load * 1e-9, REPROSGD_GIT_SHA);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::size_t mib = 128, json_mib = 16;
  int repeats = 5;
  std::filesystem::path dir = ".";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke") {
      mib = 4;
      json_mib = 1;
      repeats = 1;
    } else if (a == "--mb" && i + 1 < argc) {
      mib = std::stoul(argv[++i]);
    } else if (a == "--json-mb" && i + 1 < argc) {
      json_mib = std::stoul(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::stoi(argv[++i]);
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--smoke] [--mb N] [--json-mb N] [--repeats N] [--dir DIR]\n", argv[0]);
      return 2;
    }
  }
  run<reprosgd::BinaryFormat>("binary_le", mib, repeats, dir);
  run<reprosgd::PortableBinaryFormat>("portable_binary", mib, repeats, dir);
  run<reprosgd::JsonFormat>("json", json_mib, std::max(1, std::min(repeats, 3)), dir);
  return 0;
}
