// SPDX-License-Identifier: BSD-3-Clause
/// @file train_mlp --save-model FILE: the trained model written as a model file (architecture,
/// parameters, no optimizer state; docs/surrogates.md) at the end of training, by one rank.
#pragma once

#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/inference/model_file.hpp>
#include <reprosgd/trainer/agreement.hpp>
#include <reprosgd/trainer/sharding.hpp>

#include <cstdint>
#include <string>

namespace train_mlp {

/**
 * Writes the model file `path` in `format` (binary | portable | json, as --format): under a
 * model-parallel policy the shards are gathered into the one-process layout first, through the
 * path the Trainer's checkpoints take (Sharding::collect, collective over the model group); the
 * rank that writes checkpoints writes it, and every rank learns the verdict (an I/O error throws
 * on every rank). The file is the same bytes for every rank count and grid.
 */
template <class Par, class Model, class State>
void save_trained_model(Par& par, const Model& model, const State& optimizer_state, std::uint64_t step,
                        const std::string& path, const std::string& format) {
  using namespace reprosgd;
  detail::Sharding<Par> sharding;
  const auto canonical = sharding.collect(par, model, optimizer_state);
  detail::agreed(par, "train_mlp: --save-model", [&] {
    if (!detail::Sharding<Par>::writes_checkpoints(par)) return;
    if (format == "json")
      save_model<JsonFormat>(path, model, canonical.params, Normalization{}, step);
    else if (format == "binary")
      save_model<BinaryFormat>(path, model, canonical.params, Normalization{}, step);
    else
      save_model<PortableBinaryFormat>(path, model, canonical.params, Normalization{}, step);
  });
}

}  // namespace train_mlp
