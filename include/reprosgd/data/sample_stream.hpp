// SPDX-License-Identifier: BSD-3-Clause
/// @file SampleStream: a bounded buffer a running simulation appends samples to, with logical sample
/// ids, a documented replacement rule, keyed batch selection and checkpointable state.
#pragma once

#include <reprosgd/data/dataset.hpp>
#include <reprosgd/data/keyed_permutation.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/checkpoint/view_serialization.hpp>
#include <reprosgd/rng/philox.hpp>

#include <Kokkos_Core.hpp>
#include <cereal/cereal.hpp>
#include <cereal/types/string.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE

namespace detail {

// SampleStream's kernels, free functions: nvcc does not allow an extended lambda in a private member.
// data_error naming the first non-finite value of an append's rows, by row and logical id.
template <class ExecSpace, class M>
void stream_check_finite(const ExecSpace& space, const M& m, const std::vector<std::uint64_t>& ids, const char* what) {
  if (const auto bad = first_non_finite(space, m))
    throw data_error("reprosgd::SampleStream::append: " + bad->value + " in row " + std::to_string(bad->row) + " (id " +
                     std::to_string(ids[bad->row]) + "), " + what + " " + std::to_string(bad->column) +
                     "; nothing appended");
}

template <class ExecSpace, class Map, class From, class To>
void stream_copy_mapped(const ExecSpace& space, const Map& map, const From& from, const To& to) {
  if constexpr (To::rank == 1) {
    Kokkos::parallel_for("reprosgd::SampleStream::append", Kokkos::RangePolicy<ExecSpace>(space, 0, map.extent(0)),
                         KOKKOS_LAMBDA(std::size_t q) { to(map(q, 1)) = from(map(q, 0)); });
  } else {
    const std::size_t cols = to.extent(1);
    Kokkos::parallel_for("reprosgd::SampleStream::append", Kokkos::RangePolicy<ExecSpace>(space, 0, map.extent(0)),
                         KOKKOS_LAMBDA(std::size_t q) {
                           for (std::size_t j = 0; j < cols; ++j) to(map(q, 1), j) = from(map(q, 0), j);
                         });
  }
}
template <class ExecSpace, class Slots, class From, class To>
void stream_gather(const ExecSpace& space, const Slots& slots, const From& from, const To& to) {
  const std::size_t cols = to.extent(1);
  Kokkos::parallel_for("reprosgd::SampleStream::batches", Kokkos::RangePolicy<ExecSpace>(space, 0, to.extent(0)),
                       KOKKOS_LAMBDA(std::size_t i) {
                         for (std::size_t j = 0; j < cols; ++j) to(i, j) = from(slots(i), j);
                       });
}

}  // namespace detail

/// What a full SampleStream does with a new sample (docs/surrogates.md, "Online training").
enum class Replacement : std::uint8_t {
  /// Keep the newest `capacity` samples: the n-th sample offered (n counted from 0 in the
  /// stream's canonical order) goes to slot n mod capacity, replacing the oldest.
  fifo,
  /// Keep a uniform sample of everything offered (Algorithm R, keyed): sample n < capacity goes to
  /// slot n; a later one draws j uniform in [0, n] from Philox keyed by (seed, n) and replaces slot
  /// j when j < capacity, else it is dropped.
  reservoir,
};

[[nodiscard]] inline const char* to_string(Replacement r) noexcept {
  return r == Replacement::fifo ? "fifo" : "reservoir";
}

/**
 * The rows a Trainer's train_steps() trains on: `steps` global batches drawn from a SampleStream,
 * batch j at rows [j*B, (j+1)*B), plus the stream's capacity, which describes the run in place of a
 * data set's size (so the configuration of an online run does not depend on how many steps a call
 * runs or on how full the stream was).
 */
template <class MemorySpace = Kokkos::HostSpace>
struct StreamBatches : Dataset<MemorySpace> {
  std::size_t capacity = 0;
  [[nodiscard]] std::size_t stream_capacity() const noexcept { return capacity; }
};

