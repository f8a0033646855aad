// SPDX-License-Identifier: BSD-3-Clause
// train_mlp's training path for the ulfm policies (see train.hpp): one translation unit each, so
// that they compile in parallel.
#include "train.hpp"

namespace train_mlp {
#if !REPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY
#if REPROSGD_HAS_ULFM
template int with_policy<UlfmData<Kokkos::DefaultHostExecutionSpace>, reprosgd::ShrinkAndContinue>(const Config&, const Data&);
template int with_policy<UlfmData<Kokkos::DefaultHostExecutionSpace>, reprosgd::RestartFromCheckpoint>(const Config&, const Data&);
#endif
#endif
}  // namespace train_mlp
