// SPDX-License-Identifier: BSD-3-Clause
/// @file Model files: a trained model's architecture, parameters and normalisation (no optimizer
/// state) in the checkpoint envelope — save_model(), read_model_info(), load_model(),
/// read_model_file(), write_model_file() and extract_model() from a checkpoint
/// (docs/surrogates.md, "Model files").
///
/// A model file is a snapshot (checkpoint/snapshot.hpp): the same header, checksums, limits, atomic
/// write and verification order as a checkpoint; its configuration says what it holds (kind
/// "model", the model file version, the layers, the widths and which normalisation follows the
/// parameters), its payload is the parameters in the canonical (one-process) layout and the
/// normalisation's Views.
#pragma once

#include <reprosgd/checkpoint/atomic_file.hpp>
#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/checkpoint/snapshot.hpp>
#include <reprosgd/checkpoint/snapshot_info.hpp>
#include <reprosgd/checkpoint/view_serialization.hpp>
#include <reprosgd/concepts/checkpoint_format.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/inference/architecture.hpp>
#include <reprosgd/inference/normalization.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/optim/adam.hpp>
#include <reprosgd/optim/sgd.hpp>
#include <reprosgd/trainer/checkpointing.hpp>

#include <Kokkos_Core.hpp>
#include <cereal/cereal.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// The model file version this build writes, and the newest it reads.
inline constexpr std::uint32_t model_file_version = 1;

/// Host Views of a model file's floats.
using HostBuffer = Kokkos::View<float*, Kokkos::HostSpace>;

/// What a model file's header says (read_model_info): verified, but the payload is not read.
struct ModelInfo {
  SnapshotInfo snapshot;            ///< the envelope's fields: step, format, library version, ...
  std::uint32_t version = 0;        ///< model file version
  std::vector<std::string> layers;  ///< Sequential::describe() of the model
  ModelArchitecture architecture;   ///< the layers parsed and checked
  bool input_normalization = false;
  bool output_normalization = false;
};

/**
 * A model file's whole content, whatever the Sequential type: what read_model_file() and
 * extract_model() return and write_model_file() writes. Parameters in the canonical (one-process)
 * layout, in host memory.
 */
struct ModelFile {
  std::vector<std::string> layers;  ///< Sequential::describe() of the model
  HostBuffer parameters;
  Normalization normalization;
  std::uint64_t step = 0;  ///< the training step the parameters are from (recorded, informative)
};

/// One entry of a training checkpoint's optimizer state, by its state's visit() name: a buffer laid
/// out like the parameters (Adam's "m" and "v", SGD's "velocity") or a scalar (a step count, a
/// power of beta) as text that reads back to the same bits.
struct OptimizerStateEntry {
  std::string name;
  HostBuffer values;   ///< a buffer's elements (empty for a scalar)
  std::string scalar;  ///< a scalar's value (empty for a buffer)
};

/// What reprosgd_diff compares in a training checkpoint: its model and its optimizer state
/// (read_checkpoint_state). A model file has no optimizer state (`optimizer` empty).
struct CheckpointState {
  ModelFile model;
  std::string optimizer;  ///< the optimizer's description in the checkpoint header
  std::vector<OptimizerStateEntry> state;
};