/**
 * A bounded, replicated buffer of training samples that a simulation appends to as it runs.
 *
 * **Sample identity is logical.** Each sample carries a 64-bit id the simulation chooses from what
 * the sample *is* — for example `time_step * cells + global_cell` — never from the rank or thread
 * that produced it. Every append() puts its samples in increasing id order before anything else
 * happens, so the stream's contents (and every batch drawn from it) are a function of the sequence
 * of appends' *sets* of samples: the same for any thread count, backend, and number of ranks that
 * produced them. With several ranks, every rank appends the same samples (gather them first: each
 * rank holds the whole stream, as each rank holds the whole data set in data parallelism).
 *
 * **Bounded.** At most `capacity` samples are held; Replacement says which are kept.
 *
 * **Batches.** The global batch of training step s is drawn without replacement from the samples
 * held at the time: positions 0..B-1 of the keyed permutation (seed, s) of the held slots. A step
 * therefore depends on its step number and on the stream's contents, not on how the steps are
 * grouped into calls.
 *
 * **State.** The held samples, their ids and the count offered so far are serialisable with cereal:
 * pass the stream as the `extra` state of Trainer::save_checkpoint / load_checkpoint, and a run
 * stopped and restarted trains to the same bits as one that never stopped. A load allocates fresh
 * buffers (the live stream is untouched until the whole checkpoint verified).
 *
 * @tparam MemorySpace where the samples live (the training's memory space).
 */
template <class MemorySpace = Kokkos::HostSpace>
class SampleStream {
 public:
  using memory_space = MemorySpace;
  using dataset_type = Dataset<MemorySpace>;
  using features_type = typename dataset_type::features_type;
  using labels_type = typename dataset_type::labels_type;
  using targets_type = typename dataset_type::targets_type;

  struct Options {
    std::size_t capacity = 0;  ///< the most samples held (>= 1)
    int features = 0;          ///< F, the features per sample (>= 1)
    int targets = 0;           ///< T, regression targets per sample; 0 for classification
    int num_classes = 0;       ///< classification: the number of classes; 0 for regression
    Replacement replacement = Replacement::fifo;
    std::uint64_t seed = 0;    ///< keys the reservoir's draws and the batches' selection
  };

  /// The format of the serialised state (bumped when it changes; older ones are refused by name).
  static constexpr std::uint32_t state_version = 1;
  /// The largest capacity (the keyed permutation's limit, and a bound a forged checkpoint cannot pass).
  static constexpr std::uint64_t max_capacity = std::uint64_t{1} << 40;

  SampleStream() = default;  // for staging copies; a usable stream is constructed from Options
  explicit SampleStream(const Options& o) : o_(o) {
    const std::string who = "reprosgd::SampleStream: ";
    if (o.capacity < 1 || o.capacity >= max_capacity)
      throw config_error(who + "capacity must be in [1, 2^40), got " + std::to_string(o.capacity));
    if (o.features < 1) throw config_error(who + "features must be at least 1, got " + std::to_string(o.features));
    if ((o.targets > 0) == (o.num_classes > 0) || o.targets < 0 || o.num_classes < 0)
      throw config_error(who + "exactly one of targets (regression, got " + std::to_string(o.targets) +
                         ") and num_classes (classification, got " + std::to_string(o.num_classes) +
                         ") must be positive");
    allocate(features_, labels_, targets_);
  }

