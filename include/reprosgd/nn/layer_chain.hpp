// SPDX-License-Identifier: BSD-3-Clause
/// @file LayerChain: layers applied in order inside one layer of a model, with an optional
/// shortcut (identity or a projection) added to the last one's output. It is the arithmetic of
/// the residual blocks (nn/residual.hpp: layers fixed at compile time) and of a network composed at
/// run time (nn/network.hpp), written once over a list of layers that can be visited by position.
#pragma once

#include <reprosgd/concepts/layer.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/kernels/elementwise.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/nn/group_layer.hpp>
#include <reprosgd/nn/layer_traits.hpp>
#include <reprosgd/nn/model_group.hpp>
#include <reprosgd/reduction/local_sum.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

/// What a LayerChain adds to its last layer's output.
enum class Shortcut {
  none,        ///< y = chain(x)
  identity,    ///< y = chain(x) + x (the chain keeps the width)
  projection,  ///< y = chain(x) + projection(x)
};

namespace detail {

/**
 * A chain of `list.size()` layers, `list` being visitable by position (every member of the Layer
 * concept but name(), output_width() and describe(), which the layers built on it add): `list.visit(j, f)` calls
 * f(layer j) with the layer's own type, j == size() being the projection (Shortcut::projection).
 *
 * **Keys**: layer j of the chain draws its random numbers (initialisation, dropout) as layer
 * (i + 1) * 256 + j, i being the chain's own layer number in its model; the projection as 255.
 * Chains hold at most 254 layers, and a model of fewer than 256 layers keeps every key distinct
 * (a nested chain's keys start at 65,792).
 * **Model groups**: the inner layers are split over a model group as a Sequential's are
 * (nn/group_layer.hpp): a convolution or dense layer holds its features' parameters, gathered after
 * its forward; the chain's parameters on rank g are its layers' held parameters in order
 * (offsets(width, g)).
 * **Memory**: the outputs of the chain's layers (and the projection's) are kept from forward to
 * backward in the stash, then the inner layers' own stashes; the scratch holds two gradient
 * buffers of the widest width, then the largest scratch an inner layer asks for.
 */
template <class List>
class LayerChain {
 public:
  using list_type = List;
  LayerChain() = default;
  LayerChain(List list, Shortcut shortcut) : list_(std::move(list)), shortcut_(shortcut) {}

  [[nodiscard]] const List& list() const noexcept { return list_; }
  [[nodiscard]] Shortcut shortcut() const noexcept { return shortcut_; }
  [[nodiscard]] std::size_t size() const noexcept { return list_.size(); }

