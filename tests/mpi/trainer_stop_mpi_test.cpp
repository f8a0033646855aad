// SPDX-License-Identifier: BSD-3-Clause
/// @file Trainer on DataParallel: a stop asked on one rank only stops every rank at the same step.
#include <doctest/doctest.h>

#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/reprosgd.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <filesystem>
#include <string>
#include <unistd.h>

#include "world.hpp"

namespace {
using Host = Kokkos::DefaultHostExecutionSpace;

/// Asks to stop after step `at` on rank 0 only, as a wall-clock watchdog might.
struct StopOnRankZero {
  int rank;
  std::uint64_t at;
  bool on_step_end(const reprosgd::StepMetrics& m) const { return rank == 0 && m.step == at; }
};
}  // namespace

TEST_SUITE("trainer/data_parallel") {
  TEST_CASE("a stop asked on one rank stops every rank at that step, and the step is checkpointed") {
    // One directory for all ranks: rank 0's pid, broadcast.
    int pid = static_cast<int>(::getpid());
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("reprosgd-stop-" + std::to_string(pid));
    const auto data = reprosgd::make_synthetic_train_test(7, 640, 64, 16, 4, {.separation = 0.2f});
    reprosgd::TrainerOptions o;
    o.global_batch = 40;
    o.micro_batch = 8;
    o.steps = 12;
    o.seed = 11;
    o.checkpoint_dir = dir.string();
    o.checkpoint_every = 0;  // only at a stop and at the end
    reprosgd::Trainer<reprosgd::DataParallel<Host>> trainer(o);
    reprosgd::Sequential model{reprosgd::Dense{16, 8}, reprosgd::ReLU{}, reprosgd::Dense{8, 4}};
    const reprosgd::Sgd sgd{{.lr = 0.05f, .momentum = 0.9f}};
    auto state = trainer.start(model, sgd);
    StopOnRankZero stopper{reprosgd_test::world_rank(), 4};
    const reprosgd::FitResult r = trainer.fit(model, sgd, state, data.train, stopper);
    CHECK(r.stopped_early);
    CHECK(state.step == 5);
    CHECK(r.steps == 5);
    MPI_Barrier(MPI_COMM_WORLD);  // rank 0 wrote the checkpoint before the others look
    const reprosgd::CheckpointManager<reprosgd::PortableBinaryFormat> ckpts(dir);
    const auto files = ckpts.list();
    REQUIRE(files.size() == 1);
    CHECK(files.front().step == 5);
    MPI_Barrier(MPI_COMM_WORLD);
    if (reprosgd_test::world_rank() == 0) std::filesystem::remove_all(dir);
  }
}