  [[nodiscard]] const Options& options() const noexcept { return o_; }
  /// The samples held now (at most capacity()).
  [[nodiscard]] std::size_t size() const noexcept { return ids_.size(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return o_.capacity; }
  [[nodiscard]] std::size_t stream_capacity() const noexcept { return o_.capacity; }
  /// The samples offered by every append() so far (held, replaced or dropped).
  [[nodiscard]] std::uint64_t offered() const noexcept { return offered_; }
  [[nodiscard]] int feature_count() const noexcept { return o_.features; }
  [[nodiscard]] int target_count() const noexcept { return o_.targets; }
  [[nodiscard]] bool is_regression() const noexcept { return o_.targets > 0; }
  /// The logical id of the sample in each slot 0..size()-1.
  [[nodiscard]] const std::vector<std::uint64_t>& ids() const noexcept { return ids_; }

  /// The samples held, slot order, as a Dataset sharing the stream's memory (valid until the next append).
  [[nodiscard]] dataset_type contents() const {
    const std::pair<std::size_t, std::size_t> rows{0, size()};
    dataset_type d;
    d.features = Kokkos::subview(features_, rows, Kokkos::ALL);
    d.num_classes = o_.num_classes;
    if (is_regression())
      d.targets = Kokkos::subview(targets_, rows, Kokkos::ALL);
    else
      d.labels = Kokkos::subview(labels_, rows);
    return d;
  }

  /**
   * Offer N regression samples: `ids` (N logical ids, any memory space), `x` (N x F) and `t`
   * (N x T) Views of float that `space` can read (any layout; the simulation's own Views, read in
   * place). They are put in increasing id order, then placed by the Replacement rule.
   *
   * @throws data_error (nothing appended) when the extents differ from N x F / N x T, an id
   *         repeats within the call, or a value is NaN or Inf (naming the row and id);
   *         config_error on a classification stream.
   */
  template <class ExecSpace, class Ids, class X, class T>
    requires(Kokkos::is_execution_space<ExecSpace>::value && Kokkos::is_view<X>::value && Kokkos::is_view<T>::value)
  void append(const ExecSpace& space, const Ids& ids, const X& x, const T& t) {
    if (!is_regression())
      throw config_error("reprosgd::SampleStream::append: a classification stream takes labels (append_labelled)");
    const std::vector<std::uint64_t> host_ids = host_ids_of(ids);
    check_rows("targets", t.extent(0), t.extent(1), static_cast<std::size_t>(o_.targets), host_ids.size());
    check_rows("features", x.extent(0), x.extent(1), static_cast<std::size_t>(o_.features), host_ids.size());
    detail::stream_check_finite(space, x, host_ids, "feature");
    detail::stream_check_finite(space, t, host_ids, "target");
    const Placement p = place(host_ids);
    copy_rows(space, p, x, features_);
    copy_rows(space, p, t, targets_);
    commit(p);
  }
  /// append() with the ids first_id, first_id + 1, ... (a simulation's cells in global order).
  template <class ExecSpace, class X, class T>
    requires(Kokkos::is_execution_space<ExecSpace>::value && Kokkos::is_view<X>::value && Kokkos::is_view<T>::value)
  void append(const ExecSpace& space, std::uint64_t first_id, const X& x, const T& t) {
    append(space, consecutive(first_id, x.extent(0)), x, t);
  }

  /// Offer N classification samples with labels in [0, num_classes) (see append()).
  template <class ExecSpace, class Ids, class X, class Y>
    requires(Kokkos::is_execution_space<ExecSpace>::value && Kokkos::is_view<X>::value && Kokkos::is_view<Y>::value)
  void append_labelled(const ExecSpace& space, const Ids& ids, const X& x, const Y& y) {
    if (is_regression())
      throw config_error("reprosgd::SampleStream::append_labelled: a regression stream takes targets (append)");
    const std::vector<std::uint64_t> host_ids = host_ids_of(ids);
    check_rows("labels", y.extent(0), 1, 1, host_ids.size());
    check_rows("features", x.extent(0), x.extent(1), static_cast<std::size_t>(o_.features), host_ids.size());
    detail::stream_check_finite(space, x, host_ids, "feature");
    auto labels = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y);
    for (std::size_t i = 0; i < labels.extent(0); ++i)
      if (labels(i) < 0 || labels(i) >= o_.num_classes)
        throw data_error("reprosgd::SampleStream::append_labelled: label " + std::to_string(labels(i)) + " of row " +
                         std::to_string(i) + " (id " + std::to_string(host_ids[i]) + ") is outside [0, " +
                         std::to_string(o_.num_classes) + "); nothing appended");
    const Placement p = place(host_ids);
    copy_rows(space, p, y, labels_);
    copy_rows(space, p, x, features_);
    commit(p);
  }

  /**
   * The slots of global batch `step` (B of them): positions 0..B-1 of the keyed permutation of
   * the held slots for this step. @throws data_error when fewer than B samples are held.
   */
  [[nodiscard]] std::vector<std::uint64_t> batch_slots(std::uint64_t step, std::size_t batch) const {
    if (batch == 0) throw config_error("reprosgd::SampleStream::batch_slots: the batch size is 0");
    if (size() < batch)
      throw data_error("reprosgd::SampleStream: a step needs " + std::to_string(batch) + " samples but the stream holds " +
                       std::to_string(size()) + " (of capacity " + std::to_string(capacity()) +
                       "); append more before training");
    const KeyedPermutation perm(selection_seed(), step, size());
    std::vector<std::uint64_t> slots(batch);
    for (std::size_t j = 0; j < batch; ++j) slots[j] = perm(j);
    return slots;
  }

