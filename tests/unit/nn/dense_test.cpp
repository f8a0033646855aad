// SPDX-License-Identifier: BSD-3-Clause
/// @file Dense feature chunks: the owner map of chunks over model ranks (contiguous whole chunks that
/// tile the outputs for every P), and the input gradient as the Exact sum of the chunks' float
/// partials (the same bits in any order, for any ownership, on every backend).
#include <doctest/doctest.h>

#include <reprosgd/kernels/gemm.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/reduction/exact.hpp>
#include <reprosgd/rng/philox_stream.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <support/exec_spaces.hpp>

#include "nn_test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

namespace {

using reprosgd::Dense;
using reprosgd::FeatureRange;
using reprosgd::Init;
using reprosgd::MicroBatchRange;
using namespace reprosgd_test::nn;

float value(std::uint64_t i, float scale) { return reprosgd_test::nn::value(i, scale, 777); }

/// "" when the chunks and features of the p model ranks of `d` are what the contract says, else the
/// first violation: each rank owns a contiguous run of whole chunks (floor or ceil of chunks/p of
/// them), the runs follow each other in rank order and tile [0, chunks) and [0, out).
std::string ownership_problem(const Dense& d, int p) {
  const int n = d.chunks();
  long next_chunk = 0;
  int next_feature = 0;
  for (int q = 0; q < p; ++q) {
    const MicroBatchRange c = d.chunks_of(q, p);
    const FeatureRange f = d.features_of(q, p);
    std::ostringstream where;  // (not string concatenation: g++ 12 gives a false -Wrestrict on it)
    where << "rank " << q << " of " << p << ": chunks [" << c.begin << "," << c.end << "), features [" << f.begin
          << "," << f.end << "): ";
    const std::string at = where.str();
    if (c.begin != next_chunk) return at + "chunks do not start where the previous rank's end";
    if (f.begin != next_feature) return at + "features do not start where the previous rank's end";
    if (c.size() != n / p && c.size() != (n + p - 1) / p) return at + "not floor or ceil of chunks/P";
    if (c.size() == 0 && f.size() != 0) return at + "features without chunks";
    if (c.size() > 0 && (f.begin != d.chunk_features(static_cast<int>(c.begin)).begin ||
                         f.end != d.chunk_features(static_cast<int>(c.end) - 1).end))
      return at + "features are not those of the chunks";
    if ((f.begin % d.feature_chunk != 0 && f.begin != d.out) || (f.end % d.feature_chunk != 0 && f.end != d.out))
      return at + "not whole chunks";
    next_chunk = c.end;
    next_feature = f.end;
  }
  if (next_chunk != n) return "the chunks end at " + std::to_string(next_chunk) + ", not " + std::to_string(n);
  if (next_feature != d.out) return "the features end at " + std::to_string(next_feature);
  return {};
}

}  // namespace

