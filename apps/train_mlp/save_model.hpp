// SPDX-License-Identifier: BSD-3-Clause
/// @file train_mlp --save-model FILE: the trained model written as a model file (architecture,
/// parameters, no optimizer state; docs/surrogates.md) at the end of training, by one rank.
#pragma once

#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/inference/save_trained.hpp>

#include <string>

namespace train_mlp {

/**
 * Writes the model file `path` in `format` (binary | portable | json, as --format), with the
 * --standardize statistics (empty without it), with
 * reprosgd::save_trained_model (collective: under a model-parallel policy the shards are gathered
 * into the one-process layout first; one rank writes, every rank learns the verdict).
 */
template <class Trainer, class Model, class State>
void save_model_in_format(Trainer& trainer, const Model& model, const State& state, const std::string& path,
                         const std::string& format, const reprosgd::Normalization& normalization) {
  using namespace reprosgd;
  if (format == "json")
    reprosgd::save_trained_model<JsonFormat>(trainer, path, model, state, normalization);
  else if (format == "binary")
    reprosgd::save_trained_model<BinaryFormat>(trainer, path, model, state, normalization);
  else
    reprosgd::save_trained_model<PortableBinaryFormat>(trainer, path, model, state, normalization);
}

}  // namespace train_mlp