  /**
   * The rows of `steps` global batches of `batch` samples from step `first_step` on, gathered on
   * `space` in training order (batch j at rows [j*B, (j+1)*B)): what Trainer::train_steps trains on.
   * The buffers are reused from call to call (reallocated only to grow).
   */
  template <class ExecSpace>
  [[nodiscard]] StreamBatches<MemorySpace> batches(const ExecSpace& space, std::uint64_t first_step, long steps,
                                                   long batch) {
    if (steps < 1) throw config_error("reprosgd::SampleStream::batches: steps must be at least 1, got " + std::to_string(steps));
    const std::size_t B = static_cast<std::size_t>(batch);
    const std::size_t rows = static_cast<std::size_t>(steps) * B;
    Kokkos::View<std::uint64_t*, Kokkos::HostSpace> host_slots("reprosgd::SampleStream::slots", rows);
    for (long s = 0; s < steps; ++s) {
      const std::vector<std::uint64_t> slots = batch_slots(first_step + static_cast<std::uint64_t>(s), B);
      std::copy(slots.begin(), slots.end(), host_slots.data() + static_cast<std::size_t>(s) * B);
    }
    if (window_.features.extent(0) < rows) allocate_window(rows);
    auto slots = Kokkos::create_mirror_view_and_copy(MemorySpace(), host_slots);
    StreamBatches<MemorySpace> out;
    const std::pair<std::size_t, std::size_t> r{0, rows};
    out.features = Kokkos::subview(window_.features, r, Kokkos::ALL);
    out.num_classes = o_.num_classes;
    out.capacity = o_.capacity;
    detail::stream_gather(space, slots, features_, out.features);
    if (is_regression()) {
      out.targets = Kokkos::subview(window_.targets, r, Kokkos::ALL);
      detail::stream_gather(space, slots, targets_, out.targets);
    } else {
      out.labels = Kokkos::subview(window_.labels, r);
      auto from = labels_;
      auto to = out.labels;
      Kokkos::parallel_for("reprosgd::SampleStream::batches",
                           Kokkos::RangePolicy<ExecSpace>(space, 0, rows),
                           KOKKOS_LAMBDA(std::size_t i) { to(i) = from(slots(i)); });
    }
    space.fence();
    return out;
  }

  // Serialised state: the configuration (checked on load, field by field), the count offered, the
  // ids and the held rows (slots 0..size()-1 only).
  template <class Archive>
  void save(Archive& ar) const {
    Kokkos::fence();
    const dataset_type d = contents();
    ar(cereal::make_nvp("version", state_version), cereal::make_nvp("capacity", static_cast<std::uint64_t>(o_.capacity)),
       cereal::make_nvp("features", o_.features), cereal::make_nvp("targets", o_.targets),
       cereal::make_nvp("num_classes", o_.num_classes),
       cereal::make_nvp("replacement", std::string(to_string(o_.replacement))), cereal::make_nvp("seed", o_.seed),
       cereal::make_nvp("offered", offered_));
    Kokkos::View<const std::uint64_t*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> ids(ids_.data(), ids_.size());
    ar(cereal::make_nvp("ids", ids), cereal::make_nvp("rows", d.features));
    if (is_regression())
      ar(cereal::make_nvp("target_rows", d.targets));
    else
      ar(cereal::make_nvp("labels", d.labels));
  }
  template <class Archive>
  void load(Archive& ar) {
    std::uint32_t version = 0;
    std::uint64_t capacity = 0, seed = 0, offered = 0;
    int features = 0, targets = 0, classes = 0;
    std::string replacement;
    ar(cereal::make_nvp("version", version));
    if (version != state_version)
      throw checkpoint_error("reprosgd::SampleStream: the checkpoint holds stream state version " +
                             std::to_string(version) + ", this program reads version " + std::to_string(state_version));
    ar(cereal::make_nvp("capacity", capacity), cereal::make_nvp("features", features), cereal::make_nvp("targets", targets),
       cereal::make_nvp("num_classes", classes), cereal::make_nvp("replacement", replacement),
       cereal::make_nvp("seed", seed), cereal::make_nvp("offered", offered));
    expect("capacity", capacity, o_.capacity);
    expect("features", features, o_.features);
    expect("targets", targets, o_.targets);
    expect("num_classes", classes, o_.num_classes);
    if (replacement != to_string(o_.replacement))
      throw checkpoint_error("reprosgd::SampleStream: the checkpoint's stream has replacement " + replacement +
                             ", this one " + to_string(o_.replacement));
    expect("seed", seed, o_.seed);
    Kokkos::View<std::uint64_t*, Kokkos::HostSpace> id_view;  // allocated by the load, within the load budget
    ar(cereal::make_nvp("ids", id_view));
    std::vector<std::uint64_t> ids(id_view.data(), id_view.data() + id_view.extent(0));
    if (ids.size() > o_.capacity || ids.size() > offered || (ids.size() < o_.capacity && ids.size() != offered))
      throw checkpoint_error("reprosgd::SampleStream: the checkpoint's stream holds " + std::to_string(ids.size()) +
                             " samples of " + std::to_string(offered) + " offered, impossible for capacity " +
                             std::to_string(o_.capacity));
    // Fresh buffers: a staging copy shares the live stream's Views until it is assigned these.
    features_type f;
    labels_type l;
    targets_type t;
    allocate(f, l, t);
    const std::pair<std::size_t, std::size_t> rows{0, ids.size()};
    load_rows(ar, "rows", Kokkos::subview(f, rows, Kokkos::ALL));
    if (is_regression())
      load_rows(ar, "target_rows", Kokkos::subview(t, rows, Kokkos::ALL));
    else
      load_rows(ar, "labels", Kokkos::subview(l, rows));
    features_ = f;
    labels_ = l;
    targets_ = t;
    ids_ = std::move(ids);
    offered_ = offered;
    window_ = {};
  }

