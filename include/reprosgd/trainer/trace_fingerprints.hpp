// SPDX-License-Identifier: BSD-3-Clause
/// @file The fingerprints a determinism trace records of the state after each step: the whole
/// model and optimizer state, and per layer its parameters, reduced gradient and optimizer state.
///
/// Why not fingerprint() itself: XXH3 over one buffer is one sequential stream, so its 0.12 ms for
/// a 5.4 MB state (one Zen 5 core) is taken from a training thread whenever every core trains, a
/// step-level trace's whole budget (2% of a 3.3 ms step) several times over. A trace fingerprint is
/// a tree instead, whose leaves any number of threads can hash, with the same bits for any number:
///
///   chunk    XXH3-128 of 64 KiB of a tensor's bytes (the last chunk of a tensor shorter);
///   tensor   XXH3-128 of its chunks' digests, in order (canonical byte order, XXH128_canonical_t);
///            the tensors are the layers' slices [canonical_parameter_offset(l), (l + 1)) of the
///            parameters, the reduced gradient and each optimizer state buffer;
///   state    XXH3-128 of the parameter tensors' digests, then for each element of the optimizer
///            state in visit() order the digests of its tensors (a buffer) or its bytes (a scalar).
///
/// The gradient is not part of the state (it is the step's input, not what the step leaves).
/// docs/diagnosis.md, "Fingerprints", states the same definition for readers of a trace.
#pragma once

#include <reprosgd/concepts/optimizer.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/fingerprint.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <any>
#include <cstring>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif
#include <thread>

REPROSGD_BEGIN_NAMESPACE

/// The fingerprints of one layer's part of the canonical state at one step (a trace's `layer` level).
struct LayerFingerprints {
  std::size_t layer = 0;   ///< index in the Sequential (layers without parameters are left out)
  Fingerprint parameters;  ///< the layer's parameters after the update
  Fingerprint gradient;    ///< its part of the reduced gradient (after the reduction, before the update)
  /// Its part of every non-empty optimizer state buffer, by the state's visit() names (Adam: "m",
  /// "v"; SGD with momentum: "velocity"). Scalars (step counts) are in the whole-state fingerprint.
  std::vector<std::pair<std::string, Fingerprint>> optimizer;
};

namespace detail {

/// The leaf size of a trace fingerprint's tree. Part of the trace format: changing it changes every
/// fingerprint a trace holds (bump trace_format_version).
inline constexpr std::size_t trace_chunk_bytes = std::size_t{64} * 1024;

/// The CPUs this process may run on (its affinity mask), or the machine's when that is unknown.
inline int available_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

/**
 * The trace fingerprints of one step's state, planned then hashed: add() the buffers (the plan
 * keeps host copies of device buffers, and references host buffers in place), hash() the chunks —
 * on any host execution space instance, in parallel, or on the calling thread — then read the
 * state's and the layers' fingerprints. The same bits however the chunks were hashed.
 */
class TraceFingerprintPlan {
 public:
  /// A plan for the layers of a model with these canonical parameter offsets (`layer_count()` and
  /// `canonical_parameter_offset(l)` are read; a shard's canonical offsets are the whole model's).
  template <class Model>
  explicit TraceFingerprintPlan(const Model& model) {
    for (std::size_t l = 0; l < model.layer_count(); ++l) {
      const std::size_t begin = model.canonical_parameter_offset(l), end = model.canonical_parameter_offset(l + 1);
      if (end > begin) slices_.push_back({l, begin, end});
    }
  }

  /// The parameters (first, once).
  template <class View>
  void add_parameters(const View& params) {
    parameters_ = add_buffer(params);
  }
  /// The reduced gradient (layer fingerprints only; not part of the state).
  template <class View>
  void add_gradient(const View& gradient) {
    gradient_ = add_buffer(gradient);
  }
  /// Every element of an optimizer state, in its visit() order: non-empty buffers sliced per layer,
  /// scalars by their bytes.
  template <class State>
  void add_optimizer_state(const State& state) {
    state.visit([&](const char* name, const auto& x) {
      using X = std::remove_cvref_t<decltype(x)>;
      if constexpr (Kokkos::is_view<X>::value) {
        if (x.extent(0) == 0) return;
        elements_.push_back({name, add_buffer(x), {}});
      } else {
        static_assert(std::is_trivially_copyable_v<X>, "an optimizer state scalar must be trivially copyable");
        Element e{name, no_buffer, std::string(sizeof x, '\0')};
        std::memcpy(e.scalar.data(), &x, sizeof x);
        elements_.push_back(std::move(e));
      }
    });
  }

