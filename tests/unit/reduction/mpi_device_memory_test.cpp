// SPDX-License-Identifier: BSD-3-Clause
/// @file Whether MPI is handed device memory: the library's answer and the decision per memory
/// space (parallel/mpi_device_memory.hpp). The exact reduction stages its integers through host
/// buffers whenever the answer is no.
#include <doctest/doctest.h>

#include <reprosgd/config.hpp>

#if REPROSGD_HAS_MPI
#include <reprosgd/parallel/mpi_device_memory.hpp>

#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <string>

namespace {
/// Sets an environment variable for one scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value != nullptr) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

reprosgd::MpiDeviceSupport support(bool cuda_compiled, bool cuda, bool rocm_compiled, bool rocm) {
  reprosgd::MpiDeviceSupport s;
  s.cuda_compiled = cuda_compiled;
  s.cuda = cuda;
  s.rocm_compiled = rocm_compiled;
  s.rocm = rocm;
  return s;
}
}  // namespace

TEST_SUITE("parallel/mpi_device_memory") {
  TEST_CASE("host memory always goes to MPI directly, whatever the library says of devices") {
    for (int bits = 0; bits < 16; ++bits) {
      const auto s = support(bits & 1, bits & 2, bits & 4, bits & 8);
      CHECK(reprosgd::mpi_reads_memory<Kokkos::HostSpace>(s));
    }
  }

#if defined(KOKKOS_ENABLE_CUDA)
  TEST_CASE("CUDA device memory goes to MPI only when the library is CUDA-aware at run time") {
    CHECK_FALSE(reprosgd::mpi_reads_memory<Kokkos::CudaSpace>(support(false, false, false, false)));
    CHECK_FALSE(reprosgd::mpi_reads_memory<Kokkos::CudaSpace>(support(true, false, true, true)));
    CHECK(reprosgd::mpi_reads_memory<Kokkos::CudaSpace>(support(true, true, false, false)));
  }
#endif
#if defined(KOKKOS_ENABLE_HIP)
  TEST_CASE("HIP device memory goes to MPI only when the library is ROCm-aware at run time") {
    CHECK_FALSE(reprosgd::mpi_reads_memory<Kokkos::HIPSpace>(support(true, true, true, false)));
    CHECK(reprosgd::mpi_reads_memory<Kokkos::HIPSpace>(support(false, false, true, true)));
  }
#endif

  TEST_CASE("the answer in words, as train_mlp --version prints it") {
    CHECK(reprosgd::describe(support(false, false, false, false)) == "CUDA-aware: no, ROCm-aware: no");
    CHECK(reprosgd::describe(support(true, true, false, false)) == "CUDA-aware: yes, ROCm-aware: no");
    CHECK(reprosgd::describe(support(true, false, true, true)) ==
          "CUDA-aware: no (built with it, not enabled at run time), ROCm-aware: yes");
    auto off = support(true, false, false, false);
    off.disabled_by_env = true;
    CHECK(reprosgd::describe(off) == "CUDA-aware: no (REPROSGD_MPI_DEVICE_MEMORY=0), ROCm-aware: no");
  }

  TEST_CASE("REPROSGD_MPI_DEVICE_MEMORY=0 makes the answer no; other values leave the library's") {
    const ScopedEnv unset("REPROSGD_MPI_DEVICE_MEMORY", nullptr);
    const auto library = reprosgd::mpi_device_support();
    CHECK_FALSE(library.disabled_by_env);
    // Built with the support or not, a run-time yes needs the compile-time one.
    CHECK((!library.cuda || library.cuda_compiled));
    CHECK((!library.rocm || library.rocm_compiled));
    {
      const ScopedEnv off("REPROSGD_MPI_DEVICE_MEMORY", "0");
      const auto s = reprosgd::mpi_device_support();
      CHECK(s.disabled_by_env);
      CHECK_FALSE(s.cuda);
      CHECK_FALSE(s.rocm);
      CHECK(s.cuda_compiled == library.cuda_compiled);
      CHECK(s.rocm_compiled == library.rocm_compiled);
    }
    {
      const ScopedEnv on("REPROSGD_MPI_DEVICE_MEMORY", "1");
      const auto s = reprosgd::mpi_device_support();
      CHECK_FALSE(s.disabled_by_env);
      CHECK(s.cuda == library.cuda);
      CHECK(s.rocm == library.rocm);
    }
  }
}
#endif  // REPROSGD_HAS_MPI
