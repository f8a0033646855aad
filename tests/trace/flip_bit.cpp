// SPDX-License-Identifier: BSD-3-Clause
/// @file flip_bit IN OUT INDEX BIT: flip bit BIT of parameter INDEX (canonical layout) and sign the
/// result again, as the library signs every file (checksums and configuration hash recomputed): a
/// deliberately perturbed model for reprosgd_diff to name by element. IN a model file: OUT is a model
/// file. IN a training checkpoint (Sgd, Adam or AdamW): OUT is the same checkpoint, same format,
/// header and optimizer state, with the one bit flipped — a file a Trainer resumes from.
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/inference/model_file.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

namespace {

void flip(reprosgd::HostBuffer& params, std::size_t index, int bit) {
  if (index >= params.extent(0) || bit < 0 || bit > 31) throw std::runtime_error("index or bit out of range");
  std::uint32_t u;
  std::memcpy(&u, &params(index), sizeof u);
  u ^= std::uint32_t{1} << bit;
  std::memcpy(&params(index), &u, sizeof u);
}

// A training checkpoint: loaded (verified) into host buffers with its optimizer's state type, the
// bit flipped, saved with the same header (step, data cursor, configuration) and format.
void flip_checkpoint(const std::string& in, const std::string& out, std::size_t index, int bit) {
  const reprosgd::SnapshotInfo info = reprosgd::read_snapshot_info(in);
  std::vector<std::string> layers;
  for (std::size_t i = 0; const std::string* l = info.config.find("layer." + std::to_string(i)); ++i) layers.push_back(*l);
  const auto arch = reprosgd::ModelArchitecture::parse(layers, "flip_bit: " + in);
  const std::string* opt = info.config.find("optimizer");
  const std::string name = opt ? opt->substr(0, opt->find('(')) : std::string();
  auto rewrite = [&]<class Opt>(Opt) {
    reprosgd::HostBuffer params("flip_bit::parameters", arch.parameter_count);
    typename Opt::template state_type<Kokkos::HostSpace> state{};
    reprosgd::detail::TrainingPayload<reprosgd::HostBuffer, decltype(state)> payload{&params, &state};
    reprosgd::detail::with_format_named(info.format_name, "flip_bit: " + in, [&]<class F>(F) {
      (void)reprosgd::load_snapshot<F>(in, info.config, payload);
      flip(params, index, bit);
      reprosgd::save_snapshot<F>(out, info, payload);
    });
  };
  if (name == "sgd") rewrite(reprosgd::Sgd{});
  else if (name == "adam") rewrite(reprosgd::Adam{});
  else if (name == "adamw") rewrite(reprosgd::AdamW{});
  else throw std::runtime_error("flip_bit: " + in + ": an optimizer this tool does not know");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: flip_bit IN OUT INDEX BIT\n");
    return 2;
  }
  reprosgd::detail::initialize(1, true);
  int rc = 0;
  try {
    const auto index = static_cast<std::size_t>(std::stoull(argv[3]));
    const int bit = std::atoi(argv[4]);
    const reprosgd::SnapshotInfo info = reprosgd::read_snapshot_info(argv[1]);
    const std::string* kind = info.config.find("kind");
    if (kind != nullptr && *kind == "model") {
      reprosgd::ModelFile m = reprosgd::read_model(argv[1]);
      flip(m.parameters, index, bit);
      reprosgd::write_model_file(argv[2], m);
    } else {
      flip_checkpoint(argv[1], argv[2], index, bit);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flip_bit: %s\n", e.what());
    rc = 1;
  }
  Kokkos::finalize();
  return rc;
}