namespace detail {

inline constexpr std::string_view model_kind = "model";

/// The configuration a model file's header holds (the architecture and what the payload has).
inline ConfigDescription model_config(const std::vector<std::string>& layers, int in, int out, bool has_in,
                                      bool has_out) {
  ConfigDescription c;
  c.add("kind", std::string(model_kind));
  c.add("model_version", std::to_string(model_file_version));
  c.add("layers", std::to_string(layers.size()));
  for (std::size_t i = 0; i < layers.size(); ++i) c.add("layer." + std::to_string(i), layers[i]);
  c.add("inputs", std::to_string(in));
  c.add("outputs", std::to_string(out));
  c.add("normalization", has_in && has_out ? "inputs,outputs" : has_in ? "inputs" : has_out ? "outputs" : "none");
  return c;
}

/// A checkpoint_error from the snapshot layer, worded as `who`'s: "<who>: <path>: <reason>".
[[noreturn]] inline void rethrow_as(const std::string& who, const checkpoint_error& e) {
  std::string m = e.what();
  if (m.starts_with(who + ": ")) throw e;  // already worded as who's
  for (const char* prefix : {"reprosgd::load_snapshot: ", "reprosgd::read_snapshot_info: "})
    if (m.starts_with(prefix)) m = m.substr(std::string_view(prefix).size());
  throw checkpoint_error(who + ": " + m);
}

/// f(Format{}) for the library format a file names; a checkpoint_error for any other.
template <class F>
decltype(auto) with_format_named(const std::string& name, const std::string& who, F&& f) {
  if (name == PortableBinaryFormat::name) return f(PortableBinaryFormat{});
  if (name == BinaryFormat::name) return f(BinaryFormat{});
  if (name == JsonFormat::name) return f(JsonFormat{});
  throw checkpoint_error(who + ": written in format " + name + ", which this build does not read (it reads " +
                         std::string(PortableBinaryFormat::name) + ", " + std::string(BinaryFormat::name) + ", " +
                         std::string(JsonFormat::name) + ")");
}

/// The fewest payload bytes an element takes in the named format (view_serialization.hpp's rule).
inline std::uint64_t min_bytes_per_element(const std::string& format) { return format == JsonFormat::name ? 3 : 4; }

/// Checks that the file is exactly the header and the payload the header announces, and that the
/// payload can hold `elements` floats, before anything is allocated from the header.
inline void check_payload_room(const std::filesystem::path& path, const SnapshotInfo& info, std::uint64_t elements,
                               const std::string& who) {
  const auto fail = [&](const std::string& what) -> void { throw checkpoint_error(who + ": " + what); };
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail("cannot read its size: " + ec.message());
  const std::uint64_t available = size - info.header_bytes;
  if (available < info.payload_bytes)
    fail("truncated: the header announces " + std::to_string(info.payload_bytes) + " payload bytes, the file holds " +
         std::to_string(available));
  if (available > info.payload_bytes)
    fail("damaged: " + std::to_string(available - info.payload_bytes) + " bytes follow the " +
         std::to_string(info.payload_bytes) + "-byte payload");
  const std::uint64_t per = min_bytes_per_element(info.format_name);
  if (elements > info.payload_bytes / per)
    fail("the architecture needs " + std::to_string(elements) + " floats but the " +
         std::to_string(info.payload_bytes) + "-byte payload cannot hold them (a damaged or forged header; nothing "
         "was allocated)");
}

inline std::uint64_t parse_count(const ConfigDescription& c, const char* key, const std::string& who,
                                 std::uint64_t max) {
  const std::string* v = c.find(key);
  if (v == nullptr) throw checkpoint_error(who + ": damaged header: no \"" + key + "\" entry");
  std::uint64_t n = 0;
  const auto r = std::from_chars(v->data(), v->data() + v->size(), n);
  if (r.ec != std::errc{} || r.ptr != v->data() + v->size() || n > max)
    throw checkpoint_error(who + ": damaged header: " + key + " is \"" + *v + "\"");
  return n;
}

/// The payload of a model file: the parameters, then each normalisation View the header announces.
template <class Params>
struct ModelPayload {
  Params* parameters;
  HostBuffer* in_mean;
  HostBuffer* in_std;
  HostBuffer* out_mean;
  HostBuffer* out_std;
  bool has_in = false;
  bool has_out = false;
  template <class Archive>
  void save(Archive& ar) const {
    ar(cereal::make_nvp("parameters", *parameters));
    if (has_in) ar(cereal::make_nvp("input_mean", *in_mean), cereal::make_nvp("input_std_dev", *in_std));
    if (has_out) ar(cereal::make_nvp("output_mean", *out_mean), cereal::make_nvp("output_std_dev", *out_std));
  }
  template <class Archive>
  void load(Archive& ar) {
    ar(cereal::make_nvp("parameters", *parameters));
    if (has_in) ar(cereal::make_nvp("input_mean", *in_mean), cereal::make_nvp("input_std_dev", *in_std));
    if (has_out) ar(cereal::make_nvp("output_mean", *out_mean), cereal::make_nvp("output_std_dev", *out_std));
  }
};

inline HostBuffer host_copy(const std::vector<float>& v, const char* label) {
  HostBuffer b(std::string(label), v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b(i) = v[i];
  return b;
}
inline std::vector<float> to_vector(const HostBuffer& b) { return std::vector<float>(b.data(), b.data() + b.extent(0)); }

/// Writes a model file from its parts (the parameters in any memory space, canonical layout).
template <CheckpointFormat F, class Params>
void write_model(const std::filesystem::path& path, const std::vector<std::string>& layers, const Params& params,
                 const Normalization& norm, std::uint64_t step, const char* who) {
  ModelArchitecture a;
  try {
    a = ModelArchitecture::parse(layers, who);
  } catch (const checkpoint_error& e) {
    throw config_error(e.what());
  }
  if (params.extent(0) != a.parameter_count)
    throw config_error(std::string(who) + ": " + std::to_string(params.extent(0)) + " parameters given, the model has " +
                       std::to_string(a.parameter_count));
  norm.check(a.input_width, a.output_width, who);
  SnapshotInfo info;
  info.config = model_config(layers, a.input_width, a.output_width, norm.has_inputs(), norm.has_outputs());
  info.step = step;
  HostBuffer im = host_copy(norm.inputs.mean, "input_mean"), is = host_copy(norm.inputs.std_dev, "input_std_dev");
  HostBuffer om = host_copy(norm.outputs.mean, "output_mean"), os = host_copy(norm.outputs.std_dev, "output_std_dev");
  Params p = params;
  const ModelPayload<Params> payload{&p, &im, &is, &om, &os, norm.has_inputs(), norm.has_outputs()};
  save_snapshot<F>(path, info, payload);
}

/// The header of a model file, verified (read_model_info's work) under the name `who`.
inline ModelInfo read_model_header(const std::filesystem::path& path, const std::string& who, const SnapshotLimits& limits) {
  ModelInfo m;
  try {
    m.snapshot = read_snapshot_info(path, limits);
  } catch (const checkpoint_error& e) {
    rethrow_as(who, e);
  }
  const std::string at = who + ": " + path.string();
  const ConfigDescription& c = m.snapshot.config;
  const std::string* kind = c.find("kind");
  if (kind == nullptr) {
    if (c.find("optimizer") != nullptr)
      throw checkpoint_error(at + ": a training checkpoint, not a model file (extract its model with "
                                  "reprosgd::extract_model, or `predict --model CHECKPOINT --save-model FILE`)");
    throw checkpoint_error(at + ": not a model file (its header has no \"kind\" entry)");
  }
  if (*kind != model_kind) throw checkpoint_error(at + ": not a model file (kind \"" + *kind + "\")");
  const std::uint64_t version = parse_count(c, "model_version", at, 0xFFFFFFFFu);
  if (version == 0) throw checkpoint_error(at + ": damaged header: model_version is 0");
  if (version > model_file_version)
    throw checkpoint_error(at + ": written by a newer ReproSGD (model file version " + std::to_string(version) +
                           ", this build reads up to " + std::to_string(model_file_version) + ")");
  m.version = static_cast<std::uint32_t>(version);
  const std::uint64_t n = parse_count(c, "layers", at, 4096);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::string key = "layer." + std::to_string(i);
    const std::string* l = c.find(key);
    if (l == nullptr) throw checkpoint_error(at + ": damaged header: no \"" + key + "\" entry");
    m.layers.push_back(*l);
  }
  m.architecture = ModelArchitecture::parse(m.layers, at);
  if (parse_count(c, "inputs", at, 0x7FFFFFFF) != static_cast<std::uint64_t>(m.architecture.input_width) ||
      parse_count(c, "outputs", at, 0x7FFFFFFF) != static_cast<std::uint64_t>(m.architecture.output_width))
    throw checkpoint_error(at + ": damaged header: inputs/outputs do not match the layers");
  const std::string* norm = c.find("normalization");
  if (norm == nullptr || (*norm != "none" && *norm != "inputs" && *norm != "outputs" && *norm != "inputs,outputs"))
    throw checkpoint_error(at + ": damaged header: normalization is " + (norm ? "\"" + *norm + "\"" : "absent"));
  m.input_normalization = *norm == "inputs" || *norm == "inputs,outputs";
  m.output_normalization = *norm == "outputs" || *norm == "inputs,outputs";
  const std::uint64_t floats = m.architecture.parameter_count +
                               (m.input_normalization ? 2u * static_cast<std::uint64_t>(m.architecture.input_width) : 0u) +
                               (m.output_normalization ? 2u * static_cast<std::uint64_t>(m.architecture.output_width) : 0u);
  check_payload_room(path, m.snapshot, floats, at);
  return m;
}

/// Throws "<at>the file holds another architecture: layer.N is A in the file, B in the program".
inline void check_same_layers(const std::vector<std::string>& file, const std::vector<std::string>& program,
                              const std::string& at) {
  for (std::size_t i = 0; i < file.size() || i < program.size(); ++i) {
    const std::string f = i < file.size() ? file[i] : "absent";
    const std::string p = i < program.size() ? program[i] : "absent";
    if (f != p)
      throw checkpoint_error(at + "the file holds another architecture: layer." + std::to_string(i) + " is " + f +
                             " in the file, " + p + " in the program");
  }
}

/// Loads the payload of a verified model header into `params` (allocated with the architecture's
/// count) and the normalisation.
template <class Params>
Normalization read_model_payload(const std::filesystem::path& path, const ModelInfo& m, Params& params,
                                 const std::string& who, const SnapshotLimits& limits) {
  HostBuffer im, is, om, os;
  ModelPayload<Params> payload{&params, &im, &is, &om, &os, m.input_normalization, m.output_normalization};
  try {
    with_format_named(m.snapshot.format_name, who + ": " + path.string(),
                      [&]<class F>(F) { (void)load_snapshot<F>(path, m.snapshot.config, payload, limits); });
  } catch (const checkpoint_error& e) {
    rethrow_as(who, e);
  }
  Normalization n{{to_vector(im), to_vector(is)}, {to_vector(om), to_vector(os)}};
  try {
    n.check(m.architecture.input_width, m.architecture.output_width, (who + ": " + path.string()).c_str());
  } catch (const config_error& e) {
    throw checkpoint_error(e.what());
  }
  return n;
}

}  // namespace detail