TEST_SUITE("nn/dense") {
  TEST_CASE("feature chunks: known answers") {
    const Dense d{7, 20, Init::he_normal, 8};
    CHECK(d.chunks() == 3);
    CHECK(d.chunk_features(0) == FeatureRange{0, 8});
    CHECK(d.chunk_features(1) == FeatureRange{8, 16});
    CHECK(d.chunk_features(2) == FeatureRange{16, 20});
    CHECK(d.features_of(0, 1) == FeatureRange{0, 20});
    CHECK(d.chunks_of(0, 2) == MicroBatchRange{0, 2});
    CHECK(d.chunks_of(1, 2) == MicroBatchRange{2, 3});
    CHECK(d.features_of(0, 2) == FeatureRange{0, 16});
    CHECK(d.features_of(1, 2) == FeatureRange{16, 20});
    // More ranks than chunks: one chunk each, the last rank none (an empty range at the end).
    CHECK(d.features_of(0, 4) == FeatureRange{0, 8});
    CHECK(d.features_of(1, 4) == FeatureRange{8, 16});
    CHECK(d.features_of(2, 4) == FeatureRange{16, 20});
    CHECK(d.chunks_of(3, 4) == MicroBatchRange{3, 3});
    CHECK(d.features_of(3, 4) == FeatureRange{20, 20});
    CHECK(d.shard_parameter_count(d.features_of(1, 2)) == 8u * 4u);
    CHECK(d.shard_parameter_count(d.features_of(3, 4)) == 0u);
    CHECK(d.parameter_count(7) == 8u * 20u);
    // The chunk width is in the description only where it changes the numerics.
    CHECK(d.describe(7) == "dense(7,20,he,chunk=8)");
    CHECK(Dense{7, 64}.chunks() == 1);
    CHECK(Dense{7, 64}.describe(7) == "dense(7,64,he)");
    CHECK(Dense{7, 65, Init::xavier_uniform}.chunks() == 2);
    CHECK(Dense{7, 65, Init::xavier_uniform}.describe(7) == "dense(7,65,xavier,chunk=64)");
    CHECK(Dense{7, 65}.features_of(0, 3) == FeatureRange{0, 64});
    CHECK(Dense{7, 65}.features_of(1, 3) == FeatureRange{64, 65});
    CHECK(Dense{7, 65}.features_of(2, 3) == FeatureRange{65, 65});
    const Dense zero_chunk{7, 20, Init::he_normal, 0};
    CHECK_THROWS_WITH_AS((void)zero_chunk.output_width(7), "reprosgd::Dense: feature_chunk must be positive, got 0",
                         reprosgd::config_error);
  }

  TEST_CASE("feature chunks: contiguous whole chunks in rank order tile the outputs, for every (out, chunk, P)") {
    long cases = 0;
    auto check_all = [&](int out, int chunk) {
      const Dense d{3, out, Init::he_normal, chunk};
      const int n = d.chunks();
      CAPTURE(out);
      CAPTURE(chunk);
      REQUIRE(n == (out + chunk - 1) / chunk);
      for (int c = 0; c < n; ++c) {
        const FeatureRange f = d.chunk_features(c);
        CHECK(f.begin == c * chunk);
        CHECK(f.size() == (c + 1 < n ? chunk : out - (n - 1) * chunk));
        CHECK(f.size() > 0);
      }
      for (int p = 1; p <= n + 3; ++p) {  // P > chunks included
        ++cases;
        CAPTURE(p);
        const std::string problem = ownership_problem(d, p);
        INFO(problem);
        CHECK(problem.empty());  // with P <= chunks floor(chunks/P) >= 1: no rank idles
      }
    };
    for (int out = 1; out <= 40; ++out)
      for (int chunk = 1; chunk <= out + 2; ++chunk) check_all(out, chunk);
    for (int out : {64, 100, 256, 784})
      for (int chunk : {1, 7, 16, 63, 64, 65}) check_all(out, chunk);
    CHECK(cases == 7871);
  }

  TEST_CASE_TEMPLATE_DEFINE("backward: the input gradient is the Exact sum of the chunk partials, in any order and "
                            "for any ownership",
                            Space, dense_chunk_sum_id) {
    const int in = 24;
    const long rows = 8;
    const Dense d{in, 200, Init::he_normal, 16};
    REQUIRE(d.chunks() == 13);  // 12 of 16 features and one of 8
    const auto ctx = training_context<Space>(5, 2);
    const auto serial_ctx = training_context(5, 2);
    const auto [p, gp] = initialized_params(d, ctx, in);
    // gy has a spare row after it: gemm's alias check takes a column block of gy to reach up to
    // its first column's offset past gy's end (Kokkos 3.4 span() of a strided subview), and would
    // see a false overlap with a partial allocated right there.
    M x("x", rows, in), y("y", rows, d.out), gy_storage("gy", rows + 1, d.out), gx("gx", rows, in);
    const MRef gy(gy_storage.data(), rows, d.out);
    for (long i = 0; i < rows; ++i) {
      for (int k = 0; k < in; ++k) x(i, k) = value(static_cast<std::uint64_t>(i * 1000 + k), 1.0f);
      for (int j = 0; j < d.out; ++j) gy(i, j) = value(static_cast<std::uint64_t>(50000 + i * 1000 + j), 1.0f);
    }
    d.backward(ctx, p, x, y, gy, gx, gp);
    Kokkos::fence();

    // The partials as model ranks would compute them, each from its own shard (initialised on its
    // own), for several group sizes; given to Exact in reversed chunk order.
    const long n = rows * in;
    for (int ranks : {1, 2, 3, 5, 13, 16}) {
      CAPTURE(ranks);
      M partials("partials", d.chunks(), n);
      for (int q = 0; q < ranks; ++q) {
        const FeatureRange f = d.features_of(q, ranks);
        B shard("shard", d.shard_parameter_count(f));
        d.initialize(serial_ctx, shard, in, f);
        const MicroBatchRange own = d.chunks_of(q, ranks);
        for (long c = own.begin; c < own.end; ++c)
          d.chunk_partial(Kokkos::Serial(), shard, f, static_cast<int>(c), gy,
                          MRef(partials.data() + (d.chunks() - 1 - c) * n, rows, in));
      }
      Kokkos::fence();
      reprosgd::Serial<Kokkos::Serial> par;
      reprosgd::Exact exact;
      B sum("sum", n);
      REQUIRE(exact.reduce(par, partials, d.chunks(), sum).finite);
      REPROSGD_CHECK_BITWISE_EQUAL(gx, sum);
    }

    // The chunking is in effect: the old single GEMM over all 200 features rounds differently.
    M single("single", rows, in);
    reprosgd::gemm_nt(Kokkos::Serial(), gy, MRef(p.data(), in, d.out), single);
    Kokkos::fence();
    int differ = 0;
    for (long i = 0; i < rows; ++i)
      for (int k = 0; k < in; ++k) differ += gx(i, k) != single(i, k) ? 1 : 0;
    INFO(differ << " of " << n << " elements differ from the single GEMM");
    CHECK(differ > 0);

    // Both are the same sum up to float rounding: within chunk-width GEMM error of the exact value.
    for (long i = 0; i < rows; ++i)
      for (int k = 0; k < in; ++k) {
        double exact_value = 0.0, magnitude = 0.0;
        for (int j = 0; j < d.out; ++j) {
          const double t = static_cast<double>(gy(i, j)) * static_cast<double>(p(static_cast<std::size_t>(k) * d.out + j));
          exact_value += t;
          magnitude += std::fabs(t);
        }
        INFO("dx(" << i << "," << k << ") = " << gx(i, k) << ", exact " << exact_value);
        CHECK(std::fabs(gx(i, k) - exact_value) <= 2e-6 * magnitude);
      }
  }
  TEST_CASE_TEMPLATE_APPLY(dense_chunk_sum_id, reprosgd_test::host_spaces);  // host buffers; Dense and Sequential run on the device in unit_trainer

  TEST_CASE("backward: with one chunk the input gradient is the plain GEMM") {
    const int in = 9;
    const long rows = 5;
    for (const Dense d : {Dense{in, 16, Init::he_normal, 16}, Dense{in, 16, Init::he_normal, 64}, Dense{in, 16}}) {
      CAPTURE(d.feature_chunk);
      REQUIRE(d.chunks() == 1);
      const auto ctx = training_context(8);
      const auto [p, gp] = initialized_params(d, ctx, in);
      M x("x", rows, in), y("y", rows, d.out), gy("gy", rows, d.out), gx("gx", rows, in), want("want", rows, in);
      for (long i = 0; i < rows; ++i) {
        for (int k = 0; k < in; ++k) x(i, k) = value(static_cast<std::uint64_t>(i * 100 + k), 1.0f);
        for (int j = 0; j < d.out; ++j) gy(i, j) = value(static_cast<std::uint64_t>(9000 + i * 100 + j), 1.0f);
      }
      d.backward(ctx, p, x, y, gy, gx, gp);
      reprosgd::gemm_nt(Kokkos::Serial(), gy, MRef(p.data(), in, d.out), want);
      Kokkos::fence();
      REPROSGD_CHECK_BITWISE_EQUAL(gx, want);
    }
  }

  TEST_CASE("backward: an Inf in one chunk's output gradient makes the whole input gradient NaN") {
    const int in = 6;
    const long rows = 3;
    const Dense d{in, 20, Init::he_normal, 8};
    const auto ctx = training_context(8);
    const auto [p, gp] = initialized_params(d, ctx, in);
    M x("x", rows, in), y("y", rows, d.out), gy("gy", rows, d.out), gx("gx", rows, in);
    for (long i = 0; i < rows; ++i)
      for (int j = 0; j < d.out; ++j) gy(i, j) = value(static_cast<std::uint64_t>(i * 100 + j), 1.0f);
    gy(1, 17) = std::numeric_limits<float>::infinity();  // in the last chunk
    d.backward(ctx, p, x, y, gy, gx, gp);
    Kokkos::fence();
    int nan = 0;
    for (long i = 0; i < rows; ++i)
      for (int k = 0; k < in; ++k) nan += std::isnan(gx(i, k)) ? 1 : 0;
    CHECK(nan == rows * in);
  }
}
