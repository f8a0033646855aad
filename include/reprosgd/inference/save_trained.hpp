// SPDX-License-Identifier: BSD-3-Clause
/// @file save_trained_model: a Trainer's model written as a model file by a collective call, the
/// shards of a model-parallel run gathered first.
#pragma once

#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/inference/model_file.hpp>
#include <reprosgd/inference/normalization.hpp>
#include <reprosgd/trainer/agreement.hpp>
#include <reprosgd/trainer/sharding.hpp>

#include <filesystem>

REPROSGD_BEGIN_NAMESPACE

/**
 * Writes `model` as trained by `trainer` to the model file `path` (docs/surrogates.md): the
 * architecture, the parameters in the one-process layout, `normalization` and the step, no
 * optimizer state. Under a model-parallel policy the shards are gathered through the path the
 * Trainer's checkpoints take; the rank that writes checkpoints writes the file and every rank
 * learns the verdict, so an I/O error throws on every rank. The file is the same bytes for every
 * rank count, grid, thread count and backend.
 *
 * **Example**: `reprosgd::save_trained_model(trainer, "surrogate.rsgdm", model, state, norm);`
 *
 * @collective @throws io_error (on every rank) when the file cannot be written
 */
template <CheckpointFormat F = PortableBinaryFormat, class Trainer, class Model, class State>
void save_trained_model(Trainer& trainer, const std::filesystem::path& path, const Model& model, const State& state,
                        const Normalization& normalization = {}) {
  using Par = typename Trainer::parallelism_type;
  auto& par = trainer.parallelism();
  detail::Sharding<Par> sharding;
  const auto canonical = sharding.collect(par, model, state.optimizer);
  detail::agreed(par, "reprosgd::save_trained_model", [&] {
    if (!detail::Sharding<Par>::writes_checkpoints(par)) return;
    save_model<F>(path, model, canonical.params, normalization, state.step);
  });
}

REPROSGD_END_NAMESPACE
