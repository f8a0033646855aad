// SPDX-License-Identifier: BSD-3-Clause
/// @file make_regression_model OUT: writes a small regression model file for predict.sh — Dense{2, 2}
/// with W = [[2, 0], [0, 1]], b = [0, 0.5], input normalisation mean [1, -1], std [0.5, 0] and output
/// normalisation mean [10, -3], std [4, 0] — whose outputs are exact in float:
///   x' = ((x0 - 1) / 0.5, x1 + 1);  y' = (2 x0', x1' + 0.5);  y = (4 y0' + 10, y1' - 3).
#include <reprosgd/inference/model_file.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/sequential.hpp>

#include <Kokkos_Core.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_regression_model OUT\n");
    return 2;
  }
  auto model = reprosgd::Sequential{reprosgd::Dense{2, 2}};
  auto p = Kokkos::create_mirror_view(model.parameters());
  const float values[6] = {2.0f, 0.0f, 0.0f, 1.0f, 0.0f, 0.5f};  // W row-major (in x out), then b
  for (int i = 0; i < 6; ++i) p(i) = values[i];
  Kokkos::deep_copy(model.parameters(), p);
  reprosgd::Normalization norm;
  norm.inputs.mean = {1.0f, -1.0f};
  norm.inputs.std_dev = {0.5f, 0.0f};
  norm.outputs.mean = {10.0f, -3.0f};
  norm.outputs.std_dev = {4.0f, 0.0f};
  reprosgd::save_model(argv[1], model, norm);
  return 0;
}
