// SPDX-License-Identifier: BSD-3-Clause
// train_mlp's training path for --parallel model|hybrid --fault-tolerance restart (see train.hpp): a
// translation unit of its own, so that it compiles in parallel with policies_model.cpp.
#include "train.hpp"

namespace train_mlp {
#if !REPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY && REPROSGD_HAS_ULFM
template int with_policy<UlfmGrid<Kokkos::DefaultHostExecutionSpace>, reprosgd::RestartFromCheckpoint>(const Config&, const Data&);
#endif
}  // namespace train_mlp
