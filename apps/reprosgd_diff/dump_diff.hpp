// SPDX-License-Identifier: BSD-3-Clause
/// @file Two step dumps (train_mlp --dump-step N DIR, TrainerOptions::dump_step) compared file by
/// file in the order the step computed them (the manifest's): the first array that differs, its
/// first differing element (index, both values in hex and decimal) and how many differ, then every
/// other array that differs. The .npy files are read as the dump writes them: format 1.0,
/// little-endian float32 or int32, C order.
#pragma once

#include "json.hpp"
#include "model_diff.hpp"  // detail::float_text
#include "trace_file.hpp"  // bad_input

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace reprosgd_diff {

/// An array of a dump: its element type ("<f4" or "<i4"), shape and raw little-endian data.
struct NpyArray {
  std::string descr;
  std::vector<std::uint64_t> shape;
  std::string data;
  [[nodiscard]] std::uint64_t count() const {
    std::uint64_t n = 1;
    for (const auto s : shape) n *= s;
    return n;
  }
};

/// Read a .npy file (format 1.0 or 2.0, "<f4" or "<i4", C order). @throws bad_input
inline NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw bad_input(path + ": cannot open the file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw bad_input(path + ": not a NumPy .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  const std::size_t len_bytes = major == 1 ? 2 : 4, start = 8 + len_bytes;
  if ((major != 1 && major != 2) || bytes.size() < start) throw bad_input(path + ": unsupported .npy format version");
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) header_len |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  if (bytes.size() < start + header_len) throw bad_input(path + ": truncated .npy header");
  const std::string header = bytes.substr(start, header_len);
  NpyArray a;
  auto value_of = [&](const char* key) {
    const auto at = header.find(std::string("'") + key + "':");
    if (at == std::string::npos) throw bad_input(path + ": the .npy header has no '" + key + "'");
    return header.substr(at + std::strlen(key) + 3);
  };
  const std::string descr = value_of("descr");
  const auto q1 = descr.find('\''), q2 = descr.find('\'', q1 + 1);
  if (q1 == std::string::npos || q2 == std::string::npos) throw bad_input(path + ": bad 'descr' in the .npy header");
  a.descr = descr.substr(q1 + 1, q2 - q1 - 1);
  if (a.descr != "<f4" && a.descr != "<i4") throw bad_input(path + ": element type " + a.descr + " (want <f4 or <i4)");
  if (value_of("fortran_order").rfind(" False", 0) != 0) throw bad_input(path + ": Fortran-ordered arrays are not read");
  const std::string shape = value_of("shape");
  const auto open = shape.find('('), close = shape.find(')');
  if (open == std::string::npos || close == std::string::npos) throw bad_input(path + ": bad 'shape' in the .npy header");
  std::stringstream dims(shape.substr(open + 1, close - open - 1));
  for (std::string d; std::getline(dims, d, ',');) {
    const auto first = d.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    try {
      a.shape.push_back(std::stoull(d.substr(first)));
    } catch (const std::exception&) {
      throw bad_input(path + ": bad 'shape' in the .npy header");
    }
  }
  a.data = bytes.substr(start + header_len);
  if (a.data.size() != a.count() * 4)
    throw bad_input(path + ": " + std::to_string(a.data.size()) + " bytes of data for shape " + shape.substr(open, close - open + 1) +
                    " (want " + std::to_string(a.count() * 4) + "): truncated or damaged");
  return a;
}

/// The manifest of a dump directory. @throws bad_input
inline Json read_manifest(const std::string& dir) {
  const std::string path = dir + "/manifest.json";
  std::ifstream in(path);
  if (!in) throw bad_input(dir + ": not a step dump (no manifest.json)");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Json j;
  try {
    j = parse_json(text);
  } catch (const json_error& e) {
    throw bad_input(path + ": not JSON (" + e.what() + ")");
  }
  const Json* kind = j.find("dump");
  if (!kind || kind->text != "reprosgd") throw bad_input(path + ": not a ReproSGD step dump manifest");
  for (const char* key : {"step", "micro_batches", "layers", "files"})
    if (!j.find(key)) throw bad_input(path + ": no \"" + std::string(key) + "\"");
  return j;
}