/**
 * Writes `model`'s architecture, parameters and `normalization` to a model file at `path`,
 * atomically (AtomicFile: a complete file under the final name or the old one), in format F
 * (PortableBinaryFormat by default; JsonFormat for a readable file). No optimizer state.
 *
 * @tparam F a CheckpointFormat
 * @param model a whole model (not a model-parallel shard: gather it first, or use the overload
 *        with canonical parameters)
 * @param step recorded in the header (the training step the parameters are from)
 * @throws config_error a shard, or a normalisation that does not fit the model; io_error when the
 *         file cannot be written (the target is then unchanged)
 * Not collective: call it on the one rank that writes. @deterministic the bytes depend only on the
 * architecture, the values and `step`.
 *
 * **Example**: `reprosgd::save_model("surrogate.rsgdm", model, norm);`,
 * `reprosgd::save_model<reprosgd::JsonFormat>("surrogate.json", model);`
 */
template <CheckpointFormat F = PortableBinaryFormat, class Model>
void save_model(const std::filesystem::path& path, const Model& model, const Normalization& normalization = {},
                std::uint64_t step = 0) {
  if (model.model_size() != 1)
    throw config_error("reprosgd::save_model: the model is shard " + std::to_string(model.model_rank()) + " of " +
                       std::to_string(model.model_size()) +
                       " of a model group; pass the gathered canonical parameters (save_model(path, model, "
                       "parameters, normalization))");
  detail::write_model<F>(path, model.describe(), model.parameters(), normalization, step, "reprosgd::save_model");
}

