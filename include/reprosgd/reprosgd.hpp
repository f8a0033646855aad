// SPDX-License-Identifier: BSD-3-Clause
/// @file The umbrella header: everything a serial user needs (MPI parts come with their own headers).
#pragma once

#include <reprosgd/config.hpp>
#include <reprosgd/error.hpp>
#include <reprosgd/fingerprint.hpp>
#include <reprosgd/version.hpp>

#include <reprosgd/math/elementary.hpp>
#include <reprosgd/math/fp_environment.hpp>

#include <reprosgd/rng/distributions.hpp>
#include <reprosgd/rng/philox.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <reprosgd/kernels/elementwise.hpp>
#include <reprosgd/kernels/gemm.hpp>
#include <reprosgd/kernels/loss.hpp>

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
#include <reprosgd/optim/any_optimizer.hpp>
#include <reprosgd/optim/schedule.hpp>
#include <reprosgd/optim/sgd.hpp>

#include <reprosgd/data/csv_reader.hpp>
#include <reprosgd/data/dataset.hpp>
#include <reprosgd/data/fashion_mnist.hpp>
#include <reprosgd/data/idx_reader.hpp>
#include <reprosgd/data/keyed_permutation.hpp>
#include <reprosgd/data/normalize.hpp>
#include <reprosgd/data/sample_stream.hpp>
#include <reprosgd/data/synthetic.hpp>

#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/reduction/exact.hpp>

#include <reprosgd/trainer.hpp>

#include <reprosgd/inference/architecture.hpp>
#include <reprosgd/inference/model_file.hpp>
#include <reprosgd/inference/normalization.hpp>
#include <reprosgd/inference/predict.hpp>
#include <reprosgd/inference/save_trained.hpp>
