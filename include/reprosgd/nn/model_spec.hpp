// SPDX-License-Identifier: BSD-3-Clause
/// @file parse_network: a Network from a one-line description, sizes inferred from the input shape
/// ("conv(32,3,p1),bn,relu,maxpool(2),res(conv(32,3,p1),bn,relu),flatten,dense(10)").
#pragma once

#include <reprosgd/error.hpp>
#include <reprosgd/kernels/image.hpp>
#include <reprosgd/nn/network.hpp>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// How parse_network builds the layers it reads.
struct NetworkSpecOptions {
  int feature_chunk = default_feature_chunk;  ///< Dense's feature chunk, Conv2D's channel chunk
};

namespace detail {

/// What flows between layers while parsing: an image, or `features` values.
struct SpecShape {
  bool image = false;
  ImageShape img{};
  int features = 0;

  [[nodiscard]] int width() const { return image ? static_cast<int>(img.size()) : features; }
  [[nodiscard]] std::string text() const { return image ? img.text() : std::to_string(features) + " features"; }
  friend bool operator==(const SpecShape& a, const SpecShape& b) {
    return a.image == b.image && (a.image ? a.img == b.img : a.features == b.features);
  }
};

class SpecParser {
 public:
  SpecParser(std::string_view text, NetworkSpecOptions options) : text_(text), options_(options) {}

  // A list of items up to the end of the text or a ')' (nested: `depth` > 0).
  std::vector<AnyLayer> list(SpecShape& shape, int depth) {
    std::vector<AnyLayer> layers;
    while (true) {
      skip_space();
      if (at_end() || peek() == ')' || peek() == ',') fail(pos_, "", "expected a layer");
      layers.push_back(item(shape, depth));
      skip_space();
      if (at_end()) break;
      if (peek() == ')') {
        if (depth == 0) fail(pos_, ")", "a ')' without its '('");
        break;
      }
      if (peek() != ',') fail(pos_, std::string(1, peek()), "expected ',' between layers");
      ++pos_;
    }
    return layers;
  }
  [[nodiscard]] bool at_end() const { return pos_ >= text_.size(); }

 private:
  struct Token {
    std::size_t at;
    std::string text;
  };

