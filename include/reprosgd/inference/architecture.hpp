// SPDX-License-Identifier: BSD-3-Clause
/// @file ModelArchitecture: a model's layers as run-time values, parsed back from the lines of
/// Sequential::describe() that model files and checkpoints store, and with_mlp(), which builds the
/// Sequential of a file's architecture for the MLP shapes the library's tools make.
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/elementwise.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/sequential.hpp>

#include <charconv>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// One layer of a ModelArchitecture: its kind and the layer object of that kind.
struct LayerSpec {
  enum class Kind { dense, activation, dropout };
  Kind kind = Kind::dense;
  Dense dense{};
  ActivationFn activation{};
  Dropout dropout{};

  /// The layer's describe() line (the text it was parsed from).
  [[nodiscard]] std::string describe(int width) const {
    switch (kind) {
      case Kind::dense: return dense.describe(width);
      case Kind::activation: return activation.describe(width);
      case Kind::dropout: return dropout.describe(width);
    }
    return {};
  }
};

namespace detail {

inline bool parse_int(std::string_view s, int& out) {
  if (s.empty() || s.size() > 10) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc{} && r.ptr == s.data() + s.size();
}

/// Parses Dropout::describe()'s "%a" text ("0x1p-1", "0x0p+0", "0x1.99999ap-4") without the locale.
inline bool parse_hex_float(std::string_view s, float& out) {
  if (!s.starts_with("0x")) return false;
  s.remove_prefix(2);
  double d = 0.0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), d, std::chars_format::hex);
  if (r.ec != std::errc{} || r.ptr != s.data() + s.size()) return false;
  out = static_cast<float>(d);
  return static_cast<double>(out) == d;  // it was printed from a float: exact
}

/// The layer described by `text` ("dense(784,256,he)", "dense(784,256,he,chunk=32)", "relu",
/// "tanh", "sigmoid", "dropout(0x1p-1)"), or false.
inline bool parse_layer(std::string_view text, LayerSpec& spec) {
  if (text == "relu" || text == "tanh" || text == "sigmoid") {
    spec.kind = LayerSpec::Kind::activation;
    spec.activation.kind = text == "relu" ? Activation::relu : text == "tanh" ? Activation::tanh : Activation::sigmoid;
    return true;
  }
  if (text.starts_with("dropout(") && text.ends_with(")")) {
    spec.kind = LayerSpec::Kind::dropout;
    return parse_hex_float(text.substr(8, text.size() - 9), spec.dropout.p) && spec.dropout.p >= 0.0f &&
           spec.dropout.p < 1.0f;
  }
  if (!text.starts_with("dense(") || !text.ends_with(")")) return false;
  std::string_view args = text.substr(6, text.size() - 7);
  std::vector<std::string_view> parts;
  for (;;) {
    const std::size_t comma = args.find(',');
    parts.push_back(args.substr(0, comma));
    if (comma == std::string_view::npos) break;
    args.remove_prefix(comma + 1);
  }
  if (parts.size() != 3 && parts.size() != 4) return false;
  Dense d{};
  if (!parse_int(parts[0], d.in) || !parse_int(parts[1], d.out) || d.in <= 0 || d.out <= 0) return false;
  if (parts[2] == "he")
    d.init = Init::he_normal;
  else if (parts[2] == "xavier")
    d.init = Init::xavier_uniform;
  else
    return false;
  if (parts.size() == 4) {
    if (!parts[3].starts_with("chunk=") || !parse_int(parts[3].substr(6), d.feature_chunk) || d.feature_chunk <= 0)
      return false;
  } else {
    // One chunk: the width is not recorded (it changes nothing then); any width >= out has one.
    d.feature_chunk = d.out > default_feature_chunk ? d.out : default_feature_chunk;
  }
  spec.kind = LayerSpec::Kind::dense;
  spec.dense = d;
  return true;
}

}  // namespace detail

/**
 * A model's layers as run-time values: what a model file or a checkpoint says the model is.
 *
 * Parsed from the lines of Sequential::describe() (the "layer.N" entries of a file's header) and
 * checked: every line is a layer this build knows and describes back to the same text, the first
 * layer is Dense, each Dense takes the width the layer before it gives, and the parameter count
 * fits 62 bits. Nothing is allocated from the sizes.
 */
struct ModelArchitecture {
  std::vector<LayerSpec> layers;
  int input_width = 0;
  int output_width = 0;
  std::uint64_t parameter_count = 0;  ///< of the whole model

  /// The lines describe() gives for this architecture.
  [[nodiscard]] std::vector<std::string> describe() const {
    std::vector<std::string> out;
    int width = input_width;
    for (const LayerSpec& l : layers) {
      out.push_back(l.describe(width));
      if (l.kind == LayerSpec::Kind::dense) width = l.dense.out;
    }
    return out;
  }

