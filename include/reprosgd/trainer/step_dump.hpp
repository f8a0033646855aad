// SPDX-License-Identifier: BSD-3-Clause
/// @file The dump of one step (TrainerOptions::dump_step, train_mlp --dump-step N DIR): everything
/// the step computed, as NumPy .npy files (format 1.0, little-endian float32 and int32, C order)
/// with a manifest, so that a divergent step found in a trace can be replayed from a checkpoint
/// and inspected on its own — with `numpy.load`, or with `reprosgd_diff DIR_A DIR_B`, which names
/// the first file and element that differ (docs/diagnosis.md, "Replay one step").
///
/// In DIR (created if missing; files of an earlier dump are replaced):
/// - `manifest.json`: the step, the micro-batches, the layers and every file in computation order;
/// - `parameters.layer<L>.npy`: layer L's parameters as the step used them (before its update);
/// - per micro-batch u of the step (global id, so a rank count cannot change a name):
///   `mb<u>.input.npy` (rows x features), `mb<u>.labels.npy`, `mb<u>.layer<L>.output.npy`
///   (rows x width), `mb<u>.layer<L>.input_gradient.npy` (L > 0) and
///   `mb<u>.layer<L>.parameter_gradient.npy` (layers with parameters);
/// - `reduced_gradient.layer<L>.npy`: the step's reduced gradient of layer L.
/// A layer's parameters and gradients are its slice of the parameter vector (Dense: weights in x
/// out row-major, then the biases). Each rank writes the micro-batches it ran; the rank that
/// writes checkpoints writes the manifest, the parameters and the reduced gradient.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>

#include <Kokkos_Core.hpp>

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/// The bytes of a NumPy .npy file, format 1.0: magic, header length, the header dict padded with
/// spaces to a multiple of 64 bytes and ended by '\n', then the little-endian data.
/// `descr` is "<f4" or "<i4".
inline std::string npy_header(const char* descr, const std::vector<std::size_t>& shape) {
  // NumPy's own spelling: (n,) for one dimension, (a, b) for two.
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  dict += "), }";
  const std::size_t preamble = 10;  // magic (6), version (2), header length (2)
  std::size_t total = preamble + dict.size() + 1;
  const std::size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(dict.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  return out + dict;
}

/// Write `count` elements at `data` (host memory, float or int32) to `path` as a .npy array of `shape`.
/// @throws io_error
template <class T>
void write_npy(const std::string& path, const T* data, const std::vector<std::size_t>& shape) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, std::int32_t>, "write_npy: float or int32 data");
  static_assert(std::endian::native == std::endian::little, "write_npy: .npy files are written little-endian");
  std::size_t count = 1;
  for (const std::size_t s : shape) count *= s;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << npy_header(std::is_same_v<T, float> ? "<f4" : "<i4", shape);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(T)));
  out.close();
  if (!out) throw io_error("reprosgd::Trainer::fit: cannot write the step dump file " + path + ": " + std::strerror(errno));
}

/// Copy the first `count` elements of a View (any memory space) to the host and write them as `shape`.
template <class View>
void write_npy_view(const std::string& path, const View& v, const std::vector<std::size_t>& shape) {
  using T = std::remove_cv_t<typename View::value_type>;
  std::size_t count = 1;
  for (const std::size_t s : shape) count *= s;
  std::vector<T> host(count);
  if (count > 0) {
    Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> dst(host.data(), count);
    Kokkos::View<const T*, typename View::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> src(v.data(), count);
    Kokkos::deep_copy(dst, src);
  }
  write_npy(path, host.data(), shape);
}

/**
 * What the Trainer dumps of step `step` (none when the options ask for none): StepPipeline calls
 * micro_batch() after each of its micro-batches' backward, the Trainer finish() once the step's
 * gradient is reduced (before the update). Local: each rank writes its own files.
 */
class StepDump {
 public:
  StepDump() = default;
  StepDump(std::string dir, long step) : dir_(std::move(dir)), step_(step) {}

  [[nodiscard]] bool enabled() const noexcept { return step_ >= 0 && !dir_.empty(); }
  /// Whether global step `step` is the one dumped.
  [[nodiscard]] bool at(std::uint64_t step) const noexcept {
    return enabled() && static_cast<std::uint64_t>(step_) == step;
  }

