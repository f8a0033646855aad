# SPDX-License-Identifier: BSD-3-Clause
# MPI is optional: serial users need only Kokkos and cereal. With MPI found (or required), the
# target links MPI::MPI_CXX and defines REPROSGD_HAS_MPI=1; ULFM is detected by compiling a call
# to MPIX_Comm_shrink from <mpi-ext.h>.
set(REPROSGD_HAS_MPI 0)
set(REPROSGD_HAS_ULFM 0)
if(NOT REPROSGD_ENABLE_MPI STREQUAL "OFF")
  if(REPROSGD_ENABLE_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS CXX)
  else()
    find_package(MPI QUIET COMPONENTS CXX)
  endif()
  if(MPI_CXX_FOUND)
    set(REPROSGD_HAS_MPI 1)
    target_link_libraries(reprosgd INTERFACE MPI::MPI_CXX)
    if(NOT REPROSGD_ENABLE_ULFM STREQUAL "OFF")
      include(CheckCXXSourceCompiles)
      set(CMAKE_REQUIRED_LIBRARIES MPI::MPI_CXX)
      check_cxx_source_compiles([=[
        #include <mpi.h>
        #include <mpi-ext.h>
        int main() { MPI_Comm c; MPIX_Comm_shrink(MPI_COMM_WORLD, &c); MPIX_Comm_revoke(c);
                     int f = 1; MPIX_Comm_agree(c, &f); return 0; }]=] REPROSGD_ULFM_COMPILES)
      unset(CMAKE_REQUIRED_LIBRARIES)
      if(REPROSGD_ULFM_COMPILES)
        set(REPROSGD_HAS_ULFM 1)
      elseif(REPROSGD_ENABLE_ULFM STREQUAL "ON")
        message(FATAL_ERROR "REPROSGD_ENABLE_ULFM=ON but this MPI has no ULFM (MPIX_Comm_shrink in <mpi-ext.h>)")
      endif()
    endif()
  endif()
endif()
target_compile_definitions(reprosgd INTERFACE REPROSGD_HAS_MPI=${REPROSGD_HAS_MPI} REPROSGD_HAS_ULFM=${REPROSGD_HAS_ULFM})
message(STATUS "ReproSGD: MPI ${REPROSGD_HAS_MPI}, ULFM ${REPROSGD_HAS_ULFM}")
