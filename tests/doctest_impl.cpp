// SPDX-License-Identifier: BSD-3-Clause
/// @file doctest's implementation, for the unit tests' main (main.cpp). A translation unit of its own
/// without Kokkos, so that a HIP build can compile it as plain C++: clang 15 (Debian 12's hipcc)
/// crashes compiling doctest's implementation in HIP mode with C++20 and libstdc++ 12
/// (docs/portability.md, "HIP").
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
