// SPDX-License-Identifier: BSD-3-Clause
// train_mlp's training path for the serial policies (see train.hpp): one translation unit each, so
// that they compile in parallel.
#include "train.hpp"

namespace train_mlp {
#if defined(KOKKOS_ENABLE_SERIAL)
template int with_policy<DataPolicy<Kokkos::Serial, reprosgd::Exact>>(const Config&, const Data&);
#if !defined(KOKKOS_ENABLE_OPENMP) && !defined(KOKKOS_ENABLE_THREADS) && !REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY  // Serial is the default host backend
template int with_policy<DataPolicy<Kokkos::Serial, reprosgd::Native>>(const Config&, const Data&);
#endif
#endif
}  // namespace train_mlp