/**
 * save_model() with the parameters given in the canonical (one-process) layout: for a model whose
 * object is a model-parallel shard, whose whole parameter vector was gathered elsewhere (what a
 * Trainer gathers for its checkpoints). `parameters` must have model.canonical_parameter_count()
 * elements, in any memory space.
 */
template <CheckpointFormat F = PortableBinaryFormat, class Model, class Params>
  requires Kokkos::is_view<Params>::value
void save_model(const std::filesystem::path& path, const Model& model, const Params& parameters,
                const Normalization& normalization = {}, std::uint64_t step = 0) {
  detail::write_model<F>(path, model.describe(), parameters, normalization, step, "reprosgd::save_model");
}

/**
 * Writes a ModelFile (from read_model_file() or extract_model()) to `path`, atomically, in F.
 * @throws config_error an inconsistent ModelFile; io_error
 */
template <CheckpointFormat F = PortableBinaryFormat>
void write_model_file(const std::filesystem::path& path, const ModelFile& m) {
  detail::write_model<F>(path, m.layers, m.parameters, m.normalization, m.step, "reprosgd::write_model_file");
}

/**
 * Reads and verifies a model file's header, in any of the library's formats, without reading the
 * payload: envelope (magic, versions, header checksum, limits), that it is a model file of a
 * version this build reads, the architecture (every layer known, widths chained), and that the
 * file holds exactly the payload announced and that payload can hold the architecture's floats —
 * so a forged header cannot make a caller that builds the architecture (with_mlp) allocate more
 * than the file's size.
 * @throws checkpoint_error "reprosgd::read_model_info: <path>: <reason>"
 */
