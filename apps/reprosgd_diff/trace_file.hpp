// SPDX-License-Identifier: BSD-3-Clause
/// @file A trace file (TrainerOptions::trace, docs/diagnosis.md) read back and checked: the
/// header (format version, level, layers, configuration) and the step, evaluation and failure
/// lines by step. Anything that is not a whole, well-formed trace is a bad_input naming the file
/// and line.
#pragma once

#include "json.hpp"

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace reprosgd_diff {

/// The trace format version this tool reads (reprosgd::trace_format_version).
inline constexpr int supported_trace_version = 2;

/// Input the tool cannot compare (exit code 2); what() is the one-line message.
struct bad_input : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TraceLayer {
  std::string description;
  std::uint64_t parameters = 0;
};

/// A line of the trace with its line number.
struct TraceRecord {
  std::size_t line = 0;
  Json json;
};

struct Trace {
  std::string path;
  std::string level;
  std::vector<TraceLayer> layers;
  std::vector<std::pair<std::string, std::string>> config;
  std::map<std::uint64_t, TraceRecord> steps;        // by step
  std::map<std::uint64_t, TraceRecord> evaluations;  // by the step they follow
  std::vector<TraceRecord> failures;                 // in file order (informational)
};

namespace detail {

inline std::uint64_t unsigned_member(const Json& j, const char* key, const std::string& where) {
  const Json* v = j.find(key);
  if (!v || !v->is(Json::Kind::number) || v->text.empty() || v->text.find_first_not_of("0123456789") != std::string::npos)
    throw bad_input(where + ": \"" + key + "\" is missing or not a non-negative integer");
  try {
    return std::stoull(v->text);
  } catch (const std::exception&) {
    throw bad_input(where + ": \"" + key + "\" is out of range");
  }
}
inline const std::string& string_member(const Json& j, const char* key, const std::string& where) {
  const Json* v = j.find(key);
  if (!v || !v->is(Json::Kind::string)) throw bad_input(where + ": \"" + key + "\" is missing or not a string");
  return v->text;
}

}  // namespace detail

/// Read and check the trace at `path`. @throws bad_input
inline Trace read_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw bad_input(path + ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.empty()) throw bad_input(path + ": not a ReproSGD trace (the file is empty)");
  Trace t;
  t.path = path;
  std::size_t at = 0, line = 0;
  while (at < text.size()) {
    ++line;
    const auto nl = text.find('\n', at);
    const std::string where = path + ": line " + std::to_string(line);
    if (nl == std::string::npos)
      throw bad_input(where + " is truncated (no end of line: was the run killed while writing it?)");
    const std::string_view s(text.data() + at, nl - at);
    at = nl + 1;
    Json j;
    try {
      j = parse_json(s);
    } catch (const json_error& e) {
      if (line == 1) throw bad_input(path + ": not a ReproSGD trace (its first line is not JSON: " + e.what() + ")");
      throw bad_input(where + " is not JSON (" + e.what() + "): truncated or damaged");
    }
    if (!j.is(Json::Kind::object)) throw bad_input(where + " is not a JSON object");
    if (line == 1) {
      const Json* kind = j.find("trace");
      if (!kind || !kind->is(Json::Kind::string) || kind->text != "reprosgd")
        throw bad_input(path + ": not a ReproSGD trace (its first line is not a trace header)");
      const std::uint64_t version = detail::unsigned_member(j, "version", where);
      if (version != supported_trace_version)
        throw bad_input(path + ": trace format version " + std::to_string(version) + ", this reprosgd_diff reads version " +
                        std::to_string(supported_trace_version));
      t.level = detail::string_member(j, "level", where);
      if (t.level != "step" && t.level != "layer" && t.level != "tensor")
        throw bad_input(where + ": unknown trace level \"" + t.level + "\" (step, layer or tensor)");
      const Json* layers = j.find("layers");
      if (!layers || !layers->is(Json::Kind::array)) throw bad_input(where + ": the header has no \"layers\" array");
      for (const Json& l : layers->items) {
        if (!l.is(Json::Kind::object)) throw bad_input(where + ": a layer of the header is not an object");
        t.layers.push_back({detail::string_member(l, "description", where), detail::unsigned_member(l, "parameters", where)});
      }
      const Json* config = j.find("config");
      if (!config || !config->is(Json::Kind::object)) throw bad_input(where + ": the header has no \"config\" object");
      for (const auto& [k, v] : config->members) {
        if (!v.is(Json::Kind::string)) throw bad_input(where + ": configuration field " + k + " is not a string");
        t.config.emplace_back(k, v.text);
      }
      continue;
    }
    const std::string& event = detail::string_member(j, "event", where);
    const std::uint64_t step = detail::unsigned_member(j, "step", where);
    if (event == "step") {
      (void)detail::string_member(j, "loss_bits", where);
      (void)detail::string_member(j, "state", where);
      const Json* mb = j.find("micro_batches");
      if (!mb || !mb->is(Json::Kind::array) || mb->items.size() != 2)
        throw bad_input(where + ": \"micro_batches\" is missing or not [first, end]");
      if (const Json* layers = j.find("layers")) {
        if (!layers->is(Json::Kind::array)) throw bad_input(where + ": \"layers\" is not an array");
        for (const Json& l : layers->items) {
          if (!l.is(Json::Kind::object)) throw bad_input(where + ": an entry of \"layers\" is not an object");
          if (detail::unsigned_member(l, "layer", where) >= t.layers.size())
            throw bad_input(where + ": a layer index beyond the header's layers");
          (void)detail::string_member(l, "parameters", where);
          (void)detail::string_member(l, "gradient", where);
          const Json* opt = l.find("optimizer");
          if (!opt || !opt->is(Json::Kind::object)) throw bad_input(where + ": a layer without an \"optimizer\" object");
        }
      }
      if (const Json* tensors = j.find("tensors")) {
        if (!tensors->is(Json::Kind::array)) throw bad_input(where + ": \"tensors\" is not an array");
        for (const Json& l : tensors->items) {
          if (!l.is(Json::Kind::object)) throw bad_input(where + ": an entry of \"tensors\" is not an object");
          if (detail::unsigned_member(l, "layer", where) >= t.layers.size())
            throw bad_input(where + ": a layer index beyond the header's layers");
          (void)detail::string_member(l, "output", where);
        }
      }
      const auto [it, fresh] = t.steps.emplace(step, TraceRecord{line, std::move(j)});
      if (!fresh)
        throw bad_input(path + ": step " + std::to_string(step) + " appears twice (lines " + std::to_string(it->second.line) +
                        " and " + std::to_string(line) + ")");
    } else if (event == "evaluation") {
      (void)detail::string_member(j, "loss_bits", where);
      const auto [it, fresh] = t.evaluations.emplace(step, TraceRecord{line, std::move(j)});
      if (!fresh)
        throw bad_input(path + ": the evaluation after step " + std::to_string(step) + " appears twice (lines " +
                        std::to_string(it->second.line) + " and " + std::to_string(line) + ")");
    } else if (event == "failure") {
      t.failures.push_back(TraceRecord{line, std::move(j)});
    } else {
      throw bad_input(where + ": unknown event \"" + event + "\"");
    }
  }
  return t;
}

}  // namespace reprosgd_diff