  /// Create the directory. @throws io_error
  void prepare() const {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) throw io_error("reprosgd::Trainer::fit: cannot create the step dump directory " + dir_ + ": " + ec.message());
  }

  /// @throws io_error when a file of this rank's could not be written (every rank calls it in an agreement).
  void check() const {
    if (!error_.empty()) throw io_error(error_);
  }

  /// Write micro-batch `u`'s input, labels, every layer's output and input gradient and its
  /// parameter gradient `row`, from the workspace `ws` of `model` (a Sequential whose backward kept
  /// its input gradients) after its forward and backward over `rows` rows.
  /// An error is kept for check().
  template <class Model, class Workspace, class Labels, class Row>
  void micro_batch(const Model& model, const Workspace& ws, const Labels& labels, const Row& row, std::uint64_t u,
                   long rows) {
    keep_error([&] { write_micro_batch(model, ws, labels, row, u, rows); });
  }

  /// Write the parameters the step used, the reduced gradient and the manifest (the rank that
  /// writes checkpoints; a whole model). `params` are read before the update. An error is kept for check().
  template <class Model, class Params, class Grad>
  void finish(const Model& model, const Params& params, const Grad& reduced, long M, long m, std::uint64_t step) {
    keep_error([&] { write_step(model, params, reduced, M, m, step); });
  }

 private:
  template <class F>
  void keep_error(F&& f) {
    try {
      f();
    } catch (const io_error& e) {
      if (error_.empty()) error_ = e.what();
    }
  }

  template <class Model, class Workspace, class Labels, class Row>
  void write_micro_batch(const Model& model, const Workspace& ws, const Labels& labels, const Row& row,
                         std::uint64_t u, long rows) const {
    const std::string mb = dir_ + "/mb" + std::to_string(u);
    const auto r = static_cast<std::size_t>(rows);
    write_npy_view(mb + ".input.npy", ws.act[0], {r, static_cast<std::size_t>(model.width(0))});
    write_npy_view(mb + ".labels.npy", labels, {r});
    for (std::size_t l = 0; l < model.layer_count(); ++l) {
      const std::string layer = mb + ".layer" + std::to_string(l);
      write_npy_view(layer + ".output.npy", ws.act[l + 1], {r, static_cast<std::size_t>(model.width(l + 1))});
      if (l > 0 && l < ws.input_gradients.size())
        write_npy_view(layer + ".input_gradient.npy", ws.input_gradients[l], {r, static_cast<std::size_t>(model.width(l))});
      const std::size_t begin = model.parameter_offset(l), end = model.parameter_offset(l + 1);
      if (end > begin)
        write_npy_view(layer + ".parameter_gradient.npy", Kokkos::subview(row, Kokkos::make_pair(begin, end)), {end - begin});
    }
  }

  template <class Model, class Params, class Grad>
  void write_step(const Model& model, const Params& params, const Grad& reduced, long M, long m, std::uint64_t step) const {
    std::string files, layers;
    auto add = [&](const std::string& name) { files += (files.empty() ? "\"" : ",\"") + name + "\""; };
    const auto describe = model.describe();
    for (std::size_t l = 0; l < model.layer_count(); ++l) {
      layers += (l ? "," : "") + std::string("{\"layer\":") + std::to_string(l) + ",\"description\":\"" + describe[l] +
                "\",\"parameters\":" + std::to_string(model.parameter_offset(l + 1) - model.parameter_offset(l)) + "}";
      const std::size_t begin = model.parameter_offset(l), end = model.parameter_offset(l + 1);
      if (end == begin) continue;
      const std::string name = "parameters.layer" + std::to_string(l) + ".npy";
      write_npy_view(dir_ + "/" + name, Kokkos::subview(params, Kokkos::make_pair(begin, end)), {end - begin});
      add(name);
    }
    // The micro-batches in order, each in the order its forward and backward computed them.
    const std::uint64_t first = step * static_cast<std::uint64_t>(M);
    for (long u = 0; u < M; ++u) {
      const std::string mb = "mb" + std::to_string(first + static_cast<std::uint64_t>(u));
      add(mb + ".input.npy");
      add(mb + ".labels.npy");
      for (std::size_t l = 0; l < model.layer_count(); ++l) add(mb + ".layer" + std::to_string(l) + ".output.npy");
      for (std::size_t l = model.layer_count(); l-- > 0;) {
        if (model.parameter_offset(l + 1) > model.parameter_offset(l))
          add(mb + ".layer" + std::to_string(l) + ".parameter_gradient.npy");
        if (l > 0) add(mb + ".layer" + std::to_string(l) + ".input_gradient.npy");
      }
    }
    for (std::size_t l = model.layer_count(); l-- > 0;) {
      const std::size_t begin = model.parameter_offset(l), end = model.parameter_offset(l + 1);
      if (end == begin) continue;
      const std::string name = "reduced_gradient.layer" + std::to_string(l) + ".npy";
      write_npy_view(dir_ + "/" + name, Kokkos::subview(reduced, Kokkos::make_pair(begin, end)), {end - begin});
      add(name);
    }
    const std::string manifest = "{\"dump\":\"reprosgd\",\"version\":1,\"step\":" + std::to_string(step) +
                                 ",\"micro_batch\":" + std::to_string(m) + ",\"micro_batches\":[" + std::to_string(first) +
                                 "," + std::to_string(first + static_cast<std::uint64_t>(M)) + "],\"layers\":[" + layers +
                                 "],\"files\":[" + files + "]}\n";
    const std::string path = dir_ + "/manifest.json";
    std::ofstream out(path, std::ios::trunc);
    out << manifest;
    out.close();
    if (!out) throw io_error("reprosgd::Trainer::fit: cannot write the step dump file " + path + ": " + std::strerror(errno));
  }

  std::string dir_;
  long step_ = -1;
  std::string error_;
};

}  // namespace detail
REPROSGD_END_NAMESPACE