inline ModelInfo read_model_info(const std::filesystem::path& path, const SnapshotLimits& limits = {}) {
  return detail::read_model_header(path, "reprosgd::read_model_info", limits);
}

/**
 * Loads a model file into `model`, whose architecture must be the file's, and returns the file's
 * normalisation. Everything is verified first (read_model_info's checks, the architecture layer by
 * layer against model.describe(), the payload checksum); the parameters are read into a staging
 * copy, and `model` changes only when all of it succeeded.
 *
 * @param model a whole model (not a shard) of the file's architecture
 * @throws checkpoint_error "reprosgd::load_model: <path>: <reason>" — e.g. "the file holds
 *         another architecture: layer.2 is dense(128,10,he) in the file, dense(128,12,he) in the
 *         program"; config_error when the model is a shard. Not collective.
 */
template <class Model>
Normalization load_model(const std::filesystem::path& path, Model& model, const SnapshotLimits& limits = {}) {
  const std::string who = "reprosgd::load_model";
  if (model.model_size() != 1)
    throw config_error(who + ": the model is shard " + std::to_string(model.model_rank()) + " of " +
                       std::to_string(model.model_size()) + " of a model group; load into the whole model");
  const ModelInfo m = detail::read_model_header(path, who, limits);
  detail::check_same_layers(m.layers, model.describe(), who + ": " + path.string() + ": ");
  HostBuffer staging("reprosgd::load_model::staging", model.parameter_count());
  Normalization n = detail::read_model_payload(path, m, staging, who, limits);
  Kokkos::deep_copy(model.parameters(), staging);
  Kokkos::fence();
  return n;
}

