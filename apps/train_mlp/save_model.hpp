// SPDX-License-Identifier: BSD-3-Clause
/// @file train_mlp --save-model FILE: the trained model written as a model file (architecture,
/// parameters, no optimizer state; docs/surrogates.md) at the end of training, by one rank; its path
/// checked before training.
#pragma once

#include <reprosgd/checkpoint/atomic_file.hpp>
#include <reprosgd/checkpoint/formats.hpp>
#include <reprosgd/inference/save_trained.hpp>
#include <reprosgd/trainer/sharding.hpp>

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

/**
 * Fails now, on the rank that will write the model file, where `path` could not be written at the
 * end of training: its directory missing or not writable, the name a device, directory or FIFO.
 * These are the checks reprosgd::AtomicFile makes when the file is saved (it is one, never
 * committed: it creates a temporary next to `path` and its destructor removes it; a file already at
 * `path` stays as it is), made before training so that a typo in the path does not cost the run.
 * Local: run it inside an agreement (train_mlp's set_up) so that every rank learns the verdict.
 * @throws reprosgd::io_error as the save would
 */
template <class Par>
void check_model_path_writable(Par& par, const std::string& path) {
  if (path.empty() || !reprosgd::detail::Sharding<Par>::writes_checkpoints(par)) return;
  reprosgd::AtomicFile probe(path);
}

}  // namespace train_mlp
