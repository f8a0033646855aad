// SPDX-License-Identifier: BSD-3-Clause
/// @file Sharding: the one class that maps between a model's canonical layout (the one-process
/// parameter vector, which checkpoints, fingerprints and the reduction's blocks are laid over) and
/// a rank's shard of it under a model-parallel policy.
///
/// Under any other policy the model is whole, every map here is the identity, and nothing is
/// copied. Under a ShardedParallelism each rank holds canonical_runs(model_rank) of the canonical
/// vector; collect() gathers the shards into the canonical layout on model rank 0 (for a checkpoint
/// or a fingerprint), install() takes a rank's own runs out of canonical values (after a load or a
/// buddy restore), and shard_bytes()/place_shard() move a shard through a buddy snapshot
/// (docs/parallelism.md, docs/reproducibility.md "Every reduction over the canonical layout").
#pragma once

#include <reprosgd/concepts/optimizer.hpp>
#include <reprosgd/concepts/parallelism.hpp>
#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/kernels/views.hpp>
#include <reprosgd/reduction/canonical_blocks.hpp>
#include <reprosgd/trainer/state.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

template <class X>
inline constexpr bool is_buffer_v = Kokkos::is_view<std::remove_cvref_t<X>>::value;

/// Visit two optimizer states element by element: one type, or one optimizer's state in two
/// memory spaces (`a`'s buffers are Buffer<any space>, `b`'s Buffer<BSpace>; the same order and
/// the same other members by construction).
template <class BSpace = void, class A, class B, class F>
void visit_pair(A& a, const B& b, F&& f) {
  std::vector<const void*> elements;
  b.visit([&](const char*, const auto& x) { elements.push_back(&x); });
  std::size_t i = 0;
  a.visit([&](const char*, auto& x) {
    using X = std::remove_cvref_t<decltype(x)>;
    if constexpr (std::is_same_v<A, B> || !is_buffer_v<X>)
      f(x, *static_cast<const X*>(elements[i++]));
    else
      f(x, *static_cast<const Buffer<BSpace>*>(elements[i++]));
  });
}

template <Parallelism Par>
class Sharding {
 public:
  using memory_space = typename Par::execution_space::memory_space;
  static constexpr bool sharded = ShardedParallelism<Par>;

  /// Parameters and optimizer state in the canonical layout: views of the live ones for a whole
  /// model, gathered from the model group's shards otherwise (valid where holds_canonical()).
  template <class State>
  struct Canonical {
    Buffer<memory_space> params;
    State state;
  };
  /// Canonical values being verified (a checkpoint load, a buddy restore) before install().
  template <Optimizer Opt>
  struct Staging {
    Buffer<memory_space> params;
    typename Opt::template state_type<memory_space> state;
    template <class Model>
    Staging(const Model& model, const Opt& opt)
        : params("reprosgd::Trainer::staging_params", canonical_count(model)),
          state(opt.template init<memory_space>(canonical_count(model))) {}
  };

  template <class Model>
  static bool is_shard(const Model& model) {
    if constexpr (requires { model.model_size(); }) return model.model_size() > 1;
    return false;
  }
  template <class Model>
  static std::size_t canonical_count(const Model& model) {
    if constexpr (requires { model.canonical_parameter_count(); }) return model.canonical_parameter_count();
    return model.parameter_count();
  }
  /// Whether this rank's collect() result is valid (it writes checkpoints and fingerprints).
  template <class Model>
  static bool holds_canonical(const Model& model) {
    if constexpr (sharded) return !is_shard(model) || model.model_rank() == 0;
    return true;
  }
  /// Whether this rank writes the job's checkpoint files.
  static bool writes_checkpoints(Par& par) {
    if constexpr (sharded) return par.world_rank() == 0;
    return par.rank() == 0;
  }

  /// Make the model this rank's shard under a model-parallel policy (nothing otherwise). Local.
  template <class Model>
  static void shard(Par& par, Model& model) {
    if constexpr (sharded) {
      const int q = par.model_group().model_rank(), p = par.model_group().model_size();
      if (model.model_rank() != q || model.model_size() != p) model.shard(q, p);
    }
  }