namespace detail {

inline std::string element_text(const NpyArray& a, std::uint64_t i) {
  if (a.descr == "<i4") {
    std::int32_t v;
    std::memcpy(&v, a.data.data() + i * 4, 4);
    return std::to_string(v);
  }
  float v;
  std::memcpy(&v, a.data.data() + i * 4, 4);
  return float_text(v);
}

inline std::string index_text(const NpyArray& a, std::uint64_t i) {
  if (a.shape.size() != 2) return "[" + std::to_string(i) + "]";
  return "[" + std::to_string(i / a.shape[1]) + "][" + std::to_string(i % a.shape[1]) + "]";
}

}  // namespace detail

/// Compare two dump directories; prints the verdict and the differing arrays. Returns 0 when every
/// array has the same bits, 1 otherwise. @throws bad_input (not dumps, other models or steps, damaged files)
inline int compare_dumps(const std::string& dir_a, const std::string& dir_b) {
  const Json a = read_manifest(dir_a), b = read_manifest(dir_b);
  const Json& files_a = *a.find("files");
  const Json& files_b = *b.find("files");
  std::vector<std::string> names;
  for (const Json& f : files_a.items) names.push_back(f.text);
  std::vector<std::string> names_b;
  for (const Json& f : files_b.items) names_b.push_back(f.text);
  auto layers_text = [](const Json& m) {
    std::string s;
    for (const Json& l : m.find("layers")->items) {
      const Json* d = l.find("description");
      s += (d ? d->text : std::string("?")) + ";";
    }
    return s;
  };
  if (layers_text(a) != layers_text(b)) throw bad_input("A and B are dumps of different models");
  if (names != names_b)
    throw bad_input("A and B dump different steps or micro-batches (step " + a.find("step")->text + " in A, " +
                    b.find("step")->text + " in B; " + std::to_string(names.size()) + " and " +
                    std::to_string(names_b.size()) + " files)");
  std::vector<std::string> lines;
  std::string first;
  std::size_t differing = 0;
  for (const std::string& name : names) {
    const NpyArray x = read_npy(dir_a + "/" + name), y = read_npy(dir_b + "/" + name);
    if (x.descr != y.descr || x.shape != y.shape)
      throw bad_input(name + ": a different type or shape in A and in B");
    std::uint64_t count = 0, at = 0;
    for (std::uint64_t i = 0; i < x.count(); ++i)
      if (std::memcmp(x.data.data() + i * 4, y.data.data() + i * 4, 4) != 0) {
        if (count == 0) at = i;
        ++count;
      }
    if (count == 0) continue;
    ++differing;
    const std::string line = name + ": " + std::to_string(count) + " of " + std::to_string(x.count()) +
                             " elements differ; the first, " + detail::index_text(x, at) + ", is " +
                             detail::element_text(x, at) + " in A, " + detail::element_text(y, at) + " in B";
    if (first.empty()) first = line;
    lines.push_back(line);
  }
  const std::string step = a.find("step")->text;
  if (differing == 0) {
    std::printf("reprosgd_diff: the dumps agree (step %s, %zu arrays)\n", step.c_str(), names.size());
    return 0;
  }
  std::printf("reprosgd_diff: the dumps differ\n");
  std::printf("A: %s (step %s)\nB: %s (step %s)\n", dir_a.c_str(), step.c_str(), dir_b.c_str(), b.find("step")->text.c_str());
  std::printf("first divergence, in the order the step computed them: %s\n", first.c_str());
  for (const std::string& l : lines) std::printf("  %s\n", l.c_str());
  std::printf("%zu of %zu arrays differ\n", differing, names.size());
  return 1;
}

}  // namespace reprosgd_diff
