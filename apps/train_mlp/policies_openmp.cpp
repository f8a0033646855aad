// SPDX-License-Identifier: BSD-3-Clause
// train_mlp's training path for the openmp policies (see train.hpp): one translation unit each, so
// that they compile in parallel.
#include "train.hpp"

namespace train_mlp {
#if defined(KOKKOS_ENABLE_OPENMP)
template int with_policy<DataPolicy<Kokkos::OpenMP, reprosgd::Exact>>(const Config&, const Data&);
#if !REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY  // has_native
template int with_policy<DataPolicy<Kokkos::OpenMP, reprosgd::Native>>(const Config&, const Data&);
#endif
#endif
}  // namespace train_mlp
