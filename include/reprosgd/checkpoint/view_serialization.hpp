// SPDX-License-Identifier: BSD-3-Clause
/// @file cereal save/load for Kokkos Views of any rank, layout and memory space.
#pragma once

#include <reprosgd/error.hpp>

#include <Kokkos_Core.hpp>
#include <cereal/cereal.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

// Encoding (every archive): a node "extents" = [rank as size tag, extent 0 … extent rank-1] as
// uint64, then a node "data" = [element count as size tag, the elements in row-major order]. In
// binary archives the elements are one cereal::binary_data block (raw bits, so floats are exact).
// The order is the logical (row-major) index order whatever the View's layout, so a LayoutLeft
// device View and a LayoutRight host View of the same values give the same bytes: checkpoints do
// not depend on the backend. The label is not saved: it is a name, not state.

REPROSGD_BEGIN_NAMESPACE

/// The most stream bytes a View load may claim when no snapshot has set a budget (64 GiB).
inline constexpr std::uint64_t default_view_load_budget = std::uint64_t{1} << 36;

namespace detail {
inline std::uint64_t& view_load_budget() noexcept {
  thread_local std::uint64_t budget = default_view_load_budget;
  return budget;
}

/// Claims `count` elements of `stream_bytes_per_element` from the budget, or throws.
inline void claim_view_load_budget(const std::string& label, std::uint64_t count, std::uint64_t stream_bytes_per_element) {
  std::uint64_t& budget = view_load_budget();
  if (count > budget / stream_bytes_per_element) {
    throw checkpoint_error("reprosgd: loading View \"" + label + "\": " + std::to_string(count) +
                           " elements announced, but at most " + std::to_string(budget) +
                           " bytes of payload remain (a damaged or forged size; nothing was allocated)");
  }
  budget -= count * stream_bytes_per_element;
}

struct ViewShape {
  std::uint32_t rank = 0;
  std::array<std::uint64_t, 8> extents{};

  template <class Archive>
  void save(Archive& ar) const {
    ar(cereal::make_size_tag(static_cast<cereal::size_type>(rank)));
    for (std::uint32_t i = 0; i < rank; ++i) ar(extents[i]);
  }
  template <class Archive>
  void load(Archive& ar) {
    cereal::size_type r = 0;
    ar(cereal::make_size_tag(r));
    if (r > 8) throw checkpoint_error("reprosgd: loading a View: rank " + std::to_string(r) + " in the checkpoint (at most 8)");
    rank = static_cast<std::uint32_t>(r);
    extents = {};
    for (std::uint32_t i = 0; i < rank; ++i) ar(extents[i]);
  }
  [[nodiscard]] std::string to_string() const {
    std::string s;
    for (std::uint32_t i = 0; i < rank; ++i) {
      if (i != 0) s += 'x';
      s += std::to_string(extents[i]);
    }
    return rank == 0 ? std::string("scalar") : s;
  }
};

template <class Archive, class T>
inline constexpr bool archive_takes_binary_v =
    std::is_arithmetic_v<T> && cereal::traits::is_output_serializable<cereal::BinaryData<const T*>, Archive>::value;
template <class Archive, class T>
inline constexpr bool archive_gives_binary_v =
    std::is_arithmetic_v<T> && cereal::traits::is_input_serializable<cereal::BinaryData<T*>, Archive>::value;

template <class T>
struct ConstElements {
  const T* data;
  std::uint64_t count;
  template <class Archive>
  void save(Archive& ar) const {
    ar(cereal::make_size_tag(static_cast<cereal::size_type>(count)));
    if constexpr (archive_takes_binary_v<Archive, T>) {
      ar(cereal::binary_data(data, static_cast<std::size_t>(count) * sizeof(T)));
    } else {
      for (std::uint64_t i = 0; i < count; ++i) ar(data[i]);
    }
  }
};

template <class T>
struct Elements {
  T* data;
  std::uint64_t count;
  const std::string* label;
  template <class Archive>
  void load(Archive& ar) {
    cereal::size_type n = 0;
    ar(cereal::make_size_tag(n));
    if (n != count) {
      throw checkpoint_error("reprosgd: loading View \"" + *label + "\": " + std::to_string(n) +
                             " elements stored, the extents say " + std::to_string(count));
    }
    if constexpr (archive_gives_binary_v<Archive, T>) {
      ar(cereal::binary_data(data, static_cast<std::size_t>(count) * sizeof(T)));
    } else {
      for (std::uint64_t i = 0; i < count; ++i) ar(data[i]);
    }
  }
};

/// Calls f(i0..i7) for every index of `shape` in row-major order.
template <class F>
void for_each_row_major(const ViewShape& shape, std::uint64_t count, F&& f) {
  std::array<std::size_t, 8> idx{};
  for (std::uint64_t k = 0; k < count; ++k) {
    f(idx[0], idx[1], idx[2], idx[3], idx[4], idx[5], idx[6], idx[7]);
    for (int d = static_cast<int>(shape.rank) - 1; d >= 0; --d) {
      if (++idx[d] < shape.extents[d]) break;
      idx[d] = 0;
    }
  }
}

template <class View>
bool is_row_major_contiguous(const View& v) {
  if (!v.span_is_contiguous()) return false;
  if constexpr (View::rank <= 1 || std::is_same_v<typename View::array_layout, Kokkos::LayoutRight>) {
    return true;
  } else {
    return false;
  }
}

template <class View>
ViewShape shape_of(const View& v) {
  ViewShape s;
  s.rank = static_cast<std::uint32_t>(View::rank);
  for (std::uint32_t i = 0; i < s.rank; ++i) s.extents[i] = static_cast<std::uint64_t>(v.extent(i));
  return s;
}

template <class View, std::size_t... I>
View allocate_view(const std::string& label, const ViewShape& s, std::index_sequence<I...>) {
  using layout = typename View::array_layout;
  return View(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), layout(static_cast<std::size_t>(s.extents[I])...));
}