  /// w[0] = width, w[j + 1] the output width of layer j (its output_width's checks and messages).
  [[nodiscard]] std::vector<int> widths(int width) const {
    check_size();
    std::vector<int> w(size() + 1);
    w[0] = width;
    for (std::size_t j = 0; j < size(); ++j) list_.visit(j, [&](const auto& layer) { w[j + 1] = layer.output_width(w[j]); });
    return w;
  }
  /// The chain's output width, its shortcut checked; `who` names the layer in the messages.
  [[nodiscard]] int checked_output_width(int width, const char* who) const {
    const int out = widths(width).back();
    if (shortcut_ == Shortcut::projection) {
      int shortcut = 0;
      list_.visit(size(), [&](const auto& p) { shortcut = p.output_width(width); });
      if (shortcut != out)
        throw config_error(std::string(who) + ": the block maps " + std::to_string(width) + " inputs to " +
                           std::to_string(out) + " outputs but the projection to " + std::to_string(shortcut));
    } else if (shortcut_ == Shortcut::identity && out != width) {
      throw config_error(std::string(who) + ": the block maps " + std::to_string(width) + " inputs to " +
                         std::to_string(out) +
                         " outputs; the identity shortcut needs as many outputs as inputs (add a projection)");
    }
    return out;
  }
  /// Where each layer's parameters start in the chain's slice ([size()]: the projection's; [size() + 1]: the end),
  /// of the whole chain or (g) of what model rank g holds.
  [[nodiscard]] std::vector<std::size_t> offsets(int width, GroupPlace g = {}) const {
    const std::vector<int> w = widths(width);
    std::vector<std::size_t> o(size() + 2, 0);
    for (std::size_t j = 0; j < size(); ++j)
      list_.visit(j, [&](const auto& layer) { o[j + 1] = o[j] + detail::held_parameter_count(layer, w[j], g); });
    o[size() + 1] = o[size()];
    if (projected()) list_.visit(size(), [&](const auto& p) { o[size() + 1] += detail::held_parameter_count(p, width, g); });
    return o;
  }
  [[nodiscard]] std::size_t parameter_count(int width) const { return offsets(width).back(); }
  /// The parameters model rank g holds (detail::GroupComposite).
  [[nodiscard]] std::size_t held_parameter_count(int width, GroupPlace g) const { return offsets(width, g).back(); }
  /// Where rank g's parameters lie in the whole model's buffer, the chain's starting at `canonical`
  /// there and at `local` in the rank's (advanced past them): its layers' runs in order.
  void append_held_runs(int width, std::size_t canonical, std::size_t& local, GroupPlace g,
                        std::vector<CanonicalRun>& runs) const {
    const std::vector<std::size_t> o = offsets(width);
    for_all(width, [&](const auto& layer, std::size_t j, int in) {
      detail::append_held_runs(layer, in, canonical + o[j], local, g, runs);
    });
  }
  /// The group buffers of the inner layers (detail::add_group_buffers).
  void add_group_buffers(int width, long rows, GroupPlace g, bool input_gradient, GroupBuffers& b) const {
    for_all(width, [&](const auto& layer, std::size_t j, int in) {
      detail::add_group_buffers(layer, in, rows, g, input_gradient || (j > 0 && j < size()), b);
    });
  }
  /// The layers' descriptions joined by ';' (and ";projection=" the projection's).
  [[nodiscard]] std::string describe_layers(int width) const {
    const std::vector<int> w = widths(width);
    std::string d;
    for_all(width, [&](const auto& layer, std::size_t j, int in) {
      d += j == size() ? ";projection=" + layer.describe(in) : (j == 0 ? "" : ";") + layer.describe(in);
    });
    return d;
  }

  [[nodiscard]] std::size_t scratch_size(int width, long rows) const {
    return 2 * gradient_floats(width, rows) + inner_scratch(width, rows);
  }
  [[nodiscard]] std::size_t stash_size(int width, long rows) const {
    const std::vector<int> w = widths(width);
    std::size_t n = 0;
    for (std::size_t j = 1; j <= size(); ++j) n += static_cast<std::size_t>(rows) * static_cast<std::size_t>(w[j]);
    if (projected()) n += static_cast<std::size_t>(rows) * static_cast<std::size_t>(w[size()]);
    for_all(width, [&](const auto& layer, std::size_t, int in) {
      if constexpr (KeepsActivations<std::remove_cvref_t<decltype(layer)>>) n += layer.stash_size(in, rows);
    });
    return n;
  }
  /// The statistics runs of the inner layers, in the parameters rank g holds.
  [[nodiscard]] std::vector<StatisticsRun> statistics_runs(int width, GroupPlace g = {}) const {
    const std::vector<std::size_t> o = offsets(width, g);
    std::vector<StatisticsRun> runs;
    for_all(width, [&](const auto& layer, std::size_t j, int in) {
      if constexpr (KeepsStatistics<std::remove_cvref_t<decltype(layer)>>)
        for (StatisticsRun r : held_statistics_runs(layer, in, g)) runs.push_back({o[j] + r.offset, r.count});
    });
    return runs;
  }
  /// The inner layers' update_statistics, `next` filled in statistics_runs() order.
  template <class Space, class P, class G>
  void update_statistics(const Space& space, const P& params, const G& grads, int width, float* next,
                         GroupPlace g = {}) const {
    const std::vector<std::size_t> o = offsets(width, g);
    for_all(width, [&](const auto& layer, std::size_t j, int in) {
      if constexpr (KeepsStatistics<std::remove_cvref_t<decltype(layer)>>) {
        update_held_statistics(layer, space, sub(params, o, j), sub(grads, o, j), in, next, g);
        for (StatisticsRun r : held_statistics_runs(layer, in, g)) next += r.count;
      }
    });
  }