 private:
  // Where each kept row of an append goes: source row src[q] to slot dst[q], every dst distinct
  // (a slot written twice in one append keeps the later sample, as a sequential insert would).
  struct Placement {
    std::vector<std::uint64_t> src, dst, id;
    std::uint64_t offered = 0;  // samples in the append
  };
  struct Window {
    features_type features;
    labels_type labels;
    targets_type targets;
  };

  void allocate(features_type& f, labels_type& l, targets_type& t) const {
    f = features_type(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::SampleStream::features"), o_.capacity,
                      static_cast<std::size_t>(o_.features));
    if (o_.targets > 0)
      t = targets_type(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::SampleStream::targets"), o_.capacity,
                       static_cast<std::size_t>(o_.targets));
    else
      l = labels_type(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::SampleStream::labels"), o_.capacity);
  }
  void allocate_window(std::size_t rows) {
    window_.features = features_type(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::SampleStream::batches"),
                                     rows, static_cast<std::size_t>(o_.features));
    if (is_regression())
      window_.targets = targets_type(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::SampleStream::batch_targets"),
                                     rows, static_cast<std::size_t>(o_.targets));
    else
      window_.labels = labels_type(Kokkos::view_alloc(Kokkos::WithoutInitializing, "reprosgd::SampleStream::batch_labels"), rows);
  }

  std::uint64_t selection_seed() const noexcept { return o_.seed ^ 0x5354524541'4d31ull; }  // "STREAM1"

  static Kokkos::View<std::uint64_t*, Kokkos::HostSpace> consecutive(std::uint64_t first, std::size_t n) {
    Kokkos::View<std::uint64_t*, Kokkos::HostSpace> ids("reprosgd::SampleStream::ids", n);
    for (std::size_t i = 0; i < n; ++i) ids(i) = first + i;
    return ids;
  }
  template <class Ids>
  static std::vector<std::uint64_t> host_ids_of(const Ids& ids) {
    static_assert(Kokkos::is_view<Ids>::value && Ids::rank == 1 &&
                      std::is_same_v<typename Ids::non_const_value_type, std::uint64_t>,
                  "reprosgd::SampleStream: ids must be a rank-1 View of std::uint64_t");
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), ids);
    std::vector<std::uint64_t> v(h.extent(0));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = h(i);
    return v;
  }
  static void check_rows(const char* what, std::size_t rows, std::size_t cols, std::size_t want_cols, std::size_t n) {
    if (rows != n || cols != want_cols)
      throw data_error(std::string("reprosgd::SampleStream::append: ") + what + " are " + std::to_string(rows) + " x " +
                       std::to_string(cols) + ", expected " + std::to_string(n) + " x " + std::to_string(want_cols) +
                       " (one row per id); nothing appended");
  }
  // The canonical order (ids ascending, each once) and each sample's slot under the rule.
  Placement place(const std::vector<std::uint64_t>& ids) const {
    std::vector<std::uint64_t> order(ids.size());
    std::iota(order.begin(), order.end(), std::uint64_t{0});
    std::sort(order.begin(), order.end(), [&](std::uint64_t a, std::uint64_t b) { return ids[a] < ids[b]; });
    for (std::size_t q = 1; q < order.size(); ++q)
      if (ids[order[q]] == ids[order[q - 1]])
        throw data_error("reprosgd::SampleStream::append: id " + std::to_string(ids[order[q]]) + " appears in rows " +
                         std::to_string(std::min(order[q], order[q - 1])) + " and " +
                         std::to_string(std::max(order[q], order[q - 1])) + " (ids are logical sample identities: unique "
                         "within an append); nothing appended");
    Placement p;
    p.offered = ids.size();
    std::vector<std::int64_t> writer(o_.capacity, -1);  // the last kept sample (index into p) per slot
    for (std::size_t q = 0; q < order.size(); ++q) {
      const std::uint64_t n = offered_ + q;
      std::uint64_t slot = 0;
      if (o_.replacement == Replacement::fifo || n < o_.capacity) {
        slot = n % o_.capacity;
      } else {
        const Philox2x64Counter r = philox2x64(Philox2x64Counter{{n, 0x5245534552564f49ull}}, Philox2x64Key{{o_.seed}});
        slot = detail::mulhi(r[0], n + 1);  // uniform in [0, n] (bias below (n+1)/2^64)
        if (slot >= o_.capacity) continue;
      }
      if (writer[slot] >= 0) {
        p.src[static_cast<std::size_t>(writer[slot])] = order[q];
        p.id[static_cast<std::size_t>(writer[slot])] = ids[order[q]];
        continue;
      }
      writer[slot] = static_cast<std::int64_t>(p.src.size());
      p.src.push_back(order[q]);
      p.dst.push_back(slot);
      p.id.push_back(ids[order[q]]);
    }
    return p;
  }

