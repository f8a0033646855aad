// SPDX-License-Identifier: BSD-3-Clause
// train_mlp's training path for --backend serial --parallel model|hybrid --fault-tolerance restart (see
// train.hpp), where Serial sits beside a parallel default host backend: policies_model_restart.cpp's
// policy on Serial.
#include "train.hpp"

namespace train_mlp {
#if !REPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY && REPROSGD_HAS_ULFM && TRAIN_MLP_SERIAL_MPI_POLICIES
template int with_policy<UlfmGrid<Kokkos::Serial>, reprosgd::RestartFromCheckpoint>(const Config&, const Data&);
#endif
}  // namespace train_mlp