/**
 * Reads and verifies a whole model file (any library format) into a ModelFile, whatever its
 * architecture. The parameters are allocated from the verified header (bounded by the file size).
 * @throws checkpoint_error "reprosgd::read_model_file: <path>: <reason>"
 */
inline ModelFile read_model_file(const std::filesystem::path& path, const SnapshotLimits& limits = {}) {
  const std::string who = "reprosgd::read_model_file";
  const ModelInfo m = detail::read_model_header(path, who, limits);
  ModelFile f;
  f.layers = m.layers;
  f.step = m.snapshot.step;
  f.parameters = HostBuffer("reprosgd::read_model_file::parameters", m.architecture.parameter_count);
  f.normalization = detail::read_model_payload(path, m, f.parameters, who, limits);
  return f;
}

namespace detail {
/// extract_model()'s and read_model()'s work, their messages under the name `who`.
/// A checkpoint's optimizer state is kept in `optimizer_state` when it is given.
inline ModelFile model_of(const std::filesystem::path& checkpoint, const Normalization& normalization,
                          const SnapshotLimits& limits, const std::string& who,
                          CheckpointState* optimizer_state = nullptr) {
  const std::string at = who + ": " + checkpoint.string();
  SnapshotInfo info;
  try {
    info = read_snapshot_info(checkpoint, limits);
  } catch (const checkpoint_error& e) {
    rethrow_as(who, e);
  }
  ModelFile f;
  if (const std::string* kind = info.config.find("kind"); kind != nullptr && *kind == model_kind) {
    const ModelInfo m = read_model_header(checkpoint, who, limits);
    f.layers = m.layers;
    f.step = m.snapshot.step;
    f.parameters = HostBuffer("reprosgd::read_model::parameters", m.architecture.parameter_count);
    f.normalization = read_model_payload(checkpoint, m, f.parameters, who, limits);
    if (normalization.has_inputs() || normalization.has_outputs()) {
      normalization.check(m.architecture.input_width, m.architecture.output_width, who.c_str());
      f.normalization = normalization;
    }
    return f;
  }
  for (std::size_t i = 0;; ++i) {
    const std::string* l = info.config.find("layer." + std::to_string(i));
    if (l == nullptr) break;
    f.layers.push_back(*l);
  }
  if (f.layers.empty())
    throw checkpoint_error(at + ": neither a model file nor a training checkpoint (its header has no \"kind\" and no "
                                "\"layer.0\" entry)");
  const ModelArchitecture a = ModelArchitecture::parse(f.layers, at);
  check_payload_room(checkpoint, info, a.parameter_count, at);
  normalization.check(a.input_width, a.output_width, who.c_str());
  const std::string* opt = info.config.find("optimizer");
  const std::string name = opt == nullptr ? std::string() : opt->substr(0, opt->find('('));
  f.parameters = HostBuffer("reprosgd::extract_model::parameters", a.parameter_count);
  f.normalization = normalization;
  f.step = info.step;
  const auto read = [&]<class Opt>(Opt) {
    typename Opt::template state_type<Kokkos::HostSpace> state{};  // its Views are allocated by the load
    TrainingPayload<HostBuffer, decltype(state)> payload{&f.parameters, &state};
    with_format_named(info.format_name, at,
                      [&]<class F>(F) { (void)load_snapshot<F>(checkpoint, info.config, payload, limits); });
    if (!optimizer_state) return;
    optimizer_state->optimizer = opt ? *opt : std::string();
    state.visit([&](const char* key, const auto& x) {
      OptimizerStateEntry e;
      e.name = key;
      using X = std::remove_cvref_t<decltype(x)>;
      if constexpr (Kokkos::is_view<X>::value) {
        e.values = HostBuffer("reprosgd::read_checkpoint_state::" + e.name, x.extent(0));
        for (std::size_t i = 0; i < x.extent(0); ++i) e.values(i) = static_cast<float>(x(i));
      } else if constexpr (std::is_floating_point_v<X>) {
        e.scalar = exact_text(static_cast<double>(x));  // hex float: the same bits read back
      } else {
        e.scalar = std::to_string(x);
      }
      optimizer_state->state.push_back(std::move(e));
    });
  };
  try {
    if (name == "sgd")
      read(Sgd{});
    else if (name == "adam")
      read(Adam{});
    else if (name == "adamw")
      read(AdamW{});
    else
      throw checkpoint_error(at + ": the optimizer \"" + (opt ? *opt : std::string("absent")) +
                             "\" is not one extract_model knows (sgd, adam, adamw)");
  } catch (const checkpoint_error& e) {
    rethrow_as(who, e);
  }
  return f;
}
}  // namespace detail