  /// Whether the model is this rank's shard and the state matches it (before fit; the verdict is
  /// the job's: `agree` is the world's logical AND). @throws config_error on every rank
  template <class Model, class State, class Agree>
  static void check(Par& par, const Model& model, const State& optimizer_state, Agree&& agree) {
    int q = 0, p = 1;
    if constexpr (sharded) {
      q = par.model_group().model_rank();
      p = par.model_group().model_size();
    }
    bool ok = true;
    if constexpr (requires { model.model_size(); }) ok = model.model_rank() == q && model.model_size() == p;
    bool state_ok = true;
    optimizer_state.visit([&](const char*, const auto& x) {
      if constexpr (is_buffer_v<decltype(x)>)
        state_ok = state_ok && (x.extent(0) == 0 || x.extent(0) == model.parameter_count());
    });
    if (!agree(ok && state_ok))
      throw config_error(std::string("reprosgd::Trainer::fit: ") +
                         (!ok ? "the model is not this rank's shard of the model group (create the state with "
                                "start(), resume() or load_checkpoint() of this Trainer)"
                              : !state_ok ? "the optimizer state does not match the model's parameters (create it "
                                            "with start(), resume() or load_checkpoint() of this Trainer)"
                                          : "another rank's model or optimizer state is not its shard"));
  }

  /// Where this rank's parameters lie in the canonical vector: the reduction's blocks (one run
  /// for a whole model).
  template <class Model>
  static CanonicalBlocks<memory_space> gradient_blocks(const Model& model) {
    if constexpr (requires { model.canonical_runs(model.model_rank()); }) {
      const auto runs = model.canonical_runs(model.model_rank());
      return {std::span<const CanonicalRun>(runs), model.canonical_parameter_count()};
    } else {
      const CanonicalRun whole{0, 0, model.parameter_count()};
      return {std::span<const CanonicalRun>(&whole, 1), model.parameter_count()};
    }
  }

  /// The canonical parameters and optimizer state (see Canonical). @collective over the model group
  template <class Model, class State>
  Canonical<State> collect(Par& par, const Model& model, const State& optimizer_state) {
    if (!is_shard(model)) return {model.parameters(), optimizer_state};
    if constexpr (sharded) {
      auto& group = par.model_group();
      const int p = model.model_size();
      std::vector<std::vector<typename Model::Run>> runs(static_cast<std::size_t>(p));
      std::vector<long> counts(static_cast<std::size_t>(p), 0);
      for (int q = 0; q < p; ++q) {
        runs[static_cast<std::size_t>(q)] = model.canonical_runs(q);
        for (const auto& r : runs[static_cast<std::size_t>(q)]) counts[static_cast<std::size_t>(q)] += static_cast<long>(r.length);
      }
      long total = 0;
      for (long c : counts) total += c;
      const std::size_t n = model.canonical_parameter_count();
      const bool root = group.model_rank() == 0;
      // The receive buffer, kept for the next checkpoint or fingerprint (model rank 0 only; its
      // size, the whole model's parameter count, changes with the model only).
      const long need = root ? total : 0;
      if (static_cast<long>(received_.extent(0)) != need)
        received_ = Kokkos::View<float*, Kokkos::HostSpace>("reprosgd::Trainer::received_shards", need);
      const auto all = received_;
      auto gather_shards = [&](const auto& local, const auto& canonical) {
        Kokkos::fence();
        group.gather_to_root(local.data(), std::span<const long>(counts), all.data());
        if (!root) return;
        long at = 0;
        for (int q = 0; q < p; ++q) {
          for (const auto& r : runs[static_cast<std::size_t>(q)])
            for (std::size_t e = 0; e < r.length; ++e) canonical(r.canonical + e) = all(at + static_cast<long>(r.local + e));
          at += counts[static_cast<std::size_t>(q)];
        }
      };
      Canonical<State> c{Buffer<memory_space>("reprosgd::Trainer::canonical_params", n), optimizer_state};
      gather_shards(model.parameters(), c.params);
      visit_pair(c.state, optimizer_state, [&](auto& canonical, const auto& mine) {
        if constexpr (is_buffer_v<decltype(mine)>) {
          if (mine.extent(0) == 0) return;
          canonical = std::remove_cvref_t<decltype(canonical)>("reprosgd::Trainer::canonical_state", n);
          gather_shards(mine, canonical);
        }
      });
      return c;
    } else {
      throw config_error("reprosgd::Trainer: the model is sharded but the parallelism policy is not model-parallel");
    }
  }

  /// The fingerprint of the canonical parameters and optimizer state, computed on model rank 0
  /// and shared with the group, so every rank returns it. @collective over the model group
  template <class Model, class State>
  Fingerprint fingerprint(Par& par, const Model& model, const State& optimizer_state) {
    const auto canonical = collect(par, model, optimizer_state);
    Fingerprint f{};
    if (holds_canonical(model)) {
      FingerprintBuilder b;
      b.add(canonical.params);
      canonical.state.visit([&](const char*, const auto& x) { b.add(x); });
      f = b.finish();
    }
    if constexpr (sharded) {
      float words[4];
      static_assert(sizeof words == sizeof f);
      std::memcpy(words, &f, sizeof f);
      par.model_group().share(words, 4, 0);
      std::memcpy(&f, words, sizeof f);
    }
    return f;
  }

