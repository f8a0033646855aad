// SPDX-License-Identifier: BSD-3-Clause
/// @file GFLOP/s of reprosgd::gemm_nn/tn/nt on a CUDA GPU against cuBLAS SGEMM (FP32, TF32 off) on the
/// training shapes, and whether the device's bits equal the host kernel's, as JSON lines.
//
// Built in CUDA builds only (bench/CMakeLists.txt; the CUDA variant of build.sh builds it for
// scripts/device_check.sh). cuBLAS is loaded at run time (dlopen of libcublas.so.12, or the file
// REPROSGD_CUBLAS names), so the build needs no cuBLAS and a machine without it still gets the
// bitwise checks and our figures ("cublas_gflops": null).
//
// Usage: cuda_gemm_bench [--repeats N] [--smoke]
#include <reprosgd/kernels/gemm.hpp>

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using reprosgd::detail::gemm_op;
using device_matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::CudaSpace>;
using host_matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;

struct Case {
  gemm_op op;
  int m, n, k;
};

const char* op_name(gemm_op op) { return op == gemm_op::nn ? "nn" : op == gemm_op::tn ? "tn" : "nt"; }

// The GEMMs of a 784-512-512-10 MLP step at micro-batch 128 and 32: forward (nn), weight
// gradients (tn: A^T * dY) and input gradients (nt: dY * W^T).
const Case training_shapes[] = {
    {gemm_op::nn, 128, 512, 784}, {gemm_op::nn, 128, 512, 512}, {gemm_op::nn, 128, 10, 512},
    {gemm_op::tn, 784, 512, 128}, {gemm_op::tn, 512, 512, 128}, {gemm_op::tn, 512, 10, 128},
    {gemm_op::nt, 128, 512, 512}, {gemm_op::nt, 128, 512, 10},  {gemm_op::nn, 32, 512, 784},
    {gemm_op::tn, 784, 512, 32},  {gemm_op::nt, 32, 512, 512},
};

void fill(const host_matrix& v, std::uint32_t seed) {
  std::uint32_t s = seed * 2654435761u + 12345u;
  for (std::size_t i = 0; i < v.extent(0); ++i)
    for (std::size_t j = 0; j < v.extent(1); ++j) {
      s = s * 1664525u + 1013904223u;
      v(i, j) = static_cast<float>(static_cast<int>(s >> 8) - (1 << 23)) * 0x1p-23f;  // [-1, 1)
    }
}

// The few cuBLAS entry points used, declared here so that the build needs no cuBLAS headers.
using cublas_handle = void*;
struct Cublas {
  int (*create)(cublas_handle*) = nullptr;
  int (*destroy)(cublas_handle) = nullptr;
  int (*set_math_mode)(cublas_handle, int) = nullptr;
  int (*sgemm)(cublas_handle, int, int, int, int, int, const float*, const float*, int, const float*, int,
               const float*, float*, int) = nullptr;
  cublas_handle handle = nullptr;
  std::string library;

  bool load() {
    const char* env = std::getenv("REPROSGD_CUBLAS");
    for (const char* name : {env, "libcublas.so.12", "libcublas.so"}) {
      if (name == nullptr) continue;
      void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) continue;
      create = reinterpret_cast<decltype(create)>(dlsym(lib, "cublasCreate_v2"));
      destroy = reinterpret_cast<decltype(destroy)>(dlsym(lib, "cublasDestroy_v2"));
      set_math_mode = reinterpret_cast<decltype(set_math_mode)>(dlsym(lib, "cublasSetMathMode"));
      sgemm = reinterpret_cast<decltype(sgemm)>(dlsym(lib, "cublasSgemm_v2"));
      if (create && destroy && set_math_mode && sgemm && create(&handle) == 0) {
        // CUBLAS_PEDANTIC_MATH (2): FP32 arithmetic, no TF32 or other reduced-precision paths.
        if (set_math_mode(handle, 2) != 0) return false;
        library = name;
        return true;
      }
    }
    return false;
  }
  // Row-major C (m x n) = op(A) op(B) as the column-major C^T = op(B)^T op(A)^T.
  void gemm(gemm_op op, int m, int n, int k, const float* a, const float* b, float* c) const {
    const float one = 1.0f, zero = 0.0f;
    constexpr int N = 0, T = 1;  // CUBLAS_OP_N, CUBLAS_OP_T
    if (op == gemm_op::nn) sgemm(handle, N, N, n, m, k, &one, b, n, a, k, &zero, c, n);
    if (op == gemm_op::tn) sgemm(handle, N, T, n, m, k, &one, b, n, a, m, &zero, c, n);
    if (op == gemm_op::nt) sgemm(handle, T, N, n, m, k, &one, b, k, a, k, &zero, c, n);
  }
};