  /// Draw the parameters rank g holds (every inner layer keyed as in the whole model). @deterministic
  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& params, int width, GroupPlace g = {}) const {
    const std::vector<std::size_t> o = offsets(width, g);
    for_all(width, [&](const auto& layer, std::size_t j, int in) {
      initialize_held(layer, inner(ctx, j), sub(params, o, j), in, g);
    });
  }

  /// y = chain(x) (+ x, + projection(x)) in one process; the layers' outputs stay in `stash` for backward.
  template <class Ctx, class P, class In, class Out, class Scratch, class Stash>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y, const Scratch& scratch,
               const Stash& stash) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    LocalExactSum<exec> sum;
    LocalModelGroup<exec> group(ctx.space, sum);
    forward(ctx, params, x, y, scratch, stash, group, BufferRef<typename exec::memory_space>(nullptr, 0));
  }
  /// The same across a model group, `params` the parameters this rank holds: a sharded inner
  /// layer's columns go through `local_out` (add_group_buffers) to the group's gather, so every
  /// rank continues with the whole output. @collective over group
  template <class Ctx, class P, class In, class Out, class Scratch, class Stash, ModelGroup Group, class LocalOut>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y, const Scratch& scratch, const Stash& stash,
               Group& group, const LocalOut& local_out) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    const Plan<mem> plan(*this, static_cast<int>(x.extent(1)), static_cast<long>(x.extent(0)), scratch.data(), stash.data(),
                         place(group));
    for_all(plan.w[0], [&](const auto& layer, std::size_t j, int) {
      forward_held(layer, inner(ctx, j), sub(params, plan.o, j), plan.input(j, x), plan.output(j), plan.inner_scratch(),
                   plan.inner_stash(j), group, local_out);
    });
    const long n = plan.rows * plan.w[size()];
    const float* last = plan.out[size() - 1];
    if (shortcut_ == Shortcut::none) Kokkos::deep_copy(ctx.space, MatrixRef<mem>(y.data(), plan.rows, plan.w[size()]), plan.output(size() - 1));
    else add_elements(ctx.space, n, last, shortcut_ == Shortcut::identity ? x.data() : plan.out[size()], y.data());
  }

  /// The layers' parameter gradients; gx (unless empty: the model's first layer) = the chain's
  /// input gradient (+ gy, + the projection's input gradient). The outputs come from `stash`. One process.
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP, class Scratch, class Stash>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out& y, const GOut& gy, const GIn& gx,
                const GP& gparams, const Scratch& scratch, const Stash& stash) const {
    using exec = std::remove_cvref_t<decltype(ctx.space)>;
    LocalExactSum<exec> sum;
    LocalModelGroup<exec> group(ctx.space, sum);
    GroupBuffers b;
    add_group_buffers(static_cast<int>(x.extent(1)), static_cast<long>(x.extent(0)), GroupPlace{}, gx.extent(0) > 0, b);
    backward(ctx, params, x, y, gy, gx, gparams, scratch, stash, group, own(ctx, b.partials));
  }
  /// The same across a model group, `gparams` laid out as the parameters this rank holds; the
  /// sharded inner layers' group backward uses `partials` (add_group_buffers). @collective over group
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP, class Scratch, class Stash,
            ModelGroup Group, class Partials>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out&, const GOut& gy, const GIn& gx,
                const GP& gparams, const Scratch& scratch, const Stash& stash, Group& group, const Partials& partials) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    const long rows = static_cast<long>(x.extent(0));
    const int width = static_cast<int>(x.extent(1));
    const Plan<mem> plan(*this, width, rows, scratch.data(), stash.data(), place(group));
    const bool first = gx.extent(0) == 0;
    MatrixRef<mem> g(gy.data(), rows, plan.w[size()]);
    bool use_a = true;
    for (std::size_t k = size(); k-- > 0;) {
      list_.visit(k, [&](const auto& layer) {
        float* target = k == 0 ? gx.data() : (use_a ? plan.grad_a : plan.grad_b);
        const MatrixRef<mem> gin(target, k == 0 && first ? 0 : rows, k == 0 && first ? 0 : plan.w[k]);
        backward_held(layer, inner(ctx, k), sub(params, plan.o, k), plan.input(k, x), plan.output(k), g, gin,
                      sub(gparams, plan.o, k), plan.inner_scratch(), plan.inner_stash(k), group, partials);
        g = gin;
      });
      use_a = !use_a;
    }
    if (shortcut_ == Shortcut::projection) {
      // The projection's input gradient into the scratch, then added to the chain's.
      list_.visit(size(), [&](const auto& p) {
        const MatrixRef<mem> gin(plan.grad_a, first ? 0 : rows, first ? 0 : width);
        backward_held(p, inner(ctx, projection_key), sub(params, plan.o, size()), plan.input(size(), x),
                      plan.output(size()), MatrixRef<mem>(gy.data(), rows, plan.w[size()]), gin,
                      sub(gparams, plan.o, size()), plan.inner_scratch(), plan.inner_stash(size()), group, partials);
      });
      if (!first) add_elements(ctx.space, rows * width, gx.data(), plan.grad_a, gx.data());
    } else if (shortcut_ == Shortcut::identity && !first) {
      add_elements(ctx.space, rows * width, gx.data(), gy.data(), gx.data());
    }
  }

  /// The Layer concept's forward: with scratch and stash of its own.
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P& params, const In& x, const Out& y) const {
    const int width = static_cast<int>(x.extent(1));
    const long rows = static_cast<long>(x.extent(0));
    forward(ctx, params, x, y, own(ctx, scratch_size(width, rows)), own(ctx, stash_size(width, rows)));
  }
  /// The Layer concept's backward: forward again into a stash of its own (the same bits), then backward.
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P& params, const In& x, const Out& y, const GOut& gy, const GIn& gx,
                const GP& gparams) const {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    const int width = static_cast<int>(x.extent(1));
    const long rows = static_cast<long>(x.extent(0));
    const auto scratch = own(ctx, scratch_size(width, rows)), stash = own(ctx, stash_size(width, rows));
    const Matrix<mem> again("reprosgd::LayerChain::output", rows, static_cast<long>(y.extent(1)));
    forward(ctx, params, x, again, scratch, stash);
    backward(ctx, params, x, y, gy, gx, gparams, scratch, stash);
  }

  /// The context of layer j of the chain: its key (above).
  template <class Ctx>
  static Ctx inner(Ctx ctx, std::size_t j) {
    ctx.layer = (ctx.layer + 1) * 256u + static_cast<std::uint32_t>(j);
    return ctx;
  }
  static constexpr std::size_t max_layers = 254;
  static constexpr std::size_t projection_key = 255;

 private:
  [[nodiscard]] bool projected() const noexcept { return shortcut_ == Shortcut::projection; }
  void check_size() const {
    if (size() == 0 || size() > max_layers)
      throw config_error("reprosgd::LayerChain: a chain has 1 to " + std::to_string(max_layers) + " layers, got " +
                         std::to_string(size()));
  }

  // Where everything lives for a call: widths, parameter offsets, the layers' outputs in the stash
  // (out[j]: layer j's; out[size()]: the projection's), the inner stashes after them, the two
  // gradient buffers and the inner scratch in the scratch.
  template <class Mem>
  struct Plan {
    std::vector<int> w;
    std::vector<std::size_t> o;
    long rows;
    std::vector<float*> out, stash;
    std::vector<std::size_t> stash_n;
    float* grad_a;
    float* grad_b;
    float* scratch;
    std::size_t scratch_n;

    Plan(const LayerChain& c, int width, long rows_, float* scratch_, float* stash_, GroupPlace g)
        : w(c.widths(width)), o(c.offsets(width, g)), rows(rows_), out(c.size() + 1, nullptr), stash(c.size() + 1, nullptr),
          stash_n(c.size() + 1, 0) {
      const std::size_t n = c.size();
      float* s = stash_;
      for (std::size_t j = 0; j < n; ++j) {
        out[j] = s;
        s += rows * w[j + 1];
      }
      if (c.projected()) {
        out[n] = s;
        s += rows * w[n];
      }
      c.for_all(width, [&](const auto& layer, std::size_t j, int in) {
        if constexpr (KeepsActivations<std::remove_cvref_t<decltype(layer)>>) {
          stash[j] = s;
          stash_n[j] = layer.stash_size(in, rows);
          s += stash_n[j];
        }
      });
      const std::size_t gf = c.gradient_floats(width, rows);
      grad_a = scratch_;
      grad_b = scratch_ + gf;
      scratch = scratch_ + 2 * gf;
      scratch_n = c.inner_scratch(width, rows);
    }
    /// Layer j's input: x for the first layer and the projection, else layer j - 1's output.
    template <class In>
    MatrixRef<Mem> input(std::size_t j, const In& x) const {
      if (j == 0 || j + 1 == out.size()) return MatrixRef<Mem>(x.data(), rows, w[0]);
      return MatrixRef<Mem>(out[j - 1], rows, w[j]);
    }
    MatrixRef<Mem> output(std::size_t j) const {
      return MatrixRef<Mem>(out[j], rows, w[j + 1 < out.size() ? j + 1 : j]);
    }
    BufferRef<Mem> inner_scratch() const { return BufferRef<Mem>(scratch, scratch_n); }
    BufferRef<Mem> inner_stash(std::size_t j) const { return BufferRef<Mem>(stash[j], stash_n[j]); }
  };

  template <ModelGroup Group>
  static GroupPlace place(const Group& group) {
    return GroupPlace{group.model_rank(), group.model_size()};
  }

  [[nodiscard]] std::size_t gradient_floats(int width, long rows) const {
    const std::vector<int> w = widths(width);
    return static_cast<std::size_t>(rows) * static_cast<std::size_t>(*std::max_element(w.begin(), w.end()));
  }
  [[nodiscard]] std::size_t inner_scratch(int width, long rows) const {
    std::size_t n = 0;
    for_all(width, [&](const auto& layer, std::size_t, int in) {
      if constexpr (UsesScratch<std::remove_cvref_t<decltype(layer)>>)
        n = std::max<std::size_t>(n, layer.scratch_size(in, rows));
    });
    return n;
  }
  // f(layer, position, input width) for every layer, then the projection (position size()).
  template <class F>
  void for_all(int width, F&& f) const {
    const std::vector<int> w = widths(width);
    for (std::size_t j = 0; j < size(); ++j) list_.visit(j, [&](const auto& layer) { f(layer, j, w[j]); });
    if (projected()) list_.visit(size(), [&](const auto& p) { f(p, size(), width); });
  }
  template <class P>
  static auto sub(const P& params, const std::vector<std::size_t>& o, std::size_t j) {
    using mem = typename P::memory_space;
    return BufferRef<mem>(params.data() + o[j], o[j + 1] - o[j]);
  }
  template <class Ctx>
  static auto own(const Ctx& ctx, std::size_t n) {
    using mem = typename std::remove_cvref_t<decltype(ctx.space)>::memory_space;
    return Buffer<mem>(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("reprosgd::LayerChain::memory")), n);
  }

  List list_{};
  Shortcut shortcut_ = Shortcut::none;
};

/// A layer built on LayerChain (Residual, Network): a Sequential whose only layer is one with no
/// shortcut takes its layers as the model's own (nn/sequential.hpp).
template <class L>
concept LayerChainOfList = std::derived_from<L, LayerChain<typename L::list_type>>;

}  // namespace detail
REPROSGD_END_NAMESPACE
