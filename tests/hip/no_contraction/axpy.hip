// SPDX-License-Identifier: BSD-3-Clause
// The control of tests/hip/no_contraction.sh: y = a*x + y, which clang contracts into one fused
// multiply-add by default in HIP device code (-ffp-contract=fast-honor-pragmas) and computes as a
// multiply and an add with -ffp-contract=off.
#include <hip/hip_runtime.h>

__global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
