// SPDX-License-Identifier: BSD-3-Clause
/// @file The GEMM kernel of device execution spaces: tiles of A and B staged in team scratch
/// (shared memory on a GPU), every element of C one ascending-p chain of fused multiply-adds.
#pragma once

#include <reprosgd/detail/kernels/gemm_generic.hpp>
#include <reprosgd/version.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>

REPROSGD_BEGIN_NAMESPACE
namespace detail {

/**
 * One team computes a block_m x block_n block of C. The k dimension is walked in slices of
 * block_k: the team copies the slice's A and B tiles into scratch (coalesced global reads), then
 * each thread advances its own micro_m x micro_n register tiles by the slice's products, p
 * ascending. So every output has one owner and is the reference chain `acc = fma(a, b, acc)` from
 * +0.0f, p = 0..K-1 in order (the same bits as every other GEMM path); padding is read as zeros for
 * rows and columns that are not stored, and p never runs past K (fma(0, 0, -0.0f) would turn a
 * -0.0f sum into +0.0f).
 *
 * A team of `threads` (256) threads owns the block's micro tiles one each; `Slots` micro tiles per
 * thread lets the same code run on a host space whose teams have one thread (Slots = threads), which
 * is how the unit tests check the indexing of the device kernel without a GPU.
 */
template <gemm_op Op, class ExecSpace, class AV, class BV, class CV, int Slots>
struct GemmSharedTileFunctor {
  static constexpr int block_m = 64;
  static constexpr int block_n = 64;
  static constexpr int block_k = 16;
  static constexpr int micro_m = 4;
  static constexpr int micro_n = 4;
  static constexpr int micro_cols = block_n / micro_n;
  /// Micro tiles per block: the team size on a device.
  static constexpr int threads = (block_m / micro_m) * micro_cols;
  static constexpr std::size_t scratch_bytes = sizeof(float) * (block_m + block_n) * block_k;
  using access = GemmAccess<Op>;
  using member_type = typename Kokkos::TeamPolicy<ExecSpace>::member_type;

  AV a_;
  BV b_;
  CV c_;
  int m_, n_, k_;
  int blocks_n_;
  const float* bias_;  ///< N floats added to each finished row, or null

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const int i0 = (team.league_rank() / blocks_n_) * block_m;
    const int j0 = (team.league_rank() % blocks_n_) * block_n;
    // a_tile[pp][ii] = op(A)(i0 + ii, p0 + pp), b_tile[pp][jj] = op(B)(p0 + pp, j0 + jj).
    float* a_tile = static_cast<float*>(team.team_scratch(0).get_shmem(sizeof(float) * block_m * block_k));
    float* b_tile = static_cast<float*>(team.team_scratch(0).get_shmem(sizeof(float) * block_n * block_k));
    const int rank = team.team_rank();
    const int size = team.team_size();

    float acc[Slots][micro_m][micro_n];
    for (int s = 0; s < Slots; ++s)
      for (int r = 0; r < micro_m; ++r)
        for (int c = 0; c < micro_n; ++c) acc[s][r][c] = 0.0f;

    for (int p0 = 0; p0 < k_; p0 += block_k) {
      const int depth = k_ - p0 < block_k ? k_ - p0 : block_k;
      // Consecutive threads read consecutive addresses: along p where the operand's rows run
      // along p (A in nn and nt, B in nt), along i or j otherwise.
      for (int e = rank; e < block_m * block_k; e += size) {
        const bool along_p = Op != gemm_op::tn;
        const int ii = along_p ? e / block_k : e % block_m;
        const int pp = along_p ? e % block_k : e / block_m;
        const bool inside = i0 + ii < m_ && pp < depth;
        a_tile[pp * block_m + ii] = inside ? access::a(a_, i0 + ii, p0 + pp) : 0.0f;
      }
      for (int e = rank; e < block_n * block_k; e += size) {
        const bool along_p = Op == gemm_op::nt;
        const int jj = along_p ? e / block_k : e % block_n;
        const int pp = along_p ? e % block_k : e / block_n;
        const bool inside = j0 + jj < n_ && pp < depth;
        b_tile[pp * block_n + jj] = inside ? access::b(b_, p0 + pp, j0 + jj) : 0.0f;
      }
      team.team_barrier();
      for (int s = 0; s < Slots; ++s) {
        const int t = rank + s * size;
        if (t >= threads) break;
        const int ti = (t / micro_cols) * micro_m;
        const int tj = (t % micro_cols) * micro_n;
        for (int pp = 0; pp < depth; ++pp) {
          float av[micro_m];
          float bv[micro_n];
          for (int r = 0; r < micro_m; ++r) av[r] = a_tile[pp * block_m + ti + r];
          for (int c = 0; c < micro_n; ++c) bv[c] = b_tile[pp * block_n + tj + c];
          for (int r = 0; r < micro_m; ++r)
            for (int c = 0; c < micro_n; ++c) acc[s][r][c] = fused_multiply_add(av[r], bv[c], acc[s][r][c]);
        }
      }
      team.team_barrier();
    }

    for (int s = 0; s < Slots; ++s) {
      const int t = rank + s * size;
      if (t >= threads) break;
      const int i = i0 + (t / micro_cols) * micro_m;
      const int j = j0 + (t % micro_cols) * micro_n;
      for (int r = 0; r < micro_m; ++r)
        for (int c = 0; c < micro_n; ++c)
          if (i + r < m_ && j + c < n_) c_(i + r, j + c) = bias_ ? acc[s][r][c] + bias_[j + c] : acc[s][r][c];
    }
  }
};

/// C (m x n) = op(A) * op(B) (+ bias per column) with the shared-memory tile kernel, teams of
/// `team_size` threads owning Slots micro tiles each (team_size * Slots >= 256). Shapes are
/// checked by the caller; asynchronous like any Kokkos kernel.
template <gemm_op Op, int Slots, class ExecSpace, class AV, class BV, class CV>
void gemm_shared_tiles(const ExecSpace& space, const AV& a, const BV& b, const CV& c, int m, int n, int k,
                       const float* bias, int team_size) {
  using functor = GemmSharedTileFunctor<Op, ExecSpace, AV, BV, CV, Slots>;
  if (m == 0 || n == 0) return;
  const int blocks_m = (m + functor::block_m - 1) / functor::block_m;
  const int blocks_n = (n + functor::block_n - 1) / functor::block_n;
  using policy = Kokkos::TeamPolicy<ExecSpace>;
  Kokkos::parallel_for("reprosgd::gemm(device)",
                       policy(space, blocks_m * blocks_n, team_size)
                           .set_scratch_size(0, Kokkos::PerTeam(functor::scratch_bytes)),
                       functor{a, b, c, m, n, k, blocks_n, bias});
}

/// The device path of gemm(): one micro tile per thread, teams of 256 threads.
template <gemm_op Op, class ExecSpace, class AV, class BV, class CV>
void gemm_device(const ExecSpace& space, const AV& a, const BV& b, const CV& c, int m, int n, int k,
                 const float* bias = nullptr) {
  using functor = GemmSharedTileFunctor<Op, ExecSpace, AV, BV, CV, 1>;
  gemm_shared_tiles<Op, 1>(space, a, b, c, m, n, k, bias, functor::threads);
}

}  // namespace detail
REPROSGD_END_NAMESPACE
