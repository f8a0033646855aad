// SPDX-License-Identifier: BSD-3-Clause
/// @file A user's own determinism tests: their training gives one pinned fingerprint on every host
/// backend, on 1 or 2 threads, and on 1, 2 or 3 MPI ranks.
///
/// `train()` is the user's training (here: a 20 -> 32 -> 4 MLP with dropout and Adam, 20 steps on
/// a synthetic classification problem, well under a second). Each test case runs it in one setting
/// and checks the fingerprint of the trained parameters and optimizer state against the golden
/// pinned below. The settings:
///  - every host backend this Kokkos build enables (TEST_CASE_TEMPLATE over HostExecutionSpaces):
///    Serial is the one-thread run; OpenMP/Threads use the threads Kokkos was given, so run the
///    program with `--kokkos-num-threads=1` and `=2` (`--kokkos-threads` before Kokkos 3.7);
///  - MPI data parallelism on 1, 2 and 3 ranks (REPROSGD_MPI_TEST_CASE, when ReproSGD has MPI;
///    launch with `mpiexec -n 3`): the global batch (64) and the micro-batch (16) are fixed, so the
///    4 micro-batches are the same whoever computes them, and the Exact reduction sums them the
///    same way on any rank count (docs/distributed.md).
#include <doctest/doctest.h>

#include <reprosgd/reprosgd.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>
#include <reprosgd/testing/host_execution_spaces.hpp>
#if REPROSGD_HAS_MPI
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/testing/doctest_mpi.hpp>
#endif

#include <utility>

namespace {

// The fingerprint train() gives, in every setting below. Obtained by running this test once with
// a placeholder: REPROSGD_CHECK_FINGERPRINT failed and printed the line to paste here. Re-pin the
// same way after a deliberate change (the model, the data, a hyperparameter, a new library version
// whose numerics changed): the failure message ends with `training_golden = "<32 hex digits>"`.
// An unexplained failure is what the test is for: the training is not reproducible any more.
constexpr const char* training_golden = "34756fc4c5fb86af21686d7bc665d714";

/// The user's training: the same model on any parallelism, Serial<Space> (one process, any host
/// backend) or DataParallel<> (MPI ranks); returns the fingerprint of its result.
template <class Par>
reprosgd::Fingerprint train(Par par) {
  using Memory = typename Par::execution_space::memory_space;
  // 512 training samples, 20 features, 4 classes: a pure function of the seed.
  const auto data = reprosgd::make_synthetic_train_test(/*seed=*/42, 512, 128, 20, 4, {.separation = 0.2f});
  reprosgd::Trainer<Par> trainer({.global_batch = 64, .micro_batch = 16, .steps = 20, .seed = 42}, std::move(par));
  auto model = reprosgd::make_sequential<Memory>(reprosgd::Dense{20, 32}, reprosgd::ReLU{}, reprosgd::Dropout{0.1f},
                                                 reprosgd::Dense{32, 4});
  const reprosgd::Adam adam{{.lr = 1e-2f}};
  auto state = trainer.start(model, adam);
  trainer.fit(model, adam, state, data.train);
  return reprosgd::fingerprint(model, state.optimizer);
}

}  // namespace

TEST_SUITE("my training is reproducible") {
  TEST_CASE_TEMPLATE_DEFINE("the pinned golden on every host backend", Space, host_backends) {
    INFO(reprosgd::testing::describe(Space()));  // e.g. "OpenMP, 2 threads", shown on a failure
    REPROSGD_CHECK_FINGERPRINT(train(reprosgd::Serial<Space>()), training_golden);
  }
  TEST_CASE_TEMPLATE_APPLY(host_backends, reprosgd::testing::HostExecutionSpaces);

#if REPROSGD_HAS_MPI
  // Every rank holds the whole model (data parallelism), so every rank checks the same fingerprint.
  REPROSGD_MPI_TEST_CASE("the pinned golden on 1 MPI rank", 1) {
    REPROSGD_CHECK_FINGERPRINT(train(reprosgd::DataParallel<>(test_comm)), training_golden);
  }
  REPROSGD_MPI_TEST_CASE("the pinned golden on 2 MPI ranks", 2) {
    REPROSGD_CHECK_FINGERPRINT(train(reprosgd::DataParallel<>(test_comm)), training_golden);
  }
  REPROSGD_MPI_TEST_CASE("the pinned golden on 3 MPI ranks", 3) {
    REPROSGD_CHECK_FINGERPRINT(train(reprosgd::DataParallel<>(test_comm)), training_golden);
  }
#endif
}
