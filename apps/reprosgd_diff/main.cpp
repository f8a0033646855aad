// SPDX-License-Identifier: BSD-3-Clause
/// @file reprosgd_diff A B: compare two determinism traces (train_mlp --trace, TrainerOptions::trace)
/// and print where they part: the first step, the tensor (micro-batches, loss, a layer's gradient,
/// optimizer state or parameters) and the layers that differ there, and the configuration fields
/// that differ between the two runs (docs/diagnosis.md). Given two model files or checkpoints
/// (model_diff.hpp), it compares their parameters tensor by tensor instead.
///
/// Exit codes: 0 the traces agree, 1 they differ, 2 bad input (a missing or truncated file, not a
/// trace, traces of different models), with one line on standard error.
///
/// Given two directories, it compares two step dumps (train_mlp --dump-step N DIR; dump_diff.hpp)
/// array by array in the order the step computed them.
#include "dump_diff.hpp"
#include "model_diff.hpp"
#include "trace_file.hpp"

#include <reprosgd/detail/kokkos_compat.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace reprosgd_diff {
namespace {

std::string member_text(const Json& j, const char* key) {
  const Json* v = j.find(key);
  return v ? v->text : std::string();
}

std::string layer_name(const Trace& t, std::uint64_t l) {
  return "layer " + std::to_string(l) + " (" + t.layers[l].description + ")";
}

std::string micro_batch_text(const Json& step) {
  const Json& mb = *step.find("micro_batches");
  const unsigned long long first = std::stoull(mb.items[0].text), end = std::stoull(mb.items[1].text);
  return end > first ? std::to_string(first) + ".." + std::to_string(end - 1) : std::string("none");
}

std::string describe_trace(const Trace& t) {
  std::string s = t.path + " (" + t.level + " level, ";
  if (t.steps.empty())
    s += "no steps";
  else
    s += "steps " + std::to_string(t.steps.begin()->first) + ".." + std::to_string(t.steps.rbegin()->first);
  s += ", " + std::to_string(t.evaluations.size()) + (t.evaluations.size() == 1 ? " evaluation" : " evaluations");
  if (!t.failures.empty()) s += ", " + std::to_string(t.failures.size()) + (t.failures.size() == 1 ? " failure" : " failures");
  return s + ")";
}

// The entries of a step line's array `key` ("layers" or "tensors"), by layer index (null where absent).
std::vector<const Json*> entries_of(const Json& step, const char* key, std::size_t count) {
  std::vector<const Json*> out(count, nullptr);
  if (const Json* entries = step.find(key))
    for (const Json& l : entries->items) out[std::stoull(l.find("layer")->text)] = &l;
  return out;
}

// The tensors of one layer that differ, in the order a step computes them, as (name, A, B).
struct TensorDiff {
  std::string name;
  std::string a, b;
};
void compare_text(std::vector<TensorDiff>& out, const std::string& name, const std::string& x, const std::string& y) {
  if (x != y) out.push_back({name, x.empty() ? "absent" : x, y.empty() ? "absent" : y});
}
// A layer's first-micro-batch activations (tensor level): forward output, then input gradient.
void tensor_differences(std::vector<TensorDiff>& out, const Json& a, const Json& b) {
  compare_text(out, "output", member_text(a, "output"), member_text(b, "output"));
  compare_text(out, "input gradient", member_text(a, "input_gradient"), member_text(b, "input_gradient"));
}
// A layer's step fingerprints (layer level): reduced gradient, optimizer state, parameters.
void layer_differences(std::vector<TensorDiff>& out, const Json& a, const Json& b) {
  compare_text(out, "gradient", member_text(a, "gradient"), member_text(b, "gradient"));
  const Json& oa = *a.find("optimizer");
  const Json& ob = *b.find("optimizer");
  for (const auto& [name, v] : oa.members) compare_text(out, "optimizer " + name, v.text, member_text(ob, name.c_str()));
  for (const auto& [name, v] : ob.members)
    if (!oa.find(name)) compare_text(out, "optimizer " + name, "", v.text);
  compare_text(out, "parameters", member_text(a, "parameters"), member_text(b, "parameters"));
}

// Compare one step present in both traces: the lines that describe how they differ (none when equal).
// `depth` is what both traces record: 0 step, 1 layer, 2 tensor.
std::vector<std::string> step_divergence(const Trace& A, const Trace& B, std::uint64_t step, int depth) {
  const Json& a = A.steps.at(step).json;
  const Json& b = B.steps.at(step).json;
  const bool same_batches = micro_batch_text(a) == micro_batch_text(b);
  const bool same_loss = member_text(a, "loss_bits") == member_text(b, "loss_bits");
  const bool same_state = member_text(a, "state") == member_text(b, "state");
  // Per layer, what differs: its first-micro-batch activations (tensor level), then its step fingerprints.
  std::vector<std::pair<std::uint64_t, std::vector<TensorDiff>>> layers;
  for (std::size_t l = 0; depth >= 1 && l < A.layers.size(); ++l) {
    std::vector<TensorDiff> d;
    if (depth >= 2) {
      const Json* ta = entries_of(a, "tensors", A.layers.size())[l];
      const Json* tb = entries_of(b, "tensors", B.layers.size())[l];
      if (ta && tb)
        tensor_differences(d, *ta, *tb);
      else if (ta || tb)
        d.push_back({"activations", ta ? "present" : "absent", tb ? "present" : "absent"});
    }
    const Json* la = entries_of(a, "layers", A.layers.size())[l];
    const Json* lb = entries_of(b, "layers", B.layers.size())[l];
    if (la && lb)
      layer_differences(d, *la, *lb);
    else if (la || lb)
      d.push_back({"fingerprints", la ? "present" : "absent", lb ? "present" : "absent"});
    if (!d.empty()) layers.emplace_back(l, std::move(d));
  }
  std::vector<std::string> out;
  if (same_batches && same_loss && same_state && layers.empty()) return out;

  // The first tensor in the order the step computes them: the micro-batches; the first
  // micro-batch's forward outputs (first layer to last) and input gradients (backward: last layer
  // to first); the loss of all micro-batches; the reduced gradients (backward, last layer first);
  // the optimizer state and the parameters (the update, first layer to last).
  std::string tensor;
  const std::string first_micro_batch = micro_batch_text(a).substr(0, micro_batch_text(a).find('.'));
  // The first layer, in forward (or backward) order, with a differing tensor whose name starts with `kind`.
  auto find = [&](const std::string& kind, bool backward) {
    auto names = [&](const std::pair<std::uint64_t, std::vector<TensorDiff>>& entry) {
      for (const TensorDiff& d : entry.second)
        if (d.name.rfind(kind, 0) == 0) {
          tensor = "the " + d.name + " of " + layer_name(A, entry.first);
          if (kind == "output" || kind == "input gradient" || kind == "activations")
            tensor += " on micro-batch " + first_micro_batch + ", the step's first (" +
                      (kind == "output" ? "forward" : kind == "input gradient" ? "backward" : "tensor level") + ")";
          return true;
        }
      return false;
    };
    if (backward) {
      for (auto it = layers.rbegin(); it != layers.rend() && !names(*it);) ++it;
    } else {
      for (auto it = layers.begin(); it != layers.end() && !names(*it);) ++it;
    }
    return !tensor.empty();
  };
  if (!same_batches) {
    tensor = "the micro-batches (" + micro_batch_text(a) + " in A, " + micro_batch_text(b) + " in B)";
  } else if (find("output", false) || find("input gradient", true) || find("activations", false)) {
  } else if (!same_loss) {
    tensor = "the loss";
  } else if (find("gradient", true) || find("optimizer", false) || find("parameters", false) ||
             find("fingerprints", false)) {
  } else {
    tensor = depth >= 1 ? "the optimizer's scalars (step count; only the whole-state fingerprint differs)"
                        : "the model and optimizer state (a step-level trace: --trace-level layer names the layer)";
  }
  out.push_back("first divergence: step " + std::to_string(step) + " (epoch " + member_text(a, "epoch") +
                ", micro-batches " + micro_batch_text(a) + "): " + tensor);
  if (same_loss)
    out.push_back("  loss: equal (" + member_text(a, "loss") + ", bits " + member_text(a, "loss_bits") + ")");
  else
    out.push_back("  loss: " + member_text(a, "loss") + " (bits " + member_text(a, "loss_bits") + ") in A, " +
                  member_text(b, "loss") + " (bits " + member_text(b, "loss_bits") + ") in B");
  for (const auto& [l, diffs] : layers) {
    std::string names;
    for (const TensorDiff& d : diffs) names += (names.empty() ? "" : ", ") + d.name;
    out.push_back("  " + layer_name(A, l) + ": " + names + " differ");
  }
  if (depth >= 1 && layers.empty() && !same_state) out.push_back("  layers: all equal");
  out.push_back("  state: " + member_text(a, "state") + " in A, " + member_text(b, "state") + " in B");
  return out;
}

// Compare the evaluations after one step: the lines that describe how they differ (none when equal).
std::vector<std::string> evaluation_divergence(const Trace& A, const Trace& B, std::uint64_t step) {
  const Json& a = A.evaluations.at(step).json;
  const Json& b = B.evaluations.at(step).json;
  const bool same_loss = member_text(a, "loss_bits") == member_text(b, "loss_bits");
  const bool same_correct = member_text(a, "correct") == member_text(b, "correct");
  const bool same_samples = member_text(a, "samples") == member_text(b, "samples");
  if (same_loss && same_correct && same_samples) return {};
  return {"first divergence: the evaluation after step " + std::to_string(step) + " (epoch " + member_text(a, "epoch") +
              "): " + (!same_samples ? "the test set's size" : !same_loss ? "the test loss" : "the correct count"),
          "  loss: " + member_text(a, "loss") + " (bits " + member_text(a, "loss_bits") + ") in A, " + member_text(b, "loss") +
              " (bits " + member_text(b, "loss_bits") + ") in B",
          "  correct: " + member_text(a, "correct") + " of " + member_text(a, "samples") + " in A, " +
              member_text(b, "correct") + " of " + member_text(b, "samples") + " in B"};
}

int compare(const Trace& A, const Trace& B) {
  // Different models cannot be compared tensor by tensor.
  if (A.layers.size() != B.layers.size())
    throw bad_input("A and B trace different models: " + std::to_string(A.layers.size()) + " layers in A, " +
                    std::to_string(B.layers.size()) + " in B");
  for (std::size_t l = 0; l < A.layers.size(); ++l)
    if (A.layers[l].description != B.layers[l].description || A.layers[l].parameters != B.layers[l].parameters)
      throw bad_input("A and B trace different models: layer " + std::to_string(l) + " is " + A.layers[l].description +
                      " in A but " + B.layers[l].description + " in B");

  std::vector<std::string> lines;  // what follows the verdict
  lines.push_back("A: " + describe_trace(A));
  lines.push_back("B: " + describe_trace(B));
  auto value_of = [](const Trace& t, const std::string& key) -> std::optional<std::string> {
    for (const auto& [k, v] : t.config)
      if (k == key) return v;
    return std::nullopt;
  };
  for (const auto& [k, v] : A.config) {
    const auto other = value_of(B, k);
    if (!other)
      lines.push_back("configuration: " + k + " is " + v + " in A, absent in B");
    else if (*other != v)
      lines.push_back("configuration: " + k + " differs: " + v + " in A, " + *other + " in B");
  }
  for (const auto& [k, v] : B.config)
    if (!value_of(A, k)) lines.push_back("configuration: " + k + " is absent in A, " + v + " in B");
  // What both traces record: 0 the step fields, 1 also the layers, 2 also the first micro-batch's activations.
  auto depth_of = [](const std::string& level) { return level == "tensor" ? 2 : level == "layer" ? 1 : 0; };
  const int depth = std::min(depth_of(A.level), depth_of(B.level));
  if (A.level != B.level)
    lines.push_back("note: A is a " + A.level + "-level trace and B a " + B.level + "-level one: " +
                    (depth == 1 ? "the layers are compared, not the activations" : "only the step fields are compared"));
  for (const auto* t : {&A, &B})
    for (const TraceRecord& f : t->failures) {
      std::string ranks;
      if (const Json* lost = f.json.find("lost_ranks"))
        for (const Json& r : lost->items) ranks += (ranks.empty() ? "" : ",") + r.text;
      lines.push_back(std::string(t == &A ? "A" : "B") + ": recovered from a failure at step " + member_text(f.json, "step") +
                      " (lost rank(s) " + ranks + ", " + member_text(f.json, "ranks_before") + " -> " +
                      member_text(f.json, "ranks_after") + " ranks); failure lines are not compared");
    }

  // Walk the steps both traces hold, in order, each followed by its evaluation.
  std::size_t common = 0;
  std::uint64_t first_common = 0, last_common = 0;
  for (const auto& [step, rec] : A.steps) {
    if (!B.steps.count(step)) continue;
    if (common == 0) first_common = step;
    last_common = step;
    ++common;
    auto divergence = step_divergence(A, B, step, depth);
    if (divergence.empty() && A.evaluations.count(step) && B.evaluations.count(step))
      divergence = evaluation_divergence(A, B, step);
    if (!divergence.empty()) {
      std::printf("reprosgd_diff: the traces differ\n");
      for (const std::string& l : lines) std::printf("%s\n", l.c_str());
      for (const std::string& l : divergence) std::printf("%s\n", l.c_str());
      return 1;
    }
  }
  const bool same_steps = A.steps.size() == B.steps.size() && common == A.steps.size();
  std::size_t evals_a = 0, evals_b = 0;
  for (const auto& [s, r] : A.evaluations) evals_a += B.evaluations.count(s) ? 0 : 1;
  for (const auto& [s, r] : B.evaluations) evals_b += A.evaluations.count(s) ? 0 : 1;
  if (same_steps && evals_a == 0 && evals_b == 0) {
    std::printf("reprosgd_diff: the traces agree (%zu steps", common);
    if (common > 0) std::printf(", %llu..%llu", static_cast<unsigned long long>(first_common), static_cast<unsigned long long>(last_common));
    std::printf(", %zu evaluations)\n", A.evaluations.size());
    for (const std::string& l : lines) std::printf("%s\n", l.c_str());
    return 0;
  }
  std::printf("reprosgd_diff: the traces differ\n");
  for (const std::string& l : lines) std::printf("%s\n", l.c_str());
  if (common == 0)
    std::printf("no step in common: nothing to compare\n");
  else if (!same_steps)
    std::printf("no divergence in the %zu steps both traces hold (%llu..%llu), but they cover different steps\n", common,
                static_cast<unsigned long long>(first_common), static_cast<unsigned long long>(last_common));
  else
    std::printf("no divergence in the %zu steps, but an evaluation is in one trace only (%zu in A only, %zu in B only)\n",
                common, evals_a, evals_b);
  return 1;
}

// Whether `path` starts like a snapshot (a model file or a checkpoint, in any format).
bool is_snapshot(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == 8 && std::string_view(magic, 8) == reprosgd::snapshot_magic;
}

}  // namespace
}  // namespace reprosgd_diff

