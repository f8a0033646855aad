// SPDX-License-Identifier: BSD-3-Clause
// train_mlp's training path for --backend serial --parallel model|hybrid (see train.hpp), where Serial
// sits beside a parallel default host backend: policies_model.cpp's policies on Serial.
#include "train.hpp"

namespace train_mlp {
#if !REPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY && TRAIN_MLP_SERIAL_MPI_POLICIES
#if REPROSGD_HAS_MPI
template int with_policy<Grid<Kokkos::Serial>>(const Config&, const Data&);
#endif
#if REPROSGD_HAS_ULFM
template int with_policy<UlfmGrid<Kokkos::Serial>, reprosgd::ShrinkAndContinue>(const Config&, const Data&);
#endif
#endif
}  // namespace train_mlp