  /// Install verified canonical values into the model and state (a shard takes its own runs)
  /// and set the step. Local.
  template <Optimizer Opt, class Model>
  static void install(Staging<Opt>& staging, std::uint64_t step, Model& model, const Opt& opt,
                      TrainState<Opt, memory_space>& state) {
    if (!is_shard(model)) {
      Kokkos::deep_copy(model.parameters(), staging.params);
      state.optimizer = std::move(staging.state);
    } else {
      auto local = opt.template init<memory_space>(model.parameter_count());
      const auto runs = model.canonical_runs(model.model_rank());
      take_shard(runs, staging.params, model.parameters());
      visit_pair(local, staging.state, [&](auto& mine, const auto& canonical) {
        if constexpr (is_buffer_v<decltype(mine)>) {
          if (mine.extent(0) > 0) take_shard(runs, canonical, mine);
        } else {
          mine = canonical;
        }
      });
      state.optimizer = std::move(local);
    }
    state.step = step;
  }

  /// This rank's shard as bytes, into `out` (resized to fit, written in place): its parameters,
  /// then every optimizer state element in visit() order (buffers' floats, scalars' bytes).
  /// Host-accessible memory.
  template <class Model, class State>
  static void shard_bytes(const Model& model, const State& optimizer_state, std::vector<std::byte>& out) {
    Kokkos::fence();
    std::size_t bytes = model.parameter_count() * sizeof(float);
    optimizer_state.visit([&](const char*, const auto& x) {
      if constexpr (is_buffer_v<decltype(x)>)
        bytes += x.extent(0) * sizeof(float);
      else
        bytes += sizeof x;
    });
    out.resize(bytes);
    std::size_t at = 0;
    auto put = [&](const void* p, std::size_t n) {
      if (n > 0) std::memcpy(out.data() + at, p, n);
      at += n;
    };
    put(model.parameters().data(), model.parameter_count() * sizeof(float));
    optimizer_state.visit([&](const char*, const auto& x) {
      if constexpr (is_buffer_v<decltype(x)>)
        put(x.data(), x.extent(0) * sizeof(float));
      else
        put(&x, sizeof x);
    });
  }

  /// Place the shard bytes of one model rank (runs: its canonical_runs) into canonical staging.
  /// @throws comm_error when the bytes do not have the shard's size
  template <class Runs, class StagingT>
  static void place_shard(const std::vector<std::byte>& bytes, const Runs& runs, StagingT& staging) {
    std::size_t n_local = 0, at = 0;
    for (const auto& r : runs) n_local += r.length;
    auto floats = [&](const auto& canonical) {
      if (at + n_local * sizeof(float) > bytes.size()) throw comm_error("reprosgd::Trainer: a buddy snapshot is truncated");
      for (const auto& r : runs)
        std::memcpy(canonical.data() + r.canonical, bytes.data() + at + r.local * sizeof(float), r.length * sizeof(float));
      at += n_local * sizeof(float);
    };
    floats(staging.params);
    staging.state.visit([&](const char*, auto& x) {
      if constexpr (is_buffer_v<decltype(x)>) {
        if (x.extent(0) > 0) floats(x);
      } else {
        if (at + sizeof x > bytes.size()) throw comm_error("reprosgd::Trainer: a buddy snapshot is truncated");
        std::memcpy(&x, bytes.data() + at, sizeof x);
        at += sizeof x;
      }
    });
    if (at != bytes.size()) throw comm_error("reprosgd::Trainer: a buddy snapshot has an unexpected size");
  }

 private:
  // Copy a shard's runs out of a canonical buffer (host-accessible memory).
  template <class Runs, class CanonicalBuffer, class Local>
  static void take_shard(const Runs& runs, const CanonicalBuffer& canonical, const Local& local) {
    Kokkos::fence();
    for (const auto& r : runs)
      for (std::size_t e = 0; e < r.length; ++e) local(r.local + e) = canonical(r.canonical + e);
  }

  Kokkos::View<float*, Kokkos::HostSpace> received_;  // collect()'s receive buffer (model rank 0)
};

}  // namespace detail
REPROSGD_END_NAMESPACE