template <class F>
double median_seconds(int repeats, F&& f) {
  f();  // warm-up
  Kokkos::fence();
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    int calls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double dt = 0.0;
    do {
      f();
      ++calls;
      Kokkos::fence();
      dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (dt < 2e-3);
    samples.push_back(dt / calls);
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 9;
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) smoke = true, repeats = 1;
    else if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "cuda_gemm_bench: unknown argument '%s' (usage: [--repeats N] [--smoke])\n", argv[i]);
      return 2;
    }
  }
  Kokkos::ScopeGuard kokkos(argc, argv);
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "cuda_gemm_bench: no CUDA device\n");
    return 2;
  }
  Cublas cublas;
  const bool have_cublas = cublas.load();
  if (!have_cublas) std::fprintf(stderr, "cuda_gemm_bench: no cuBLAS (libcublas.so.12) on this machine\n");
  int differing_shapes = 0;
  std::uint32_t seed = 1;
  for (const Case& s : training_shapes) {
    const int ar = s.op == gemm_op::tn ? s.k : s.m, ac = s.op == gemm_op::tn ? s.m : s.k;
    const int br = s.op == gemm_op::nt ? s.n : s.k, bc = s.op == gemm_op::nt ? s.k : s.n;
    host_matrix ha("a", ar, ac), hb("b", br, bc), hc("c", s.m, s.n), hd("d", s.m, s.n);
    fill(ha, ++seed);
    fill(hb, ++seed);
    device_matrix a("a", ar, ac), b("b", br, bc), c("c", s.m, s.n), cb("cb", s.m, s.n);
    Kokkos::deep_copy(a, ha);
    Kokkos::deep_copy(b, hb);
    const Kokkos::Cuda cuda;
    auto ours = [&] {
      if (s.op == gemm_op::nn) reprosgd::gemm_nn(cuda, a, b, c);
      if (s.op == gemm_op::tn) reprosgd::gemm_tn(cuda, a, b, c);
      if (s.op == gemm_op::nt) reprosgd::gemm_nt(cuda, a, b, c);
    };
    // The device's bits against the host kernel's on the same inputs.
    ours();
    Kokkos::fence();
    Kokkos::deep_copy(hd, c);
    const Kokkos::DefaultHostExecutionSpace host;
    if (s.op == gemm_op::nn) reprosgd::gemm_nn(host, ha, hb, hc);
    if (s.op == gemm_op::tn) reprosgd::gemm_tn(host, ha, hb, hc);
    if (s.op == gemm_op::nt) reprosgd::gemm_nt(host, ha, hb, hc);
    host.fence();
    long differ = 0;
    for (int i = 0; i < s.m; ++i)
      for (int j = 0; j < s.n; ++j) differ += std::bit_cast<std::uint32_t>(hc(i, j)) != std::bit_cast<std::uint32_t>(hd(i, j));
    differing_shapes += differ != 0;
    const double flops = 2.0 * s.m * s.n * s.k;
    const double t_ours = median_seconds(repeats, ours);
    double t_cublas = 0.0;
    if (have_cublas) t_cublas = median_seconds(repeats, [&] { cublas.gemm(s.op, s.m, s.n, s.k, a.data(), b.data(), cb.data()); });
    char cub[64] = "null", ratio[64] = "null";
    if (have_cublas) {
      std::snprintf(cub, sizeof cub, "%.1f", flops / t_cublas * 1e-9);
      std::snprintf(ratio, sizeof ratio, "%.3f", t_cublas / t_ours);
    }
    std::printf("{\"bench\":\"cuda_gemm\",\"gpu\":\"%s\",\"op\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,\"repeats\":%d,"
                "\"ours_gflops\":%.1f,\"cublas_gflops\":%s,\"ratio_to_cublas\":%s,\"elements_differing_from_host\":%ld}\n",
                prop.name, op_name(s.op), s.m, s.n, s.k, repeats, flops / t_ours * 1e-9, cub, ratio, differ);
    std::fflush(stdout);
    if (smoke) break;
  }
  if (have_cublas) cublas.destroy(cublas.handle);
  return differing_shapes == 0 ? 0 : 1;
}