  /**
   * Parses and checks `lines` (see the class comment).
   * @param who starts every error message ("reprosgd::read_model_info: m.rsgdm").
   * @throws checkpoint_error "<who>: layer.2 is \"conv(3)\", not a layer this build knows" and the like
   */
  [[nodiscard]] static ModelArchitecture parse(const std::vector<std::string>& lines, const std::string& who) {
    const auto fail = [&](const std::string& what) -> void { throw checkpoint_error(who + ": " + what); };
    ModelArchitecture a;
    if (lines.empty()) fail("the model has no layers");
    int width = 0;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      LayerSpec s;
      const std::string key = "layer." + std::to_string(i);
      if (!detail::parse_layer(lines[i], s)) fail(key + " is \"" + lines[i] + "\", not a layer this build knows");
      if (i == 0) {
        if (s.kind != LayerSpec::Kind::dense) fail("layer.0 is \"" + lines[i] + "\": the first layer must be dense");
        width = s.dense.in;
        a.input_width = width;
      }
      if (s.kind == LayerSpec::Kind::dense) {
        if (s.dense.in != width)
          fail(key + " is \"" + lines[i] + "\" but the layer before it gives " + std::to_string(width) + " features");
        a.parameter_count += (static_cast<std::uint64_t>(s.dense.in) + 1) * static_cast<std::uint64_t>(s.dense.out);
        if (a.parameter_count > (std::uint64_t{1} << 62)) fail("the model has more than 2^62 parameters");
        width = s.dense.out;
      }
      if (s.describe(width) != lines[i]) fail(key + " is \"" + lines[i] + "\", which is not how this build writes it");
      a.layers.push_back(s);
    }
    a.output_width = width;
    return a;
  }
};

namespace detail {
template <class MemorySpace, std::size_t H, bool WithDropout>
auto make_mlp_of(const ModelArchitecture& a) {
  constexpr std::size_t per = WithDropout ? 3 : 2;
  auto hidden = [&]<std::size_t... I>(std::index_sequence<I...>) {
    if constexpr (WithDropout)
      return std::tuple_cat(std::make_tuple(a.layers[I * per].dense, a.layers[I * per + 1].activation,
                                            a.layers[I * per + 2].dropout)...);
    else
      return std::tuple_cat(std::make_tuple(a.layers[I * per].dense, a.layers[I * per + 1].activation)...);
  }(std::make_index_sequence<H>{});
  auto all = std::tuple_cat(hidden, std::make_tuple(a.layers[H * per].dense));
  return std::apply([](auto... layers) { return make_sequential<MemorySpace>(layers...); }, all);
}
/// Whether `a` is H blocks of (Dense, activation[, Dropout]) and a last Dense.
inline bool is_mlp_shape(const ModelArchitecture& a, std::size_t h, bool with_dropout) {
  const std::size_t per = with_dropout ? 3 : 2;
  if (a.layers.size() != h * per + 1) return false;
  using K = LayerSpec::Kind;
  for (std::size_t b = 0; b < h; ++b) {
    if (a.layers[b * per].kind != K::dense || a.layers[b * per + 1].kind != K::activation) return false;
    if (with_dropout && a.layers[b * per + 2].kind != K::dropout) return false;
  }
  return a.layers.back().kind == K::dense;
}
}  // namespace detail

/// The most hidden blocks with_mlp() builds.
inline constexpr std::size_t with_mlp_max_hidden = 3;

/**
 * Builds the model of architecture `a` with its parameters in `MemorySpace` (zero: load_model()
 * fills them) and returns `f(model)`. The shapes it builds are the MLPs train_mlp trains: one
 * Dense, or 1 to 3 hidden blocks of Dense, an activation and (optionally, in every block) Dropout,
 * then a Dense — `BasicSequential<MemorySpace, Dense, ActivationFn, Dropout, ..., Dense>`. Every
 * shape is a separate instantiation of `f`. For other architectures write the Sequential yourself
 * and load_model() into it.
 *
 * @tparam MemorySpace where the parameters live: the memory of the execution space that will run
 *         the model (Inference needs to read them); the default execution space's by default.
 * @throws config_error naming the architecture when it is not one of these shapes
 *
 * **Example**:
 * @code
 * const reprosgd::ModelInfo info = reprosgd::read_model_info("surrogate.rsgdm");
 * reprosgd::with_mlp(info.architecture, [&](auto model) {
 *   const reprosgd::Normalization norm = reprosgd::load_model("surrogate.rsgdm", model);
 *   reprosgd::Inference inference(model, norm);
 *   inference.predict(x, y);
 * });
 * @endcode
 */
template <class MemorySpace = Kokkos::DefaultExecutionSpace::memory_space, class F>
decltype(auto) with_mlp(const ModelArchitecture& a, F&& f) {
  using M = MemorySpace;
  if (detail::is_mlp_shape(a, 0, false)) return f(detail::make_mlp_of<M, 0, false>(a));
  if (detail::is_mlp_shape(a, 1, true)) return f(detail::make_mlp_of<M, 1, true>(a));
  if (detail::is_mlp_shape(a, 2, true)) return f(detail::make_mlp_of<M, 2, true>(a));
  if (detail::is_mlp_shape(a, 3, true)) return f(detail::make_mlp_of<M, 3, true>(a));
  if (detail::is_mlp_shape(a, 1, false)) return f(detail::make_mlp_of<M, 1, false>(a));
  if (detail::is_mlp_shape(a, 2, false)) return f(detail::make_mlp_of<M, 2, false>(a));
  if (detail::is_mlp_shape(a, 3, false)) return f(detail::make_mlp_of<M, 3, false>(a));
  std::string text;
  for (const std::string& l : a.describe()) text += (text.empty() ? "" : ", ") + l;
  throw config_error("reprosgd::with_mlp: the architecture [" + text +
                     "] is not one it builds (a Dense, or 1 to 3 blocks of Dense, activation and optional Dropout "
                     "followed by a Dense); build the Sequential yourself and load_model() into it");
}

REPROSGD_END_NAMESPACE
