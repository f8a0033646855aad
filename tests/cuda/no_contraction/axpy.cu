// SPDX-License-Identifier: BSD-3-Clause
// The control of tests/cuda/no_contraction.sh: y = a*x + y, which nvcc contracts into one FFMA
// unless --fmad=false (then an FMUL and an FADD, two roundings, as the source is written).
__global__ void axpy(float* y, const float* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
