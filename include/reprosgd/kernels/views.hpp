// SPDX-License-Identifier: BSD-3-Clause
/// @file The View types the layers and kernels exchange: row-major matrices and flat buffers.
#pragma once

#include <reprosgd/config.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

REPROSGD_BEGIN_NAMESPACE

/// A row-major matrix (rows = samples of a micro-batch, columns = features) in MemSpace.
template <class MemSpace>
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, MemSpace>;
/// A non-owning row-major matrix over part of a buffer (a layer's weights inside the model buffer).
template <class MemSpace>
using MatrixRef = Kokkos::View<float**, Kokkos::LayoutRight, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
/// A contiguous float buffer (parameters, gradients, optimizer state).
template <class MemSpace>
using Buffer = Kokkos::View<float*, MemSpace>;
/// A non-owning slice of a Buffer.
template <class MemSpace>
using BufferRef = Kokkos::View<float*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

REPROSGD_END_NAMESPACE
