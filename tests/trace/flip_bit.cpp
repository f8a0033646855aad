// SPDX-License-Identifier: BSD-3-Clause
/// @file flip_bit MODEL OUT INDEX BIT: read the model (a model file or a checkpoint), flip bit BIT of
/// parameter INDEX (canonical layout) and write it to OUT as a model file, signed as every model file
/// is (checksums recomputed): a deliberately perturbed model for reprosgd_diff to name by element.
#include <reprosgd/detail/kokkos_compat.hpp>
#include <reprosgd/inference/model_file.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: flip_bit MODEL OUT INDEX BIT\n");
    return 2;
  }
  reprosgd::detail::initialize(1, true);
  int rc = 0;
  try {
    reprosgd::ModelFile m = reprosgd::read_model(argv[1]);
    const auto index = static_cast<std::size_t>(std::stoull(argv[3]));
    const int bit = std::atoi(argv[4]);
    if (index >= m.parameters.extent(0) || bit < 0 || bit > 31) throw std::runtime_error("index or bit out of range");
    std::uint32_t u;
    std::memcpy(&u, &m.parameters(index), sizeof u);
    u ^= std::uint32_t{1} << bit;
    std::memcpy(&m.parameters(index), &u, sizeof u);
    reprosgd::write_model_file(argv[2], m);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flip_bit: %s\n", e.what());
    rc = 1;
  }
  Kokkos::finalize();
  return rc;
}
