// SPDX-License-Identifier: BSD-3-Clause
// train_mlp's training path for the CUDA policy (see train.hpp): the model, optimizer state and
// workspaces in device memory, the data set staged from the host micro-batch by micro-batch.
#include "train.hpp"

namespace train_mlp {
#if defined(KOKKOS_ENABLE_CUDA)
template int with_policy<DataPolicy<Kokkos::Cuda, reprosgd::Exact>>(const Config&, const Data&);
#endif
}  // namespace train_mlp
