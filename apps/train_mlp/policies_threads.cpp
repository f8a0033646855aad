// SPDX-License-Identifier: BSD-3-Clause
// train_mlp's training path for the threads policies (see train.hpp): one translation unit each, so
// that they compile in parallel.
#include "train.hpp"

namespace train_mlp {
#if defined(KOKKOS_ENABLE_THREADS)
template int with_policy<DataPolicy<Kokkos::Threads, reprosgd::Exact>>(const Config&, const Data&);
#if !defined(KOKKOS_ENABLE_OPENMP) && !REPROSGD_TRAIN_MLP_DEFAULT_BACKEND_ONLY  // Threads is the default host backend
template int with_policy<DataPolicy<Kokkos::Threads, reprosgd::Native>>(const Config&, const Data&);
#endif
#endif
}  // namespace train_mlp