  AnyLayer item(SpecShape& shape, int depth) {
    const std::size_t start = pos_;
    std::string name;
    while (!at_end() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_')) name += text_[pos_++];
    if (name.empty()) fail(start, std::string(1, peek()), "expected a layer name");
    const bool has_args = !at_end() && peek() == '(';
    if (name == "res") {
      if (!has_args) fail(start, name, "res needs a block: res(LAYER,...)");
      ++pos_;
      return residual(shape, start, depth);
    }
    std::vector<Token> args;
    if (has_args) args = arguments();
    const std::string whole(text_.substr(start, pos_ - start));
    auto want = [&](std::size_t lo, std::size_t hi, const char* form) {
      if (args.size() < lo || args.size() > hi) fail(start, whole, std::string("expected ") + form);
    };
    try {
      if (name == "conv") {
        want(2, 4, "conv(OUT,K[,sS][,pP])");
        need_image(shape, start, whole);
        const int out = integer(args[0], whole), k = integer(args[1], whole);
        int s = 1, p = 0;
        options(args, 2, whole, s, p);
        Conv2D conv{shape.img, out, k, s, p, Init::he_normal, options_.feature_chunk};
        (void)conv.output_width(shape.width());
        shape.img = conv.output_shape();
        return {conv};
      }
      if (name == "maxpool" || name == "avgpool") {
        want(1, 3, name == "maxpool" ? "maxpool(K[,sS][,pP])" : "avgpool(K[,sS][,pP])");
        need_image(shape, start, whole);
        const int k = integer(args[0], whole);
        int s = 0, p = 0;
        options(args, 1, whole, s, p);
        if (name == "maxpool") {
          MaxPool2D pool{shape.img, k, s, p};
          (void)pool.output_width(shape.width());
          shape.img = pool.output_shape();
          return {pool};
        }
        AvgPool2D pool{shape.img, k, s, p};
        (void)pool.output_width(shape.width());
        shape.img = pool.output_shape();
        return {pool};
      }
      if (name == "gap" || name == "flatten") {
        want(0, 0, name == "gap" ? "gap without arguments" : "flatten without arguments");
        need_image(shape, start, whole);
        if (name == "gap") {
          const GlobalAvgPool g{shape.img};
          shape = {false, {}, shape.img.channels};
          return {g};
        }
        const Flatten f{shape.img};
        shape = {false, {}, shape.width()};
        return {f};
      }
      if (name == "dense") {
        want(1, 1, "dense(OUT)");
        if (shape.image)
          fail(start, whole, "dense needs features but receives a " + shape.img.text() + " image (put flatten or gap before it)");
        const Dense d{shape.features, integer(args[0], whole), Init::he_normal, options_.feature_chunk};
        shape.features = d.output_width(shape.features);
        return {d};
      }
      if (name == "bn") {
        want(0, 0, "bn without arguments");
        if (shape.image) return {BatchNorm2D{shape.img}};
        return {BatchNorm1D{shape.features}};
      }
      if (name == "ln") {
        want(0, 0, "ln without arguments");
        return {LayerNorm{shape.width()}};
      }
      if (name == "relu" || name == "tanh" || name == "sigmoid") {
        want(0, 0, (name + " without arguments").c_str());
        return {ActivationFn{name == "relu" ? Activation::relu : name == "tanh" ? Activation::tanh : Activation::sigmoid}};
      }
      if (name == "dropout") {
        want(1, 1, "dropout(P)");
        Dropout d{probability(args[0], whole)};
        (void)d.output_width(shape.width());
        return {d};
      }
    } catch (const config_error& e) {
      // A layer's own check (a kernel larger than the padded input, a bad probability): at its token.
      const std::string what = e.what();
      if (what.rfind("reprosgd::parse_network", 0) == 0) throw;
      fail(start, whole, what);
    }
    fail(start, name,
         "unknown layer (conv, maxpool, avgpool, gap, flatten, dense, bn, ln, relu, tanh, sigmoid, dropout, res)");
  }

  // res(...): the block from the current shape; the identity shortcut when the block keeps the
  // shape, else a projection: a 1x1 convolution with the stride that gives the block's output
  // shape (images), a dense layer (features).
  AnyLayer residual(SpecShape& shape, std::size_t start, int depth) {
    const SpecShape in = shape;
    std::vector<AnyLayer> block = list(shape, depth + 1);
    if (at_end() || peek() != ')') fail(start, "res(", "this '(' is never closed");
    ++pos_;
    const std::string whole(text_.substr(start, pos_ - start));
    Shortcut shortcut = Shortcut::identity;
    if (!(shape == in)) {
      shortcut = Shortcut::projection;
      if (in.image != shape.image)
        fail(start, whole, "the block maps " + in.text() + " to " + shape.text() + ": a shortcut needs both images or both features");
      if (!in.image) {
        block.push_back({Dense{in.features, shape.features, Init::he_normal, options_.feature_chunk}});
      } else {
        int stride = 0;
        for (int s = 1; s <= std::max(in.img.height, in.img.width) && stride == 0; ++s)
          if ((in.img.height - 1) / s + 1 == shape.img.height && (in.img.width - 1) / s + 1 == shape.img.width) stride = s;
        if (stride == 0)
          fail(start, whole, "the block maps " + in.img.text() + " to " + shape.img.text() +
                                 ": no 1x1 convolution on the shortcut gives that shape");
        block.push_back({Conv2D{in.img, shape.img.channels, 1, stride, 0, Init::he_normal, options_.feature_chunk}});
      }
    }
    if (block.size() - (shortcut == Shortcut::projection ? 1 : 0) > LayerChain<AnyLayers>::max_layers)
      fail(start, whole, "a block has at most 254 layers");
    return {std::make_shared<const Network>(std::move(block), shortcut, in.image ? in.img : ImageShape{})};
  }

  std::vector<Token> arguments() {
    ++pos_;  // '('
    std::vector<Token> args;
    while (true) {
      skip_space();
      const std::size_t at = pos_;
      std::string t;
      while (!at_end() && peek() != ',' && peek() != ')' && !std::isspace(static_cast<unsigned char>(peek()))) t += text_[pos_++];
      skip_space();
      if (t.empty()) fail(at, at_end() ? "" : std::string(1, peek()), "expected an argument");
      args.push_back({at, t});
      if (at_end()) fail(at, t, "this argument list is never closed");
      if (peek() == ')') {
        ++pos_;
        return args;
      }
      ++pos_;  // ','
    }
  }

  int integer(const Token& t, const std::string& whole, long lo = 1) const {
    char* end = nullptr;
    const long v = std::strtol(t.text.c_str(), &end, 10);
    if (t.text.empty() || *end != '\0' || v < lo || v > 1000000000)
      fail(t.at, t.text, "'" + t.text + "' is not " + (lo == 0 ? "a non-negative" : "a positive") + " integer (in " + whole + ")");
    return static_cast<int>(v);
  }
  float probability(const Token& t, const std::string& whole) const {
    char* end = nullptr;
    const float v = std::strtof(t.text.c_str(), &end);
    if (t.text.empty() || *end != '\0') fail(t.at, t.text, "'" + t.text + "' is not a number (in " + whole + ")");
    return v;
  }
  // The optional sS and pP arguments from args[first] on.
  void options(const std::vector<Token>& args, std::size_t first, const std::string& whole, int& stride, int& padding) const {
    bool seen_s = false, seen_p = false;
    for (std::size_t i = first; i < args.size(); ++i) {
      const Token& a = args[i];
      const char kind = a.text.empty() ? '\0' : a.text[0];
      if ((kind != 's' && kind != 'p') || (kind == 's' ? seen_s : seen_p))
        fail(a.at, a.text, "expected sSTRIDE or pPADDING, once each (in " + whole + ")");
      const Token value{a.at + 1, a.text.substr(1)};
      if (kind == 's') stride = integer(value, whole), seen_s = true;
      else padding = integer(value, whole, 0), seen_p = true;
    }
  }
  void need_image(const SpecShape& shape, std::size_t at, const std::string& whole) const {
    if (!shape.image)
      fail(at, whole, "needs an image but receives " + std::to_string(shape.features) +
                          " features (the data's samples are not images, or a flatten/gap came before)");
  }

  [[noreturn]] void fail(std::size_t at, const std::string& token, const std::string& why) const {
    throw config_error("reprosgd::parse_network: at character " + std::to_string(at + 1) +
                       (token.empty() ? std::string() : " ('" + token + "')") + ": " + why);
  }
  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(peek()))) ++pos_;
  }
  [[nodiscard]] char peek() const { return text_[pos_]; }

  std::string_view text_;
  NetworkSpecOptions options_;
  std::size_t pos_ = 0;
};

}  // namespace detail

