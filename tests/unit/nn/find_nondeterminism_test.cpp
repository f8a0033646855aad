// SPDX-License-Identifier: BSD-3-Clause
/// @file reprosgd::testing::find_nondeterminism names the layer that breaks the contract: the
/// example's BatchCentre (examples/05_find_nondeterminism) summed with parallel_reduce differs
/// between Kokkos::Serial and a threaded host space (or the device) and is named with its pass and
/// tensor; summed by one owner thread it passes; bad options are a config_error.
#include <doctest/doctest.h>

#include "../../../examples/05_find_nondeterminism/batch_centre.hpp"

#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/testing/find_nondeterminism.hpp>

#include <string>

namespace {

using batch_centre::BatchCentre;
using batch_centre::Sum;
using reprosgd::testing::NondeterminismOptions;
using reprosgd::testing::NondeterminismReport;

// The model: dense, relu, the layer under test, dense, made in each variant's memory space. A named
// function object rather than a lambda: nvcc cannot name a lambda held in a variable template.
template <Sum Forward, Sum Backward>
struct MakeModel {
  template <class Space>
  auto operator()(const Space&) const {
    return reprosgd::make_sequential<typename Space::memory_space>(reprosgd::Dense{12, 24}, reprosgd::ReLU{},
                                                                   BatchCentre<Forward, Backward>{}, reprosgd::Dense{24, 5});
  }
};

#if defined(KOKKOS_ENABLE_SERIAL)
using OneThread = Kokkos::Serial;
#else
using OneThread = Kokkos::DefaultHostExecutionSpace;
#endif

// Serial against the default host space, and against the device space where the build has one.
template <Sum Forward, Sum Backward>
NondeterminismReport find(const NondeterminismOptions& o = {.steps = 2}) {
  if constexpr (std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>)
    return reprosgd::testing::find_nondeterminism(MakeModel<Forward, Backward>{}, o, OneThread(),
                                                  Kokkos::DefaultHostExecutionSpace());
  else
    return reprosgd::testing::find_nondeterminism(MakeModel<Forward, Backward>{}, o, OneThread(),
                                                  Kokkos::DefaultHostExecutionSpace(), Kokkos::DefaultExecutionSpace());
}

// Whether some variant runs the layer on more than one thread (otherwise nothing can differ).
bool has_parallel_variant() {
  return reprosgd::detail::concurrency(Kokkos::DefaultHostExecutionSpace()) > 1 ||
         !std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>;
}

}  // namespace

TEST_CASE("find_nondeterminism passes a model whose layers keep the contract") {
  const NondeterminismReport r = find<Sum::owner, Sum::owner>();
  CHECK(r.deterministic());
  CHECK(r.layers == 4);
  CHECK(r.steps == 2);
  CHECK(r.runs.size() >= 4);  // two variants at least, each run twice
  CHECK(r.message().rfind("reprosgd::testing::find_nondeterminism: no layer differs: 4 layers, 2 steps, runs ", 0) == 0);
}

TEST_CASE("find_nondeterminism names a layer that sums with parallel_reduce, in the forward pass") {
  REQUIRE_MESSAGE(has_parallel_variant(), "the default host space has one thread and there is no device: run with 2 threads");
  const NondeterminismReport r = find<Sum::reduce, Sum::reduce>();
  REQUIRE(r.divergence);
  const auto& d = *r.divergence;
  CHECK(d.layer == 2);
  CHECK(d.layer_description == "batch_centre(reduce,reduce)");
  CHECK(d.pass == "forward");
  CHECK(d.tensor == "output");
  CHECK(d.step == 0);
  CHECK(d.micro_batch == 0);
  CHECK(d.size == 32 * 24);
  CHECK(d.count > 0);
  CHECK(d.variant_a.rfind(OneThread::name(), 0) == 0);
  CHECK(r.message().rfind("reprosgd::testing::find_nondeterminism: layer 2 (batch_centre(reduce,reduce)) is not "
                          "deterministic: its output differs in the forward pass between ", 0) == 0);
}

TEST_CASE("find_nondeterminism names a layer whose backward alone sums with parallel_reduce") {
  REQUIRE_MESSAGE(has_parallel_variant(), "the default host space has one thread and there is no device: run with 2 threads");
  const NondeterminismReport r = find<Sum::owner, Sum::reduce>();
  REQUIRE(r.divergence);
  const auto& d = *r.divergence;
  CHECK(d.layer == 2);
  CHECK(d.pass == "backward");
  CHECK(d.tensor == "input gradient");  // it has no parameters: its parameter gradient is empty
  CHECK(d.step == 0);
  CHECK(d.micro_batch == 0);
  CHECK(d.size == 32 * 24);
}

TEST_CASE("find_nondeterminism refuses invalid options") {
  auto message = [](NondeterminismOptions o) {
    try {
      (void)find<Sum::owner, Sum::owner>(o);
    } catch (const reprosgd::config_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message({.rows = 0}) == "reprosgd::testing::find_nondeterminism: rows must be > 0, got 0");
  CHECK(message({.micro_batches = -1}) == "reprosgd::testing::find_nondeterminism: micro_batches must be > 0, got -1");
  CHECK(message({.steps = 0}) == "reprosgd::testing::find_nondeterminism: steps must be > 0, got 0");
  CHECK(message({.repeats = 0}) == "reprosgd::testing::find_nondeterminism: repeats must be > 0, got 0");
  CHECK(message({.learning_rate = -1.0f}) ==
        "reprosgd::testing::find_nondeterminism: learning_rate must be finite and >= 0");
}