  // Row src[q] of `from` into slot dst[q] of `to`, read where the user's View is when `space` can
  // read it (no staging copy), else through a copy into the stream's memory space.
  template <class ExecSpace, class From, class To>
  static void copy_rows(const ExecSpace& space, const Placement& p, const From& from, const To& to) {
    if (p.src.empty()) return;
    Kokkos::View<std::uint64_t* [2], Kokkos::HostSpace> map_h("reprosgd::SampleStream::map", p.src.size());
    for (std::size_t q = 0; q < p.src.size(); ++q) {
      map_h(q, 0) = p.src[q];
      map_h(q, 1) = p.dst[q];
    }
    auto map = Kokkos::create_mirror_view_and_copy(MemorySpace(), map_h);
    if constexpr (Kokkos::SpaceAccessibility<ExecSpace, typename From::memory_space>::accessible) {
      detail::stream_copy_mapped(space, map, from, to);
    } else {
      auto staged = Kokkos::create_mirror_view_and_copy(MemorySpace(), from);
      detail::stream_copy_mapped(space, map, staged, to);
    }
    space.fence();
  }
  void commit(const Placement& p) {
    for (std::size_t q = 0; q < p.dst.size(); ++q) {
      if (p.dst[q] == ids_.size())
        ids_.push_back(p.id[q]);
      else
        ids_[p.dst[q]] = p.id[q];
    }
    offered_ += p.offered;
  }

  // Rows loaded into `into` (allocated: the stored extents must equal the held count, so a forged
  // size allocates nothing), through a host mirror when `into` is in device memory.
  template <class Archive, class V>
  static void load_rows(Archive& ar, const char* name, const V& into) {
    auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), into);
    ar(cereal::make_nvp(name, h));
    Kokkos::deep_copy(into, h);
  }
  template <class A, class B>
  static void expect(const char* field, A stored, B mine) {
    if (static_cast<std::uint64_t>(stored) != static_cast<std::uint64_t>(mine))
      throw checkpoint_error(std::string("reprosgd::SampleStream: the checkpoint's stream has ") + field + " " +
                             std::to_string(stored) + ", this one " + std::to_string(mine));
  }

  Options o_{};
  features_type features_;
  labels_type labels_;
  targets_type targets_;
  std::vector<std::uint64_t> ids_;  // slot -> logical id, slots 0..size()-1
  std::uint64_t offered_ = 0;
  Window window_;
};

REPROSGD_END_NAMESPACE