template <class MemorySpace>
inline constexpr bool host_accessible_v = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible;
}  // namespace detail

/**
 * Limits how many payload bytes View loads on this thread may claim while it lives.
 *
 * load_snapshot sets it to the payload size, so a forged extent cannot make a load allocate more
 * than the file could hold. Nestable; restores the previous budget on destruction.
 */
class ScopedViewLoadBudget {
 public:
  explicit ScopedViewLoadBudget(std::uint64_t stream_bytes) : previous_(detail::view_load_budget()) {
    detail::view_load_budget() = stream_bytes;
  }
  ~ScopedViewLoadBudget() { detail::view_load_budget() = previous_; }
  ScopedViewLoadBudget(const ScopedViewLoadBudget&) = delete;
  ScopedViewLoadBudget& operator=(const ScopedViewLoadBudget&) = delete;

 private:
  std::uint64_t previous_;
};

REPROSGD_END_NAMESPACE

namespace cereal {

/**
 * Saves a Kokkos View: its extents, then its elements in row-major order.
 *
 * A View in memory the host cannot read is copied to a host mirror first. A host View that is
 * contiguous and row-major is written straight from its memory (binary archives: one block, no copy).
 * Fences first, so kernels still writing the View have finished.
 */
template <class Archive, class DataType, class... Properties>
void CEREAL_SAVE_FUNCTION_NAME(Archive& ar, const Kokkos::View<DataType, Properties...>& v) {
  using view_type = Kokkos::View<DataType, Properties...>;
  using value_type = std::remove_const_t<typename view_type::value_type>;
  const reprosgd::detail::ViewShape shape = reprosgd::detail::shape_of(v);
  const std::uint64_t count = static_cast<std::uint64_t>(v.size());
  ar(make_nvp("extents", shape));
  if constexpr (reprosgd::detail::host_accessible_v<typename view_type::memory_space>) {
    Kokkos::fence();
    if (reprosgd::detail::is_row_major_contiguous(v)) {
      ar(make_nvp("data", reprosgd::detail::ConstElements<value_type>{v.data(), count}));
      return;
    }
  }
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  std::vector<value_type> tmp(static_cast<std::size_t>(count));
  std::size_t k = 0;
  reprosgd::detail::for_each_row_major(shape, count, [&](auto... i) { tmp[k++] = host.access(i...); });
  ar(make_nvp("data", reprosgd::detail::ConstElements<value_type>{tmp.data(), count}));
}

/**
 * Loads a Kokkos View saved by the function above.
 *
 * An allocated destination must have the stored extents exactly (otherwise reprosgd::checkpoint_error
 * naming both shapes, before anything is read into it). An unallocated one (default-constructed) is
 * allocated with the stored extents, after they are checked against the load budget
 * (ScopedViewLoadBudget), so a damaged size never makes it allocate.
 */
template <class Archive, class DataType, class... Properties>
void CEREAL_LOAD_FUNCTION_NAME(Archive& ar, Kokkos::View<DataType, Properties...>& v) {
  using view_type = Kokkos::View<DataType, Properties...>;
  using value_type = typename view_type::value_type;
  static_assert(!std::is_const_v<value_type>, "reprosgd: cannot load into a View of const elements");
  constexpr bool binary = reprosgd::detail::archive_gives_binary_v<Archive, value_type>;
  // Each element takes sizeof(T) bytes in a binary stream and at least 3 (`"0"`) in a text one.
  constexpr std::uint64_t stream_bytes_per_element = binary ? sizeof(value_type) : 3;

  std::string label = v.label();
  reprosgd::detail::ViewShape stored;
  ar(make_nvp("extents", stored));
  if (stored.rank != view_type::rank) {
    throw reprosgd::checkpoint_error("reprosgd: loading View \"" + label + "\": the checkpoint holds a rank-" +
                                     std::to_string(stored.rank) + " View (" + stored.to_string() +
                                     "), the destination has rank " + std::to_string(view_type::rank));
  }
  std::uint64_t count = 1;
  for (std::uint32_t i = 0; i < stored.rank; ++i) {
    const std::uint64_t e = stored.extents[i];
    if (e != 0 && count > std::numeric_limits<std::uint64_t>::max() / e) {
      throw reprosgd::checkpoint_error("reprosgd: loading View \"" + label + "\": extents " + stored.to_string() +
                                       " overflow 64 bits");
    }
    count *= e;
  }
  const reprosgd::detail::ViewShape current = reprosgd::detail::shape_of(v);
  // A View without memory (default-constructed) is allocated with the stored extents; one with
  // memory is the caller's buffer and must already have them.
  const bool unallocated = v.data() == nullptr;
  if (!unallocated && current.extents != stored.extents) {
    throw reprosgd::checkpoint_error("reprosgd: loading View \"" + label + "\": the checkpoint holds extents " +
                                     stored.to_string() + ", the destination has " + current.to_string());
  }
  reprosgd::detail::claim_view_load_budget(label, count, stream_bytes_per_element);
  if (unallocated && (count != 0 || current.extents != stored.extents)) {
    if constexpr (std::is_same_v<typename view_type::array_layout, Kokkos::LayoutStride>) {
      throw reprosgd::checkpoint_error("reprosgd: loading View \"" + label +
                                       "\": cannot allocate a LayoutStride destination; allocate it first");
    } else {
      for (std::uint32_t i = view_type::rank_dynamic; i < view_type::rank; ++i) {
        if (stored.extents[i] != view_type::static_extent(i)) {
          throw reprosgd::checkpoint_error("reprosgd: loading View \"" + label + "\": the checkpoint holds extents " +
                                           stored.to_string() + ", the destination's static extent " +
                                           std::to_string(i) + " is " +
                                           std::to_string(view_type::static_extent(i)));
        }
      }
      if (label.empty()) label = "reprosgd checkpoint";
      v = reprosgd::detail::allocate_view<view_type>(label, stored, std::make_index_sequence<view_type::rank>{});
    }
  }
  if constexpr (reprosgd::detail::host_accessible_v<typename view_type::memory_space>) {
    if (reprosgd::detail::is_row_major_contiguous(v)) {
      ar(make_nvp("data", reprosgd::detail::Elements<value_type>{v.data(), count, &label}));
      return;
    }
  }
  std::vector<value_type> tmp(static_cast<std::size_t>(count));
  ar(make_nvp("data", reprosgd::detail::Elements<value_type>{tmp.data(), count, &label}));
  auto host = Kokkos::create_mirror_view(v);
  std::size_t k = 0;
  reprosgd::detail::for_each_row_major(stored, count, [&](auto... i) { host.access(i...) = tmp[k++]; });
  Kokkos::deep_copy(v, host);
}

}  // namespace cereal
