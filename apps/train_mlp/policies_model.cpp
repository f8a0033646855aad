// SPDX-License-Identifier: BSD-3-Clause
// train_mlp's training path for the model-parallel policies (see train.hpp): one translation unit
// each, so that they compile in parallel.
#include "train.hpp"

namespace train_mlp {
#if !REPROSGD_TRAIN_MLP_DATA_PARALLEL_ONLY
#if REPROSGD_HAS_MPI
template int with_policy<Grid<Kokkos::DefaultHostExecutionSpace>>(const Config&, const Data&);
#endif
#if REPROSGD_HAS_ULFM
template int with_policy<UlfmGrid<Kokkos::DefaultHostExecutionSpace>, reprosgd::ShrinkAndContinue>(const Config&, const Data&);
#endif
#endif
}  // namespace train_mlp