/**
 * The model of a training checkpoint (any of the library's formats, written by a Trainer with
 * Sgd, Adam or AdamW and no user state): its architecture (the "layer.N" entries of the header),
 * the parameters (canonical layout, as every checkpoint holds them) and the step; the optimizer
 * state is verified with the rest of the payload and dropped. A checkpoint has no normalisation:
 * pass the one training used (it is checked against the architecture and returned in the
 * ModelFile). A model file given as `checkpoint` is read as one (`normalization`, when given,
 * replaces its own).
 *
 * Verification is the checkpoint's (load_snapshot: checksums, configuration hash, every payload
 * byte consumed) after the header's architecture was checked against the payload size.
 * @throws checkpoint_error "reprosgd::extract_model: <path>: <reason>"; config_error a
 *         normalisation that does not fit the architecture
 *
 * **Example**: `reprosgd::write_model_file("model.rsgdm", reprosgd::extract_model("run/ckpt-000120.rsgd"));`
 */
inline ModelFile extract_model(const std::filesystem::path& checkpoint, const Normalization& normalization = {},
                               const SnapshotLimits& limits = {}) {
  return detail::model_of(checkpoint, normalization, limits, "reprosgd::extract_model");
}

/**
 * A model file, or the model of a training checkpoint (extract_model()), whichever `path` is:
 * what a tool that accepts both reads. @throws checkpoint_error "reprosgd::read_model: <path>: <reason>"
 */
inline ModelFile read_model(const std::filesystem::path& path, const SnapshotLimits& limits = {}) {
  return detail::model_of(path, {}, limits, "reprosgd::read_model");
}

/**
 * read_model() and, for a training checkpoint, its optimizer state (verified with the rest of the
 * payload, kept instead of dropped): what a tool comparing two checkpoints needs.
 * @throws checkpoint_error "reprosgd::read_checkpoint_state: <path>: <reason>"
 */
inline CheckpointState read_checkpoint_state(const std::filesystem::path& path, const SnapshotLimits& limits = {}) {
  CheckpointState c;
  c.model = detail::model_of(path, {}, limits, "reprosgd::read_checkpoint_state", &c);
  return c;
}

/**
 * Installs a ModelFile (read_model(), extract_model()) into `model`, whose architecture must be the
 * file's, and returns its normalisation. @throws checkpoint_error "reprosgd::load_model: the file
 * holds another architecture: ..."; config_error when the model is a shard. Not collective.
 */
template <class Model>
Normalization load_model(const ModelFile& file, Model& model) {
  const std::string who = "reprosgd::load_model";
  if (model.model_size() != 1)
    throw config_error(who + ": the model is shard " + std::to_string(model.model_rank()) + " of " +
                       std::to_string(model.model_size()) + " of a model group; load into the whole model");
  detail::check_same_layers(file.layers, model.describe(), who + ": ");
  if (file.parameters.extent(0) != model.parameter_count())
    throw checkpoint_error(who + ": the file holds " + std::to_string(file.parameters.extent(0)) +
                           " parameters, the model has " + std::to_string(model.parameter_count()));
  Kokkos::deep_copy(model.parameters(), file.parameters);
  Kokkos::fence();
  return file.normalization;
}

REPROSGD_END_NAMESPACE
