// SPDX-License-Identifier: BSD-3-Clause
// train_mlp's training path for --backend serial --fault-tolerance shrink|restart (see train.hpp),
// where Serial sits beside a parallel default host backend: policies_ulfm.cpp's policies on Serial.
#include "train.hpp"

namespace train_mlp {
#if !REPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY && REPROSGD_HAS_ULFM && TRAIN_MLP_SERIAL_MPI_POLICIES
template int with_policy<UlfmData<Kokkos::Serial>, reprosgd::ShrinkAndContinue>(const Config&, const Data&);
template int with_policy<UlfmData<Kokkos::Serial>, reprosgd::RestartFromCheckpoint>(const Config&, const Data&);
#endif
}  // namespace train_mlp
