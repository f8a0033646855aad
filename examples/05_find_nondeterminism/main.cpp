// SPDX-License-Identifier: BSD-3-Clause
/// @file Find the layer that breaks determinism: three versions of a user-written layer
/// (batch_centre.hpp: y = x - mean(x) over the micro-batch) in a small model, each handed to
/// reprosgd::testing::find_nondeterminism, which trains the model for a few steps on Kokkos::Serial
/// and on the default host space (2 threads or more: `--kokkos-threads=2`) and on the GPU where
/// there is one, and names the first layer whose output or gradients differ.
///
/// Prints one report per version and exits 0 when the finder names the parallel_reduce layer (in
/// the forward pass, and in the backward pass for the version whose forward is clean) and passes
/// the owner-computes one; 1 otherwise; 2 when the host space has a single thread (nothing to compare).
#include "batch_centre.hpp"

#include <reprosgd/reprosgd.hpp>
#include <reprosgd/testing/find_nondeterminism.hpp>

#include <cstdio>
#include <exception>

namespace {

using batch_centre::BatchCentre;
using batch_centre::Sum;

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

template <Sum Forward, Sum Backward>
reprosgd::testing::NondeterminismReport check() {
  const reprosgd::testing::NondeterminismOptions options{.rows = 32, .micro_batches = 2, .steps = 3, .seed = 7};
  return reprosgd::testing::find_nondeterminism_on_every_space(MakeModel<Forward, Backward>{}, options);
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  try {
    if (reprosgd::detail::concurrency(Kokkos::DefaultHostExecutionSpace()) < 2) {
      std::printf("the default host space has one thread: run with --kokkos-threads=2 (or more) to compare\n");
      return 2;
    }
    const auto clean = check<Sum::owner, Sum::owner>();
    const auto reduce_forward = check<Sum::reduce, Sum::reduce>();
    const auto reduce_backward = check<Sum::owner, Sum::reduce>();
    const auto atomic = check<Sum::atomic, Sum::atomic>();
    for (const auto* r : {&clean, &reduce_forward, &reduce_backward, &atomic}) std::printf("%s\n", r->message().c_str());
    // The atomic version is reported but not judged: on a CPU its order often happens to be serial.
    const bool ok = clean.deterministic() && reduce_forward.divergence && reduce_forward.divergence->layer == 2 &&
                    reduce_forward.divergence->pass == "forward" && reduce_backward.divergence &&
                    reduce_backward.divergence->layer == 2 && reduce_backward.divergence->pass == "backward";
    std::printf("%s\n", ok ? "the finder names the parallel_reduce layer and passes the owner-computes one"
                           : "UNEXPECTED: see the reports above");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "find_nondeterminism: %s\n", e.what());
    return 1;
  }
}
