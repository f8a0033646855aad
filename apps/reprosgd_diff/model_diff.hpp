// SPDX-License-Identifier: BSD-3-Clause
/// @file Two model files or training checkpoints (anything reprosgd::read_model reads), compared
/// tensor by tensor — each Dense layer's weights, then its biases, in the canonical layout — with
/// the first differing element (its index, both values in hex and decimal) and the number of
/// differing elements of every tensor that differs. Two training checkpoints also have their
/// optimizer states compared, buffer by buffer (Adam's m and v, SGD's velocity: sliced per layer
/// like the parameters) and scalar by scalar (step counts, powers of beta).
#pragma once

#include "trace_file.hpp"  // bad_input

#include <reprosgd/inference/architecture.hpp>
#include <reprosgd/inference/model_file.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace reprosgd_diff {

/// The model of `path` (a model file or a training checkpoint) and a checkpoint's optimizer state.
/// @throws bad_input
inline reprosgd::CheckpointState read_model_or_checkpoint(const std::string& path) {
  try {
    return reprosgd::read_checkpoint_state(path);
  } catch (const reprosgd::error& e) {
    throw bad_input(std::string(e.what()));
  }
}

namespace detail {

inline std::string float_text(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  char buf[64];
  std::snprintf(buf, sizeof buf, "0x%08x (%.9g)", static_cast<unsigned>(u), static_cast<double>(v));
  return buf;
}

}  // namespace detail