int main(int argc, char** argv) {
  using namespace reprosgd_diff;
  std::string a, b;
  CLI::App app{"Compare two ReproSGD determinism traces (train_mlp --trace FILE) and print the first divergence: the "
               "step, the layer and the tensor, and the configuration fields that differ; or two model files or "
               "checkpoints, tensor by tensor; or two step dumps (directories), array by array. Exit 0: equal, 1: they differ, "
               "2: bad input."};
  app.add_option("A", a, "the first trace (or model file, or checkpoint, or step dump directory)")->required();
  app.add_option("B", b, "the second trace (or model file, or checkpoint, or step dump directory)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "reprosgd_diff: error: %s\n", e.what());
    return 2;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(a, ec) || std::filesystem::is_directory(b, ec)) {
    try {
      return compare_dumps(a, b);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "reprosgd_diff: error: %s\n", e.what());
      return 2;
    }
  }
  if (is_snapshot(a) || is_snapshot(b)) {
    reprosgd::detail::initialize(1, true);
    int rc = 2;
    try {
      rc = compare_models(a, b);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "reprosgd_diff: error: %s\n", e.what());
    }
    Kokkos::finalize();
    return rc;
  }
  try {
    const Trace ta = read_trace(a);
    const Trace tb = read_trace(b);
    return compare(ta, tb);
  } catch (const bad_input& e) {
    std::fprintf(stderr, "reprosgd_diff: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reprosgd_diff: error: %s\n", e.what());
    return 2;
  }
}
