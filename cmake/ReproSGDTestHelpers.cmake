# SPDX-License-Identifier: BSD-3-Clause
# Helpers to register ReproSGD tests.
set(REPROSGD_VARIANT_AREAS rng kernels CACHE STRING "Test areas compiled in variant builds")

# reprosgd_add_unit_test(name LABELS l... SOURCES s...): a doctest executable run by CTest.
function(reprosgd_add_unit_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS;SOURCES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES} $<TARGET_OBJECTS:reprosgd_test_main>)
  target_link_libraries(${name} PRIVATE reprosgd_test_main)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 1500)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()

# reprosgd_add_mpi_test(target nprocs [ULFM] [TIMEOUT s] [ARGS a...]): run target under mpiexec.
function(reprosgd_add_mpi_test target nprocs)
  cmake_parse_arguments(ARG "ULFM" "TIMEOUT;NAME" "ARGS" ${ARGN})
  if(NOT ARG_NAME)
    set(ARG_NAME ${target}_np${nprocs})
  endif()
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
           ${ft} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS} ${ARG_ARGS})
  set_tests_properties(${ARG_NAME} PROPERTIES PROCESSORS ${nprocs} LABELS "${labels}" TIMEOUT ${ARG_TIMEOUT})
endfunction()
