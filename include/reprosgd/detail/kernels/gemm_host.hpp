// SPDX-License-Identifier: BSD-3-Clause
/// @file Host GEMM: the kernel of each instruction set compiled in, and the choice among them at run
/// time. Plain C++ on raw pointers (no Kokkos), so that a kernel can be compiled and checked on its
/// own; kernels/gemm.hpp drives it from a Kokkos TeamPolicy. Why every kernel gives the bits of the
/// scalar reference: gemm_host_arch.hpp; one kernel: gemm_host_isa.ipp.
#pragma once

#include <reprosgd/detail/kernels/gemm_host_arch.hpp>
#include <reprosgd/version.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

REPROSGD_BEGIN_NAMESPACE
namespace detail::gemm_host {

// One namespace per kernel. `native` is compiled for the translation unit's own instruction set
// (so a -march=native build on an AVX-512 CPU has that kernel only); the others, where the
// translation unit's set lacks them, with a target attribute, and run where the CPU has them: a
// binary built for a baseline x86-64 runs the AVX2 kernel on Zen 3 and the AVX-512 one on Zen 4/5.
namespace native {
#define REPROSGD_IMPL_GEMM_ISA 0
#include <reprosgd/detail/kernels/gemm_host_isa.ipp>
#undef REPROSGD_IMPL_GEMM_ISA
}  // namespace native
#if defined(REPROSGD_IMPL_GEMM_AVX2_KERNEL)
namespace avx2 {
#define REPROSGD_IMPL_GEMM_ISA 1
#include <reprosgd/detail/kernels/gemm_host_isa.ipp>
#undef REPROSGD_IMPL_GEMM_ISA
}  // namespace avx2
#endif
#if defined(REPROSGD_IMPL_GEMM_AVX512_KERNEL)
namespace avx512 {
#define REPROSGD_IMPL_GEMM_ISA 2
#include <reprosgd/detail/kernels/gemm_host_isa.ipp>
#undef REPROSGD_IMPL_GEMM_ISA
}  // namespace avx512
#endif

/// Runs `call` with `kernel` naming the namespace of the kernel of `isa_value` (the native one for
/// an instruction set this build has no kernel for).
#define REPROSGD_IMPL_GEMM_ON_ISA(isa_value, call) \
  switch (isa_value) {                             \
    REPROSGD_IMPL_GEMM_CASE_AVX2(call)             \
    REPROSGD_IMPL_GEMM_CASE_AVX512(call)           \
    default: { namespace kernel = native; call; }  \
  }
#if defined(REPROSGD_IMPL_GEMM_AVX2_KERNEL)
#define REPROSGD_IMPL_GEMM_CASE_AVX2(call) \
  case Isa::avx2: { namespace kernel = avx2; call; }
#else
#define REPROSGD_IMPL_GEMM_CASE_AVX2(call)
#endif
#if defined(REPROSGD_IMPL_GEMM_AVX512_KERNEL)
#define REPROSGD_IMPL_GEMM_CASE_AVX512(call) \
  case Isa::avx512: { namespace kernel = avx512; call; }
#else
#define REPROSGD_IMPL_GEMM_CASE_AVX512(call)
#endif

/// The kernels this build has and this CPU runs, the translation unit's own first (the tests run
/// every one against the scalar reference).
inline std::vector<Isa> isas_here() {
  std::vector<Isa> out;
  for (const Isa isa : {Isa::native, Isa::avx2, Isa::avx512})
    if (runs_here(isa)) out.push_back(isa);
  return out;
}

/// The name of the kernel of `isa`, e.g. "avx512f, 16 lanes, 12x32 micro-tile, FMA instructions".
inline std::string kernel_name(Isa isa) { REPROSGD_IMPL_GEMM_ON_ISA(isa, return kernel::kernel_name()) }

/// The kernel this process runs, for `train_mlp --version`: its name, and whether it was chosen at
/// run time over the translation unit's own.
inline std::string kernel_name() {
  const Isa best = best_isa();
  std::string s = kernel_name(best);
  if (best != Isa::native) s += " (chosen at run time; the build's own: " + kernel_name(Isa::native) + ")";
  return s;
}

/// A plan for an M x N x K product on `threads` threads with the kernel of `isa`, streaming a C
/// of at least `stream_min` bytes (this CPU's threshold unless a test asks for another).
inline Plan make_plan(Isa isa, int m, int n, int k, int threads, long stream_min = stream_c_threshold()) {
  REPROSGD_IMPL_GEMM_ON_ISA(isa, return kernel::make_plan(m, n, k, threads, stream_min))
}

/// Computes tile `t` of C = A * B with the plan's kernel (see the kernels' compute_tile).
inline void compute_tile(const Plan& pl, int t, const Operand& a, const Operand& b, float* c, std::ptrdiff_t ldc,
                         float* buffer, const float* bias = nullptr) {
  REPROSGD_IMPL_GEMM_ON_ISA(pl.isa, return kernel::compute_tile(pl, t, a, b, c, ldc, buffer, bias))
}

#undef REPROSGD_IMPL_GEMM_ON_ISA
#undef REPROSGD_IMPL_GEMM_CASE_AVX2
#undef REPROSGD_IMPL_GEMM_CASE_AVX512

}  // namespace detail::gemm_host
REPROSGD_END_NAMESPACE