  /// Hash every chunk on `space` (a host execution space instance), in parallel; fences it.
  template <class ExecSpace>
  void hash(const ExecSpace& space) {
    static_assert(is_host_space_v<ExecSpace>, "reprosgd: trace fingerprints are hashed by a host execution space");
    const Chunk* chunks = chunks_.data();
    XXH128_canonical_t* out = digests_.data();
    Kokkos::parallel_for("reprosgd::trace_fingerprints",
                         Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Static>>(space, 0, chunks_.size()),
                         [=](std::size_t i) { hash_chunk(chunks[i], &out[i]); });
    space.fence();
    hashed_ = true;
  }
  /// Hash every chunk on the calling thread.
  void hash() {
    for (std::size_t i = 0; i < chunks_.size(); ++i) hash_chunk(chunks_[i], &digests_[i]);
    hashed_ = true;
  }
  /// Whether hash_within() can be used: every buffer holds floats and the parameters' count, so
  /// that chunk r of every buffer covers the same elements.
  template <class Model>
  [[nodiscard]] bool hashable_within(const Model& model) const noexcept {
    const std::size_t n = model.canonical_parameter_offset(model.layer_count());
    return !first_chunk_.empty() && std::all_of(float_count_.begin(), float_count_.end(), [n](std::size_t c) { return c == n; });
  }
  /// Hash every chunk inside a kernel of the caller: `launch(ranges, after)` gets the elements
  /// [begin, end) of each buffer's chunk r as ranges[r] and must call after(r) once for every r,
  /// on a host thread, after the last write to those elements (an optimizer's step_ranges()).
  /// Then the optimizer's scalars are read again from `state`, as they are after the launch.
  template <class State, class Launch>
  void hash_within(const State& state, Launch&& launch) {
    std::vector<ElementRange> ranges;
    const std::size_t per_chunk = trace_chunk_bytes / sizeof(float);
    for (const Slice& sl : slices_)
      for (std::size_t at = sl.begin; at < sl.end; at += per_chunk)
        ranges.push_back({at, at + per_chunk < sl.end ? at + per_chunk : sl.end});
    launch(std::span<const ElementRange>(ranges), ChunkHasher{this});
    std::size_t k = 0;
    state.visit([&](const char*, const auto& x) {
      using X = std::remove_cvref_t<decltype(x)>;
      if constexpr (!Kokkos::is_view<X>::value) {
        while (elements_[k].buffer != no_buffer) ++k;
        std::memcpy(elements_[k++].scalar.data(), &x, sizeof x);
      }
    });
    hashed_ = true;
  }
  [[nodiscard]] bool hashed() const noexcept { return hashed_; }
  /// Release the buffers (after hash(): the digests are all that the results need).
  void drop_buffers() {
    keep_.clear();
    for (Chunk& c : chunks_) c.data = nullptr;
  }

  /// The whole state's fingerprint: the parameters and the optimizer state (after hash()).
  [[nodiscard]] Fingerprint state() const {
    Combiner whole;
    if (parameters_ != no_buffer)
      for (std::size_t i = 0; i < slices_.size(); ++i) whole.add(tensor(parameters_, i));
    for (const Element& e : elements_) {
      if (e.buffer == no_buffer) {
        whole.bytes(e.scalar.data(), e.scalar.size());
      } else {
        for (std::size_t i = 0; i < slices_.size(); ++i) whole.add(tensor(e.buffer, i));
      }
    }
    return whole.finish();
  }
  /// Each layer with parameters: its tensors' fingerprints (after hash()).
  [[nodiscard]] std::vector<LayerFingerprints> layers() const {
    std::vector<LayerFingerprints> out(slices_.size());
    for (std::size_t i = 0; i < slices_.size(); ++i) {
      out[i].layer = slices_[i].layer;
      if (parameters_ != no_buffer) out[i].parameters = tensor(parameters_, i);
      if (gradient_ != no_buffer) out[i].gradient = tensor(gradient_, i);
      for (const Element& e : elements_)
        if (e.buffer != no_buffer) out[i].optimizer.emplace_back(e.name, tensor(e.buffer, i));
    }
    return out;
  }

  /// hash_within()'s callback: chunk r of every buffer. Public only because nvcc refuses a private
  /// type in what an extended __host__ __device__ lambda captures (Sgd::update captures it).
  struct ChunkHasher {
    TraceFingerprintPlan* plan;
    void operator()(std::size_t r) const {
      for (const auto& firsts : plan->first_chunk_) {
        const std::size_t i = firsts.front() + r;
        hash_chunk(plan->chunks_[i], &plan->digests_[i]);
      }
    }
  };

 private:
  static constexpr std::size_t no_buffer = ~std::size_t{0};
  struct Slice {
    std::size_t layer, begin, end;  // elements
  };
  struct Chunk {
    const unsigned char* data;
    std::size_t bytes;
  };
  struct Element {
    std::string name;
    std::size_t buffer;  // index into first_chunk_, or no_buffer for a scalar
    std::string scalar;  // a scalar's bytes
  };
  // A chunk's digest: every path that hashes chunks (hash(), hash_within()) goes through here.
  static void hash_chunk(const Chunk& c, XXH128_canonical_t* out) {
    XXH128_canonicalFromHash(out, XXH3_128bits(c.data, c.bytes));
  }
  // XXH3-128 over digests and bytes, streamed.
  class Combiner {
   public:
    Combiner() { XXH3_128bits_reset(&state_); }
    void add(const Fingerprint& f) {
      XXH128_canonical_t c;
      XXH128_canonicalFromHash(&c, XXH128_hash_t{f.low, f.high});
      bytes(&c, sizeof c);
    }
    void bytes(const void* p, std::size_t n) {
      if (n > 0) XXH3_128bits_update(&state_, p, n);
    }
    [[nodiscard]] Fingerprint finish() const {
      const XXH128_hash_t h = XXH3_128bits_digest(&state_);
      return {h.high64, h.low64};
    }

