// SPDX-License-Identifier: BSD-3-Clause
/// @file Standalone CUDA check (no Kokkos CUDA build needed): every float through the math functions on the GPU and on the host, compared bit for bit.
//
// Build (docs/math.md, "Device check"):
//   nvcc -std=c++20 -O3 -arch=sm_90 --fmad=false -Xcompiler -ffp-contract=off -I include \
//        tests/unit/math/cuda/elementary_device_check.cu -o elementary_device_check
// Run: ./elementary_device_check   (exit code 0: identical bits everywhere)
//
// KOKKOS_INLINE_FUNCTION is defined here, so elementary.hpp does not include Kokkos at all.
#define KOKKOS_INLINE_FUNCTION __host__ __device__ inline

#include <reprosgd/math/elementary.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace rm = reprosgd::math;

#define CUDA_CHECK(call)                                                                     \
  do {                                                                                       \
    const cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

constexpr int n_functions = 6;
const char* const names[n_functions] = {"exp", "log", "tanh", "sigmoid", "sinpi", "cospi"};

__host__ __device__ inline float apply(int f, float x) {
  switch (f) {
    case 0: return rm::exp(x);
    case 1: return rm::log(x);
    case 2: return rm::tanh(x);
    case 3: return rm::sigmoid(x);
    case 4: return rm::sinpi(x);
    default: return rm::cospi(x);
  }
}

__host__ __device__ inline std::uint32_t bits_of(float f) { return rm::detail::bits(f); }

__global__ void all_floats(std::uint64_t begin, std::uint64_t count, std::uint32_t* out) {
  const std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const float x = rm::detail::float_from_bits(static_cast<std::uint32_t>(begin + i));
  for (int f = 0; f < n_functions; ++f) out[f * count + i] = bits_of(apply(f, x));
}

__global__ void lse_rows(const float* m, int rows, int cols, float* out_rows, float* out_cols) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < rows) out_rows[i] = rm::log_sum_exp(m + static_cast<std::size_t>(i) * cols, cols);
  if (i < cols) out_cols[i] = rm::log_sum_exp(m + i, rows, cols);
}

__global__ void double_grid(int n, double* cos_out, double* sin_out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > n) return;
  const double x = static_cast<double>(i) / n * 4.0 - 2.0;  // [-2, 2]
  cos_out[i] = rm::cospi(x);
  sin_out[i] = rm::sinpi(x);
}

