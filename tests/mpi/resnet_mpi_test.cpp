// SPDX-License-Identifier: BSD-3-Clause
/// @file Contract level L3 for normalisation and residual blocks: the ResNet-style test network
/// (tests/support/resnet_model.hpp) trained data-parallel, model-parallel and on a hybrid grid on
/// however many ranks this run has gives the one-process golden. Batch statistics are those of a
/// micro-batch and the running statistics are blended from the exact sum of the micro-batches',
/// so neither depends on which rank ran which micro-batch.
#include <doctest/doctest.h>

#include <reprosgd/nn/model_spec.hpp>
#include <reprosgd/parallel/data_parallel.hpp>
#include <reprosgd/parallel/hybrid.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <support/resnet_model.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include "world.hpp"

namespace {
using Host = Kokkos::DefaultHostExecutionSpace;

// A CNN whose convolutions have channel chunks of 2 (5, 7 and 3 channels: 3, 4 and 2 chunks), so
// that model parallelism splits their channels over up to 4 ranks; trained data-parallel it is the
// one-process reference of the split.
template <class Mem>
auto chunked_cnn() {
  using namespace reprosgd;
  return make_sequential<Mem>(Conv2D{{1, 10, 9}, 5, 3, 1, 1, Init::he_normal, 2}, BatchNorm2D{{5, 10, 9}}, ReLU{},
                              MaxPool2D{{5, 10, 9}, 2}, Conv2D{{5, 5, 4}, 7, 3, 2, 1, Init::he_normal, 2}, ReLU{},
                              Conv2D{{7, 3, 2}, 3, 1, 1, 0, Init::he_normal, 2}, Flatten{{3, 3, 2}}, Dropout{0.1f},
                              Dense{18, 10, Init::he_normal, 4});
}

// Residual blocks whose convolutions (and a projection) have channel chunks of 2, nested once: model
// parallelism splits the convolutions inside the blocks as it splits the model's own.
template <class Mem>
auto chunked_resnet() {
  using namespace reprosgd;
  return make_sequential<Mem>(
      Conv2D{{1, 10, 9}, 5, 3, 1, 1, Init::he_normal, 2}, BatchNorm2D{{5, 10, 9}}, ReLU{}, MaxPool2D{{5, 10, 9}, 2},
      Residual{Conv2D{{5, 5, 4}, 5, 3, 1, 1, Init::he_normal, 2}, BatchNorm2D{{5, 5, 4}}, ReLU{}, Dropout{0.1f},
               Residual{Conv2D{{5, 5, 4}, 5, 3, 1, 1, Init::he_normal, 2}}},
      ProjectedResidual{Conv2D{{5, 5, 4}, 7, 1, 2, 0, Init::he_normal, 2}, Conv2D{{5, 5, 4}, 7, 3, 2, 1, Init::he_normal, 2},
                        ReLU{}},
      GlobalAvgPool{{7, 3, 2}}, Residual{Dense{7, 7, Init::he_normal, 2}, ReLU{}}, Dense{7, 10, Init::he_normal, 4});
}

// The same layers composed at run time (train_mlp --model), channel and feature chunks of 2: the
// model takes the Network's layers as its own, so its convolutions and dense layer are split too.
template <class Mem>
auto chunked_network() {
  using namespace reprosgd;
  return make_sequential<Mem>(parse_network("conv(5,3,p1),bn,relu,maxpool(2),conv(7,3,s2,p1),relu,conv(3,1),flatten,"
                                            "dropout(0.1),dense(10)",
                                            {1, 10, 9}, 0, NetworkSpecOptions{.feature_chunk = 2}));
}

template <class Par, class Model>
reprosgd::Fingerprint train(Par par, Model model) {
  reprosgd::Trainer<Par> trainer(reprosgd_test::resnet_options(), std::move(par));
  const auto adam = reprosgd_test::resnet_optimizer();
  auto state = trainer.start(model, adam);
  trainer.fit(model, adam, state, reprosgd_test::resnet_images().train);
  return trainer.fingerprint(model, state);
}

template <class Par>
reprosgd::Fingerprint train_resnet(Par par) {
  return train(std::move(par), reprosgd_test::resnet<Kokkos::HostSpace>());
}

// make() trained model-parallel over every rank (and on a 2x2 grid with 4) gives its one-process
// bits; returns this rank's shard of it.
template <class Make>
auto check_split(Make make) {
  const int p = reprosgd_test::world_size();
  INFO("ranks " << p);
  const auto one = train(reprosgd::Serial<Host>(), make());
  CHECK(train(reprosgd::ModelParallel<Host>(), make()) == one);
  if (p == 4) CHECK(train(reprosgd::Hybrid<Host>(reprosgd::GridShape::parse("2x2")), make()) == one);
  auto model = make();
  model.shard(reprosgd_test::world_rank(), p);
  return model;
}
// The output channels of this rank of a convolution of 5 in chunks of 2 (3 chunks).
reprosgd::FeatureRange channels_of_five() {
  return reprosgd::Conv2D{{1, 1, 1}, 5, 1, 1, 0, reprosgd::Init::he_normal, 2}.features_of(reprosgd_test::world_rank(),
                                                                                           reprosgd_test::world_size());
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
  TEST_CASE("convolutions split by channel chunks over the model group: the one-process bits") {
    // The shard each rank holds: its channels' columns of W, then their biases (3 chunks of the
    // first convolution's 5 channels, split like Dense's feature chunks).
    const auto model = check_split(chunked_cnn<Kokkos::HostSpace>);
    CHECK(model.parameter_offset(1) == static_cast<std::size_t>(10 * channels_of_five().size()));
  }
  TEST_CASE("convolutions and dense layers inside residual blocks split over the model group: the one-process bits") {
    // The first block's parameters on this rank: its first convolution's channels (3 chunks of
    // 2 over 5, 46 parameters each), the batch norm's 20 (replicated), the nested block's
    // convolution's channels.
    const auto model = check_split(chunked_resnet<Kokkos::HostSpace>);
    CHECK(model.parameter_offset(5) - model.parameter_offset(4) ==
          static_cast<std::size_t>(2 * 46 * channels_of_five().size() + 20));
  }
  TEST_CASE("a network composed at run time is split the same way: its one-process bits") {
    const auto model = check_split(chunked_network<Kokkos::HostSpace>);
    CHECK(model.layer_count() == 10);
    CHECK(model.parameter_offset(1) == static_cast<std::size_t>(10 * channels_of_five().size()));
  }
}
