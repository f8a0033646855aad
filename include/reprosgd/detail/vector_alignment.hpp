// SPDX-License-Identifier: BSD-3-Clause
/// @file vector_alignment: the alignment the host kernels' vector loads and stores want.
#pragma once

#include <reprosgd/config.hpp>

#include <cstddef>

REPROSGD_BEGIN_NAMESPACE

namespace detail {

/// Bytes: one cache line, and one AVX-512 vector (two AVX2 ones). The GEMM aligns its packing
/// buffers to it, and writes a C whose rows start at such addresses with non-temporal stores; the
/// Trainer pads the gradient rows to it for that reason (trainer/step.hpp).
inline constexpr std::size_t vector_alignment = 64;

}  // namespace detail

REPROSGD_END_NAMESPACE