   private:
    XXH3_state_t state_;
  };

  // Plan a buffer's chunks, slice by slice; returns its index. Device buffers are copied to the
  // host here, once; host buffers are read in place.
  template <class View>
  std::size_t add_buffer(const View& v) {
    static_assert(Kokkos::is_view<View>::value && View::rank == 1, "reprosgd: a trace fingerprints rank-1 buffers");
    const auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    keep_.emplace_back(host);
    const auto* base = reinterpret_cast<const unsigned char*>(host.data());
    constexpr std::size_t size = sizeof(typename View::value_type);
    std::vector<std::size_t> firsts;
    for (const Slice& s : slices_) {
      firsts.push_back(chunks_.size());
      const std::size_t end = s.end * size;
      for (std::size_t at = s.begin * size; at < end; at += trace_chunk_bytes)
        chunks_.push_back({base + at, at + trace_chunk_bytes < end ? trace_chunk_bytes : end - at});
    }
    firsts.push_back(chunks_.size());
    digests_.resize(chunks_.size());
    float_count_.push_back(std::is_same_v<std::remove_cv_t<typename View::value_type>, float> ? v.extent(0) : 0);
    first_chunk_.push_back(std::move(firsts));
    return first_chunk_.size() - 1;
  }
  // The fingerprint of buffer b's slice i: XXH3-128 of its chunks' digests.
  [[nodiscard]] Fingerprint tensor(std::size_t b, std::size_t i) const {
    const std::size_t first = first_chunk_[b][i], last = first_chunk_[b][i + 1];
    const XXH128_hash_t h = XXH3_128bits(digests_.data() + first, (last - first) * sizeof(XXH128_canonical_t));
    return {h.high64, h.low64};
  }

  std::vector<Slice> slices_;
  std::vector<Chunk> chunks_;
  std::vector<XXH128_canonical_t> digests_;
  std::vector<std::vector<std::size_t>> first_chunk_;  // per buffer: each slice's first chunk, then the end
  std::vector<std::size_t> float_count_;               // per buffer: its element count if floats, else 0
  std::vector<std::any> keep_;                         // the host Views the chunks point into
  std::vector<Element> elements_;
  std::size_t parameters_ = no_buffer, gradient_ = no_buffer;
  bool hashed_ = false;
};

}  // namespace detail

/**
 * The whole state's trace fingerprint (the `state` of a trace's step lines; the tree in this
 * file's comment) of a model's parameters and optimizer state in the one-process layout. Local;
 * copies device buffers to the host and hashes on the default host execution space.
 */
template <class Model, class Params, class State>
  requires Kokkos::is_view<Params>::value
[[nodiscard]] Fingerprint trace_state_fingerprint(const Model& model, const Params& params, const State& optimizer_state) {
  detail::TraceFingerprintPlan plan(model);
  plan.add_parameters(params);
  plan.add_optimizer_state(optimizer_state);
  plan.hash(Kokkos::DefaultHostExecutionSpace{});
  return plan.state();
}
/// trace_state_fingerprint of a whole (unsharded) model's own parameters.
template <class Model, class State>
  requires requires(const Model& m) { m.parameters(); }
[[nodiscard]] Fingerprint trace_state_fingerprint(const Model& model, const State& optimizer_state) {
  return trace_state_fingerprint(model, model.parameters(), optimizer_state);
}

/**
 * Per layer with parameters, the trace fingerprints of its slices of the canonical parameters,
 * reduced gradient and optimizer state buffers (a trace's `layers`). The arguments are in the
 * one-process layout: a whole model's, or the canonical copies Sharding::collect gathers. Local;
 * copies device buffers to the host and hashes on the default host execution space.
 *
 * @param model    a Sequential (its canonical layer offsets are used; it may be a shard)
 * @param params   the canonical parameters
 * @param gradient the canonical reduced gradient (same length)
 * @param optimizer_state  an optimizer state_type in the canonical layout
 */
template <class Model, class Params, class Grad, class State>
  requires Kokkos::is_view<Params>::value && Kokkos::is_view<Grad>::value
[[nodiscard]] std::vector<LayerFingerprints> layer_fingerprints(const Model& model, const Params& params,
                                                                const Grad& gradient, const State& optimizer_state) {
  detail::TraceFingerprintPlan plan(model);
  plan.add_parameters(params);
  plan.add_gradient(gradient);
  plan.add_optimizer_state(optimizer_state);
  plan.hash(Kokkos::DefaultHostExecutionSpace{});
  return plan.layers();
}

REPROSGD_END_NAMESPACE