/**
 * The Network that `spec` describes, for samples of `input` (an image's C x H x W) or, with
 * input.size() == 0, of `features` values. Comma-separated layers, sizes inferred along the way:
 * `conv(OUT,K[,sS][,pP])`, `maxpool(K[,sS][,pP])`, `avgpool(K[,sS][,pP])` (stride default K),
 * `gap` (global average pool), `flatten`, `dense(OUT)`, `bn` (BatchNorm2D on an image, BatchNorm1D
 * on features), `ln`, `relu`, `tanh`, `sigmoid`, `dropout(P)`, and `res(LAYER,...)`, a residual
 * block: the identity shortcut when the block keeps the shape, else a projection (a 1x1
 * convolution with the stride that matches, or a dense layer). Weights are He-initialised.
 *
 * @throws config_error naming the character and the token at fault: an unknown layer, a malformed
 *         argument, a layer that does not fit its input (a kernel larger than the padded image, a
 *         dense layer on an image), e.g. "reprosgd::parse_network: at character 12 ('conv(64,9)'):
 *         reprosgd::Conv2D: kernel 9 is larger than the padded input 7x7 (input 32x7x7, padding 0)"
 */
[[nodiscard]] inline Network parse_network(std::string_view spec, ImageShape input, int features = 0,
                                           NetworkSpecOptions options = {}) {
  detail::SpecShape shape{input.size() != 0, input, input.size() != 0 ? static_cast<int>(input.size()) : features};
  if (shape.width() <= 0)
    throw config_error("reprosgd::parse_network: the input has no values (an image shape or a positive feature count)");
  const detail::SpecShape in = shape;
  detail::SpecParser parser(spec, options);
  std::vector<AnyLayer> layers = parser.list(shape, 0);
  Network net(std::move(layers), Shortcut::none, in.image ? in.img : ImageShape{});
  net.with_input_width(in.width());
  (void)net.output_width(in.width());  // every layer's checks, once more as a whole
  return net;
}

REPROSGD_END_NAMESPACE
