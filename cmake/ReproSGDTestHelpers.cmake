# SPDX-License-Identifier: BSD-3-Clause
# Helpers to register ReproSGD tests.
set(REPROSGD_VARIANT_AREAS rng kernels CACHE STRING "Test areas compiled in variant builds (all: every area)")
# A device variant (CUDA, HIP) compiled in CI without a GPU: only the test files that instantiate
# for the device (they name reprosgd_test::spaces, the host spaces and the device). The others test
# host spaces only, which the host builds run; compiling them with nvcc or hipcc cost CI 6 minutes.
option(REPROSGD_VARIANT_DEVICE_TESTS_ONLY "A variant build compiles only the test files that run on the device" OFF)
# Test files (names without .cpp) a variant build leaves out by name: the Kokkos 4 variant leaves out
# the trainer's tests of host logic (the recovery stage machine, the trace and metrics files, the
# background writers), whose arithmetic is the kernels' that its other tests and goldens check.
set(REPROSGD_VARIANT_SKIP_TESTS "" CACHE STRING "Test files (stems) a variant build does not compile")

# REPROSGD_TEST_OPT_FLAGS: optimisation flags for the test programs, after the build's own so that
# they win (scripts/build.sh's main build: -O1). The library's bits do not depend on the
# optimisation level (docs/numerics.md), so the tests assert the same known answers and goldens
# at -O1 as at -O3, and their compile takes about half the time (codegen is 85% of it). So do the
# examples and the package's consumer projects that tests/examples and tests/package build
# (REPROSGD_TEST_CONSUMER_OPTIONS in tests/CMakeLists.txt). The apps (train_mlp: every golden, MPI,
# ULFM and trace test) and benchmarks keep the build's flags, and so do the tests that are about
# the flags (tests/fpenv) or that need the speed (the exhaustive sweeps): BUILD_FLAGS below.
set(REPROSGD_TEST_OPT_FLAGS "" CACHE STRING "Optimisation flags of the test programs (empty: the build's)")
function(reprosgd_test_optimization target)
  if(REPROSGD_TEST_OPT_FLAGS)
    target_compile_options(${target} PRIVATE ${REPROSGD_TEST_OPT_FLAGS})
  endif()
endfunction()

# reprosgd_add_unit_test(name [BUILD_FLAGS] LABELS l... SOURCES s...): a doctest executable run by
# CTest, compiled with REPROSGD_TEST_OPT_FLAGS unless BUILD_FLAGS.
function(reprosgd_add_unit_test name)
  cmake_parse_arguments(ARG "BUILD_FLAGS" "TIMEOUT" "LABELS;SOURCES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES} $<TARGET_OBJECTS:reprosgd_test_main>)
  target_link_libraries(${name} PRIVATE reprosgd_test_main)
  if(NOT ARG_BUILD_FLAGS)
    reprosgd_test_optimization(${name})
  endif()
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 1500)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()

# reprosgd_mpiexec_test_flags(): sets the cache variable REPROSGD_MPIEXEC_TEST_FLAGS (below) once.
# tests/CMakeLists.txt calls it before any test folder, so that every folder's launcher has the
# flags whatever order the folders are configured in (a folder that builds its launcher before
# tests/mpi added a test would otherwise get none on a fresh configure).
function(reprosgd_mpiexec_test_flags)
  if(NOT DEFINED REPROSGD_MPIEXEC_TEST_FLAGS)
    set(flags)
    execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE version ERROR_VARIABLE version
                    RESULT_VARIABLE rc TIMEOUT 30)
    if(version MATCHES "Open MPI|OpenRTE")
      set(flags --oversubscribe)
    endif()
    set(REPROSGD_MPIEXEC_TEST_FLAGS "${flags}" CACHE STRING "mpiexec flags for ReproSGD's MPI tests")
  endif()
endfunction()

# reprosgd_add_mpi_test(target nprocs [ULFM] [TIMEOUT s] [NAME n] [ARGS a...]): run target under mpiexec.
# With Open MPI (its mpiexec --version names "Open MPI" or "OpenRTE") the launch adds
# REPROSGD_MPIEXEC_TEST_FLAGS (default --oversubscribe: CI machines have 2 cores and the tests use
# up to 5 ranks) and the environment that lets Open MPI run as root, as CI and containers do
# (OMPI_ALLOW_RUN_AS_ROOT*, ignored by other MPIs and by non-root users).
function(reprosgd_add_mpi_test target nprocs)
  cmake_parse_arguments(ARG "ULFM" "TIMEOUT;NAME" "ARGS" ${ARGN})
  if(NOT ARG_NAME)
    set(ARG_NAME ${target}_np${nprocs})
  endif()
  reprosgd_mpiexec_test_flags()
  set(ft)
  set(labels mpi)
  if(ARG_ULFM)
    set(ft --with-ft ulfm)
    list(APPEND labels ulfm)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  add_test(NAME ${ARG_NAME} COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${nprocs}
           ${REPROSGD_MPIEXEC_TEST_FLAGS} ${ft} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS}
           ${ARG_ARGS})
  set_tests_properties(${ARG_NAME} PROPERTIES PROCESSORS ${nprocs} LABELS "${labels}" TIMEOUT ${ARG_TIMEOUT}
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endfunction()

# reprosgd_exhaustive_stride(TEST DIR): an exhaustive sweep (unit/<area>/*_exhaustive_test.cpp)
# checks every input while the header it verifies differs from the one last verified that way, and
# every 13th input (all binades, both signs, every residue of the mantissa's low bits in turn) while
# it is the same: DIR/<header>_verified.sha256 holds the SHA-256 of include/reprosgd/<area>/<header>.hpp
# after a full sweep passed. A full sweep of math/elementary.hpp takes 5.5 minutes of CI's 2 cores.
# The test reads REPROSGD_EXHAUSTIVE_STRIDE (set here; 1 by hand: `REPROSGD_EXHAUSTIVE_STRIDE=1
# tests/elementary_exhaustive_test` sweeps everything whatever the record says).
function(reprosgd_exhaustive_stride test dir)
  file(GLOB records ${dir}/*_verified.sha256)
  set(stride 1)
  foreach(record IN LISTS records)
    get_filename_component(header ${record} NAME)
    string(REPLACE "_verified.sha256" ".hpp" header "${header}")
    get_filename_component(area ${dir} NAME)
    set(path ${PROJECT_SOURCE_DIR}/include/reprosgd/${area}/${header})
    file(STRINGS ${record} verified LIMIT_COUNT 1)
    if(EXISTS ${path})
      file(SHA256 ${path} now)
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${path} ${record})
      if(now STREQUAL verified)
        set(stride 13)
      endif()
    endif()
  endforeach()
  set_tests_properties(${test} PROPERTIES ENVIRONMENT "REPROSGD_EXHAUSTIVE_STRIDE=${stride}")
endfunction()