/// Compare the models of two files; prints the verdict and every differing tensor. Returns 0 when
/// every parameter has the same bits, 1 otherwise. @throws bad_input (unreadable, other architectures)
inline int compare_models(const std::string& path_a, const std::string& path_b) {
  const reprosgd::CheckpointState state_a = read_model_or_checkpoint(path_a);
  const reprosgd::CheckpointState state_b = read_model_or_checkpoint(path_b);
  const reprosgd::ModelFile& a = state_a.model;
  const reprosgd::ModelFile& b = state_b.model;
  if (a.layers != b.layers) {
    for (std::size_t l = 0; l < a.layers.size() && l < b.layers.size(); ++l)
      if (a.layers[l] != b.layers[l])
        throw bad_input("A and B hold different models: layer " + std::to_string(l) + " is " + a.layers[l] + " in A but " +
                        b.layers[l] + " in B");
    throw bad_input("A and B hold different models: " + std::to_string(a.layers.size()) + " layers in A, " +
                    std::to_string(b.layers.size()) + " in B");
  }
  const reprosgd::ModelArchitecture arch = reprosgd::ModelArchitecture::parse(a.layers, "reprosgd_diff: " + path_a);
  struct Tensor {
    std::string name;
    std::uint64_t begin = 0, rows = 0, cols = 0;  // cols == 0: a vector of `rows` elements
  };
  std::vector<Tensor> tensors;
  std::uint64_t at = 0;
  for (std::size_t l = 0; l < arch.layers.size(); ++l) {
    const reprosgd::LayerSpec& s = arch.layers[l];
    if (s.kind != reprosgd::LayerSpec::Kind::dense) continue;
    const auto in = static_cast<std::uint64_t>(s.dense.in), out = static_cast<std::uint64_t>(s.dense.out);
    const std::string layer = "layer " + std::to_string(l) + " (" + a.layers[l] + ")";
    tensors.push_back({layer + " weights", at, in, out});
    tensors.push_back({layer + " bias", at + in * out, out, 0});
    at += (in + 1) * out;
  }
  std::vector<std::string> lines;
  std::uint64_t differing_tensors = 0, differing_elements = 0, compared = 0;
  // Every tensor of two buffers laid out like the parameters; `what` prefixes the tensor names.
  auto compare_buffers = [&](const std::string& what, const reprosgd::HostBuffer& x, const reprosgd::HostBuffer& y,
                             bool count_elements) {
    for (const Tensor& t : tensors) {
      ++compared;
      const std::uint64_t n = t.cols ? t.rows * t.cols : t.rows;
      std::uint64_t count = 0, first = 0;
      for (std::uint64_t i = 0; i < n; ++i)
        if (std::memcmp(&x(t.begin + i), &y(t.begin + i), sizeof(float)) != 0) {
          if (count == 0) first = i;
          ++count;
        }
      if (count == 0) continue;
      ++differing_tensors;
      if (count_elements) differing_elements += count;
      const std::string index = t.cols ? "[" + std::to_string(first / t.cols) + "][" + std::to_string(first % t.cols) + "]"
                                       : "[" + std::to_string(first) + "]";
      lines.push_back(t.name + what + ": " + std::to_string(count) + " of " + std::to_string(n) +
                      " elements differ; the first, " + index + " (parameter " + std::to_string(t.begin + first) +
                      "), is " + detail::float_text(x(t.begin + first)) + " in A, " +
                      detail::float_text(y(t.begin + first)) + " in B");
    }
  };
  compare_buffers("", a.parameters, b.parameters, true);
  // The optimizer states of two checkpoints, entry by entry in the optimizer's visit() order.
  std::string optimizer_note;
  if (state_a.optimizer.empty() || state_b.optimizer.empty()) {
    if (!state_a.optimizer.empty() || !state_b.optimizer.empty())
      optimizer_note = "optimizer state: in " + std::string(state_a.optimizer.empty() ? "B" : "A") +
                       " only (the other is a model file): not compared";
  } else {
    if (state_a.optimizer != state_b.optimizer)
      optimizer_note = "configuration: optimizer differs: " + state_a.optimizer + " in A, " + state_b.optimizer + " in B";
    for (const reprosgd::OptimizerStateEntry& ea : state_a.state) {
      const reprosgd::OptimizerStateEntry* eb = nullptr;
      for (const auto& e : state_b.state)
        if (e.name == ea.name) eb = &e;
      if (!eb) {
        ++differing_tensors;
        lines.push_back("optimizer " + ea.name + ": in A only");
      } else if (ea.values.extent(0) == arch.parameter_count && eb->values.extent(0) == arch.parameter_count) {
        compare_buffers(" optimizer " + ea.name, ea.values, eb->values, false);
      } else {
        ++compared;
        if (ea.scalar != eb->scalar || ea.values.extent(0) != eb->values.extent(0)) {
          ++differing_tensors;
          lines.push_back("optimizer " + ea.name + ": " + (ea.scalar.empty() ? "a buffer" : ea.scalar) + " in A, " +
                          (eb->scalar.empty() ? "a buffer" : eb->scalar) + " in B");
        }
      }
    }
  }
  const bool both_checkpoints = !state_a.optimizer.empty() && !state_b.optimizer.empty();
  std::printf("reprosgd_diff: the %s %s\n", both_checkpoints ? "checkpoints" : "models", differing_tensors ? "differ" : "agree");
  std::printf("A: %s (%zu layers, %llu parameters, step %llu)\n", path_a.c_str(), a.layers.size(),
              static_cast<unsigned long long>(arch.parameter_count), static_cast<unsigned long long>(a.step));
  std::printf("B: %s (%zu layers, %llu parameters, step %llu)\n", path_b.c_str(), b.layers.size(),
              static_cast<unsigned long long>(arch.parameter_count), static_cast<unsigned long long>(b.step));
  if (!optimizer_note.empty()) std::printf("%s\n", optimizer_note.c_str());
  for (const std::string& l : lines) std::printf("%s\n", l.c_str());
  if (differing_tensors)
    std::printf("%llu of %llu tensors differ, %llu of %llu parameters\n", static_cast<unsigned long long>(differing_tensors),
                static_cast<unsigned long long>(compared), static_cast<unsigned long long>(differing_elements),
                static_cast<unsigned long long>(arch.parameter_count));
  return differing_tensors ? 1 : 0;
}

}  // namespace reprosgd_diff
