// SPDX-License-Identifier: BSD-3-Clause
/// @file The ResNet-style test network of the contract tests for normalisation and residual
/// blocks (tests/unit/trainer/resnet_test.cpp on every backend, tests/mpi/resnet_mpi_test.cpp on
/// 1-5 ranks and model/hybrid grids): its data, its options and its pinned golden.
#pragma once

#include <reprosgd/data/synthetic.hpp>
#include <reprosgd/nn/activation.hpp>
#include <reprosgd/nn/conv2d.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/dropout.hpp>
#include <reprosgd/nn/flatten.hpp>
#include <reprosgd/nn/normalization.hpp>
#include <reprosgd/nn/pool2d.hpp>
#include <reprosgd/nn/residual.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/optim/adam.hpp>
#include <reprosgd/trainer.hpp>

namespace reprosgd_test {

/// 1x10x9 "images" (the synthetic set's 90 features): sizes the pools do not divide.
inline const reprosgd::TrainTest<Kokkos::HostSpace>& resnet_images() {
  // Created once and deliberately never destroyed: Views must not outlive Kokkos::finalize().
  static const auto* d = new reprosgd::TrainTest<Kokkos::HostSpace>(
      reprosgd::make_synthetic_train_test(13, 480, 96, 90, 10, {.separation = 0.5f}));
  return *d;
}

/// conv-bn-relu-maxpool, a basic residual block (conv-bn-relu-conv-bn), a strided block with a 1x1
/// projection, global average pool, dense-bn1d-relu, dropout, layer norm, dense: every
/// normalisation, both residual forms, odd channel counts (5, 7, 11) and image sizes.
template <class Mem>
auto resnet() {
  using namespace reprosgd;
  return make_sequential<Mem>(
      Conv2D{{1, 10, 9}, 5, 3, 1, 1}, BatchNorm2D{{5, 10, 9}}, ReLU{}, MaxPool2D{{5, 10, 9}, 2},  // 5x5x4
      Residual{Conv2D{{5, 5, 4}, 5, 3, 1, 1}, BatchNorm2D{{5, 5, 4}}, ReLU{}, Conv2D{{5, 5, 4}, 5, 3, 1, 1},
               BatchNorm2D{{5, 5, 4}}},
      ReLU{},
      ProjectedResidual{Conv2D{{5, 5, 4}, 7, 1, 2}, Conv2D{{5, 5, 4}, 7, 3, 2, 1}, BatchNorm2D{{7, 3, 2}, 0.2f}, ReLU{}},
      GlobalAvgPool{{7, 3, 2}},                                                                     // 7
      Dense{7, 11}, BatchNorm1D{11}, ReLU{}, Dropout{0.2f}, LayerNorm{11}, Dense{11, 10});
}

inline reprosgd::TrainerOptions resnet_options() {
  reprosgd::TrainerOptions o;
  o.global_batch = 30;  // 5 micro-batches: one on each of up to 5 ranks, unevenly on 2 to 4
  o.micro_batch = 6;
  o.steps = 20;
  o.seed = 23;
  return o;
}

/// Adam with weight decay (L2): the update moves every slot, running statistics included,
/// so the test also shows that the statistics keep their own rule.
inline reprosgd::Adam resnet_optimizer() { return reprosgd::Adam{{.lr = 4e-3f, .weight_decay = 1e-3f}}; }

/// Pinned on g++ 12 -O1 and -O3 -march=native, Kokkos 3.4.1 OpenMP and Serial (x86-64, Zen 4).
inline constexpr const char* resnet_golden = "6f9b3d2d96fbee8a7ece600faaa1c9a7";

}  // namespace reprosgd_test
