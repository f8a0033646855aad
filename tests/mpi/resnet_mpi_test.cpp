// SPDX-License-Identifier: BSD-3-Clause
/// @file Contract level L3 for normalisation and residual blocks: the ResNet-style test network
/// (tests/support/resnet_model.hpp) trained data-parallel, model-parallel and on a hybrid grid on
/// however many ranks this run has gives the one-process golden. Batch statistics are those of a
/// micro-batch and the running statistics are blended from the exact sum of the micro-batches',
/// so neither depends on which rank ran which micro-batch.
#include <doctest/doctest.h>

#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/hybrid.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <support/resnet_model.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include "world.hpp"

namespace {
using Host = Kokkos::DefaultHostExecutionSpace;

template <class Par>
reprosgd::Fingerprint train_resnet(Par par) {
  reprosgd::Trainer<Par> trainer(reprosgd_test::resnet_options(), std::move(par));
  auto model = reprosgd_test::resnet<Kokkos::HostSpace>();
  const auto adam = reprosgd_test::resnet_optimizer();
  auto state = trainer.start(model, adam);
  trainer.fit(model, adam, state, reprosgd_test::resnet_images().train);
  return trainer.fingerprint(model, state);
}
}  // namespace

TEST_SUITE("trainer/resnet_ranks") {
  TEST_CASE("data-parallel on every rank count: the one-process golden") {
    INFO("ranks " << reprosgd_test::world_size());
    REPROSGD_CHECK_FINGERPRINT(train_resnet(reprosgd::DataParallel<Host>()), reprosgd_test::resnet_golden);
  }
  TEST_CASE("model-parallel over every rank, and a 2x2 hybrid grid on 4: the one-process golden") {
    const int p = reprosgd_test::world_size();
    INFO("ranks " << p);
    REPROSGD_CHECK_FINGERPRINT(train_resnet(reprosgd::ModelParallel<Host>()), reprosgd_test::resnet_golden);
    if (p == 4)
      REPROSGD_CHECK_FINGERPRINT(train_resnet(reprosgd::Hybrid<Host>(reprosgd::GridShape::parse("2x2"))),
                                 reprosgd_test::resnet_golden);
  }
}