int main() {
  int dev = 0;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

  constexpr std::uint64_t chunk = std::uint64_t{1} << 28;
  std::uint32_t* d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_out, n_functions * chunk * sizeof(std::uint32_t)));
  std::uint32_t* h_out = nullptr;
  CUDA_CHECK(cudaMallocHost(&h_out, n_functions * chunk * sizeof(std::uint32_t)));

  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::uint64_t mismatches[n_functions] = {};
  std::uint32_t first_bad[n_functions];
  std::fill(first_bad, first_bad + n_functions, 0xffffffffu);
  for (std::uint64_t begin = 0; begin < (std::uint64_t{1} << 32); begin += chunk) {
    all_floats<<<static_cast<unsigned>(chunk / 256), 256>>>(begin, chunk, d_out);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(h_out, d_out, n_functions * chunk * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
    std::vector<std::thread> pool;
    std::vector<std::uint64_t> local(threads * n_functions, 0);
    std::vector<std::uint32_t> local_first(threads * n_functions, 0xffffffffu);
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (std::uint64_t i = t; i < chunk; i += threads) {
          const auto b = static_cast<std::uint32_t>(begin + i);
          const float x = rm::detail::float_from_bits(b);
          for (int f = 0; f < n_functions; ++f) {
            if (bits_of(apply(f, x)) != h_out[f * chunk + i]) {
              ++local[t * n_functions + f];
              local_first[t * n_functions + f] = std::min(local_first[t * n_functions + f], b);
            }
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    for (unsigned t = 0; t < threads; ++t) {
      for (int f = 0; f < n_functions; ++f) {
        mismatches[f] += local[t * n_functions + f];
        first_bad[f] = std::min(first_bad[f], local_first[t * n_functions + f]);
      }
    }
  }
  int failed = 0;
  for (int f = 0; f < n_functions; ++f) {
    std::printf("%-8s all 2^32 bit patterns: %llu differ between GPU and host", names[f],
                static_cast<unsigned long long>(mismatches[f]));
    if (mismatches[f] != 0) {
      const float x = rm::detail::float_from_bits(first_bad[f]);
      std::printf(" (first at 0x%08x = %a: host %a)", first_bad[f], static_cast<double>(x),
                  static_cast<double>(apply(f, x)));
      failed = 1;
    }
    std::printf("\n");
  }
  CUDA_CHECK(cudaFree(d_out));
  CUDA_CHECK(cudaFreeHost(h_out));

  // log_sum_exp over the rows and the columns (stride) of a matrix with -inf entries.
  const int rows = 4096, cols = 1000;
  std::vector<float> m(static_cast<std::size_t>(rows) * cols);
  std::uint32_t s = 1u;
  for (auto& v : m) {
    s = s * 1664525u + 1013904223u;
    v = (s >> 28) == 0 ? -__builtin_inff() : static_cast<float>(static_cast<int>(s >> 8) % 20000) * 0.01f - 100.0f;
  }
  float *d_m, *d_r, *d_c;
  CUDA_CHECK(cudaMalloc(&d_m, m.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_r, rows * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_c, cols * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(d_m, m.data(), m.size() * sizeof(float), cudaMemcpyHostToDevice));
  lse_rows<<<(rows + 255) / 256, 256>>>(d_m, rows, cols, d_r, d_c);
  CUDA_CHECK(cudaGetLastError());
  std::vector<float> r(rows), c(cols);
  CUDA_CHECK(cudaMemcpy(r.data(), d_r, rows * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(c.data(), d_c, cols * sizeof(float), cudaMemcpyDeviceToHost));
  int lse_bad = 0;
  for (int i = 0; i < rows; ++i) lse_bad += bits_of(r[i]) != bits_of(rm::log_sum_exp(m.data() + static_cast<std::size_t>(i) * cols, cols));
  for (int i = 0; i < cols; ++i) lse_bad += bits_of(c[i]) != bits_of(rm::log_sum_exp(m.data() + i, rows, cols));
  std::printf("log_sum_exp %d rows + %d strided columns: %d differ\n", rows, cols, lse_bad);
  failed |= lse_bad != 0;

  // cospi/sinpi(double) on 2^24 + 1 points of [-2, 2].
  const int n = 1 << 24;
  double *d_cos, *d_sin;
  CUDA_CHECK(cudaMalloc(&d_cos, (n + 1) * sizeof(double)));
  CUDA_CHECK(cudaMalloc(&d_sin, (n + 1) * sizeof(double)));
  double_grid<<<(n + 256) / 256, 256>>>(n, d_cos, d_sin);
  CUDA_CHECK(cudaGetLastError());
  std::vector<double> hc(n + 1), hs(n + 1);
  CUDA_CHECK(cudaMemcpy(hc.data(), d_cos, (n + 1) * sizeof(double), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(hs.data(), d_sin, (n + 1) * sizeof(double), cudaMemcpyDeviceToHost));
  int dbl_bad = 0;
  for (int i = 0; i <= n; ++i) {
    const double x = static_cast<double>(i) / n * 4.0 - 2.0;
    dbl_bad += rm::detail::bits(hc[i]) != rm::detail::bits(rm::cospi(x));
    dbl_bad += rm::detail::bits(hs[i]) != rm::detail::bits(rm::sinpi(x));
  }
  std::printf("cospi/sinpi(double) on %d points: %d differ\n", n + 1, dbl_bad);
  failed |= dbl_bad != 0;
  std::printf(failed ? "RESULT: GPU and host bits DIFFER\n" : "RESULT: GPU and host bits identical\n");
  return failed;
}
