// SPDX-License-Identifier: BSD-3-Clause
/// @file Tests of reprosgd/kernels/gemm.hpp: bitwise equality with the scalar reference loop.
#include <reprosgd/kernels/gemm.hpp>
#include <reprosgd/detail/kernels/gemm_device.hpp>

#include <doctest/doctest.h>
#include <support/exec_spaces.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

using reprosgd::detail::gemm_op;
template <class Space>
using matrix = Kokkos::View<float**, Kokkos::LayoutRight, typename Space::memory_space>;
using host_matrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;

struct Shape {
  int m, n, k;
};

// Deterministic inputs on which the summation order matters: random signs, mantissas and
// exponents spread over 2^-27..2^27 (about 1e-8..1e8), so partial sums cancel and absorb small
// terms. A reordered or fused accumulation gives different bits (checked below).
class InputGenerator {
 public:
  explicit InputGenerator(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  float next() {
    const std::uint64_t r = step();
    const float mantissa = 1.0f + static_cast<float>(r & 0x7FFFFF) * 0x1p-23f;  // exact: 24 bits
    const int exponent = static_cast<int>((r >> 24) % 55) - 27;
    const float sign = (r >> 40) & 1 ? -1.0f : 1.0f;
    return sign * std::ldexp(mantissa, exponent);
  }

 private:
  std::uint64_t step() {  // splitmix64
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint64_t state_;
};

void fill(const host_matrix& v, std::uint64_t seed) {
  InputGenerator g(seed);
  for (std::size_t i = 0; i < v.extent(0); ++i)
    for (std::size_t j = 0; j < v.extent(1); ++j) v(i, j) = g.next();
}

// The contract, written as plainly as possible: acc = fma(a, b, acc), p ascending, from +0.0f.
// (std::fma is correctly rounded, whether the CPU or the library computes it.)
template <gemm_op Op>
host_matrix reference(const host_matrix& a, const host_matrix& b, int m, int n, int k) {
  host_matrix c("reference", m, n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int p = 0; p < k; ++p) {
        const float av = Op == gemm_op::tn ? a(p, i) : a(i, p);
        const float bv = Op == gemm_op::nt ? b(j, p) : b(p, j);
        acc = std::fma(av, bv, acc);
      }
      c(i, j) = acc;
    }
  return c;
}

template <gemm_op Op>
void operand_shapes(Shape s, int& ar, int& ac, int& br, int& bc) {
  ar = Op == gemm_op::tn ? s.k : s.m;
  ac = Op == gemm_op::tn ? s.m : s.k;
  br = Op == gemm_op::nt ? s.n : s.k;
  bc = Op == gemm_op::nt ? s.k : s.n;
}

// Number of elements whose bits differ (0 when identical); compares bits, so -0 != +0.
std::size_t bit_differences(const host_matrix& x, const host_matrix& y) {
  REQUIRE(x.extent(0) == y.extent(0));
  REQUIRE(x.extent(1) == y.extent(1));
  std::size_t diff = 0;
  for (std::size_t i = 0; i < x.extent(0); ++i)
    for (std::size_t j = 0; j < x.extent(1); ++j)
      diff += std::bit_cast<std::uint32_t>(x(i, j)) != std::bit_cast<std::uint32_t>(y(i, j));
  return diff;
}

template <gemm_op Op, class Space>
void call_gemm(const Space& space, const matrix<Space>& a, const matrix<Space>& b, const matrix<Space>& c) {
  if constexpr (Op == gemm_op::nn) reprosgd::gemm_nn(space, a, b, c);
  if constexpr (Op == gemm_op::tn) reprosgd::gemm_tn(space, a, b, c);
  if constexpr (Op == gemm_op::nt) reprosgd::gemm_nt(space, a, b, c);
}

// The shared-memory tile kernel of device spaces; on a host space with teams of one thread that
// each own every micro tile of their block (the device runs 256 threads owning one each).
template <gemm_op Op, class Space, class AV, class BV, class CV>
void shared_tiles(const Space& space, const AV& a, const BV& b, const CV& c, Shape s, const float* bias) {
  if constexpr (reprosgd::detail::is_host_space_v<Space>)
    reprosgd::detail::gemm_shared_tiles<Op, 256>(space, a, b, c, s.m, s.n, s.k, bias, 1);
  else
    reprosgd::detail::gemm_device<Op>(space, a, b, c, s.m, s.n, s.k, bias);
}

const char* op_name(gemm_op op) { return op == gemm_op::nn ? "nn" : op == gemm_op::tn ? "tn" : "nt"; }

// Every host kernel this build has and this CPU runs (the build's own instruction set's, and the
// AVX2 and AVX-512 ones a build for a lower set chooses at run time), called directly: not only the
// one the public entry point picks. `threads` > 0 forces that thread count's plan, `stream_min` > 0
// that threshold for streaming C (stream_c_threshold).
template <gemm_op Op, class Space, class AV, class BV, class CV>
void check_every_host_kernel(const Space& space, const AV& a, const BV& b, const CV& c, Shape s, const float* bias,
                             const host_matrix& expected, int threads = 0, long stream_min = 0) {
#if REPROSGD_IMPL_GEMM_HOST_KERNEL
  if constexpr (reprosgd::detail::is_host_space_v<Space>) {
    namespace gh = reprosgd::detail::gemm_host;
    const auto lda = static_cast<std::ptrdiff_t>(a.stride(0)), ldb = static_cast<std::ptrdiff_t>(b.stride(0));
    const gh::Operand ao = Op == gemm_op::tn ? gh::Operand{a.data(), 1, lda} : gh::Operand{a.data(), lda, 1};
    const gh::Operand bo = Op == gemm_op::nt ? gh::Operand{b.data(), 1, ldb} : gh::Operand{b.data(), ldb, 1};
    host_matrix got("got", s.m, s.n);
    for (const gh::Isa isa : gh::isas_here()) {
      const std::string kernel = gh::kernel_name(isa);
      CAPTURE(kernel);
      Kokkos::deep_copy(c, std::nanf(""));
      reprosgd::detail::gemm_host_run(space, ao, bo, c.data(), static_cast<std::ptrdiff_t>(c.stride(0)), s.m, s.n,
                                      s.k, threads, bias, isa, stream_min > 0 ? stream_min : gh::stream_c_threshold());
      space.fence();
      Kokkos::deep_copy(got, c);
      CHECK(bit_differences(got, expected) == 0);
    }
  }
#else
  (void)space, (void)a, (void)b, (void)c, (void)s, (void)bias, (void)expected, (void)threads, (void)stream_min;
#endif
}

// Runs the public entry point and the portable kernel on Space and compares both, bit for bit,
// with the reference. C starts as NaN so that an element that is not written is caught.
template <gemm_op Op, class Space>
void check_against_reference(Shape s, std::uint64_t seed) {
  CAPTURE(op_name(Op));
  CAPTURE(s.m);
  CAPTURE(s.n);
  CAPTURE(s.k);
  int ar = 0, ac = 0, br = 0, bc = 0;
  operand_shapes<Op>(s, ar, ac, br, bc);
  host_matrix ha("a", ar, ac), hb("b", br, bc);
  fill(ha, seed);
  fill(hb, seed + 1);
  const host_matrix expected = reference<Op>(ha, hb, s.m, s.n, s.k);

  Space space;
  matrix<Space> a("a", ar, ac), b("b", br, bc), c("c", s.m, s.n);
  Kokkos::deep_copy(a, ha);
  Kokkos::deep_copy(b, hb);
  host_matrix got("got", s.m, s.n);

  Kokkos::deep_copy(c, std::nanf(""));
  call_gemm<Op>(space, a, b, c);
  space.fence();
  Kokkos::deep_copy(got, c);
  CHECK(bit_differences(got, expected) == 0);

  Kokkos::deep_copy(c, std::nanf(""));
  reprosgd::detail::gemm_generic<Op>(space, a, b, c, s.m, s.n, s.k);
  space.fence();
  Kokkos::deep_copy(got, c);
  CHECK(bit_differences(got, expected) == 0);

  check_every_host_kernel<Op>(space, a, b, c, s, nullptr, expected);

  // The device kernel (shared-memory tiles): on a host space with one-thread teams, each thread
  // holding all 256 micro tiles, so its tiling and bounds are checked without a GPU.
  Kokkos::deep_copy(c, std::nanf(""));
  shared_tiles<Op>(space, a, b, c, s, nullptr);
  space.fence();
  Kokkos::deep_copy(got, c);
  CHECK(bit_differences(got, expected) == 0);
}

const Shape small_shapes[] = {
    {1, 1, 1},    {13, 17, 19}, {0, 5, 3},    {5, 0, 3},     {4, 6, 0},   {7, 33, 1},   {6, 16, 256},
    {12, 32, 5},  {25, 47, 300}, {1, 100, 513}, {100, 1, 70}, {31, 9, 1000}, {2, 3, 4},   {49, 130, 257},
    {97, 300, 64}, {6, 17, 2},
    // every partial last row strip (M mod 6 = 1..5, and mod 12) with full column strips
    {3, 32, 7},   {4, 48, 33},  {5, 16, 100}, {11, 64, 129}, {20, 32, 9}, {130, 64, 40}};

}  // namespace

TEST_SUITE("kernels/gemm") {

TEST_CASE("the chosen inputs make the summation order visible") {
  // Without this, equality with the reference would prove little: a reordered (reversed) or
  // unfused (a rounded multiply, then a rounded add) accumulation must give different bits on these
  // inputs.
  const int m = 16, n = 16, k = 512;
  host_matrix a("a", m, k), b("b", k, n);
  fill(a, 11);
  fill(b, 12);
  const host_matrix forward = reference<gemm_op::nn>(a, b, m, n, k);
  host_matrix reversed("reversed", m, n), unfused("unfused", m, n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float r = 0.0f, u = 0.0f;
      for (int p = k - 1; p >= 0; --p) r = std::fma(a(i, p), b(p, j), r);
      for (int p = 0; p < k; ++p) {
        const float prod = a(i, p) * b(p, j);  // rounded: the target compiles with -ffp-contract=off
        u = u + prod;
      }
      reversed(i, j) = r;
      unfused(i, j) = u;
    }
  CHECK(bit_differences(forward, reversed) > m * n / 4);
  CHECK(bit_differences(forward, unfused) > m * n / 4);
}

TEST_CASE_TEMPLATE_DEFINE("bitwise equal to the scalar loop", Space, gemm_reference_test) {
  std::uint64_t seed = 100;
  for (const Shape s : small_shapes) {
    check_against_reference<gemm_op::nn, Space>(s, ++seed);
    check_against_reference<gemm_op::tn, Space>(s, ++seed);
    check_against_reference<gemm_op::nt, Space>(s, ++seed);
  }
  SUBCASE("training shapes") {
    // Dense 784-512-512-10 with batch 128, and micro-batches of 16 and 32.
    for (const int batch : {128, 32, 16}) {
      check_against_reference<gemm_op::nn, Space>({batch, 512, 784}, ++seed);
      check_against_reference<gemm_op::nn, Space>({batch, 512, 512}, ++seed);
      check_against_reference<gemm_op::nn, Space>({batch, 10, 512}, ++seed);
      check_against_reference<gemm_op::tn, Space>({784, 512, batch}, ++seed);
      check_against_reference<gemm_op::tn, Space>({512, 512, batch}, ++seed);
      check_against_reference<gemm_op::tn, Space>({512, 10, batch}, ++seed);
      check_against_reference<gemm_op::nt, Space>({batch, 784, 512}, ++seed);
      check_against_reference<gemm_op::nt, Space>({batch, 512, 512}, ++seed);
      check_against_reference<gemm_op::nt, Space>({batch, 512, 10}, ++seed);
    }
  }
}
TEST_CASE_TEMPLATE_APPLY(gemm_reference_test, reprosgd_test::spaces);

TEST_CASE_TEMPLATE_DEFINE("K = 0 writes +0 and a -0 product sum is +0", Space, gemm_zero_test) {
  Space space;
  matrix<Space> a("a", 3, 0), b("b", 0, 5), c("c", 3, 5);
  Kokkos::deep_copy(c, std::nanf(""));
  reprosgd::gemm_nn(space, a, b, c);
  space.fence();
  auto hc = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) CHECK(std::bit_cast<std::uint32_t>(hc(i, j)) == 0u);

  // Every product is -0: the reference gives 0 + (-0) = +0, not the -0 that a kernel starting
  // from the first product would keep.
  matrix<Space> x("x", 7, 3), y("y", 3, 20), z("z", 7, 20);
  Kokkos::deep_copy(x, -1.0f);
  Kokkos::deep_copy(y, 0.0f);
  reprosgd::gemm_nn(space, x, y, z);
  space.fence();
  auto hz = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), z);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 20; ++j) CHECK(std::bit_cast<std::uint32_t>(hz(i, j)) == 0u);
}
TEST_CASE_TEMPLATE_APPLY(gemm_zero_test, reprosgd_test::spaces);

TEST_CASE_TEMPLATE_DEFINE("gemm_nn_bias gives the bits of gemm_nn followed by the bias add", Space,
                          gemm_bias_test) {
  // The reference: the scalar sum, then one rounded add of b(j). Shapes cover partial row and
  // column strips, several K blocks, K = 0 (+0 + b) and the Dense forward shapes.
  std::uint64_t seed = 500;
  // {40, 3, 0} and {128, 10, 512} are computed transposed: the bias is added as C^T is written back.
  const Shape shapes[] = {{1, 1, 1},     {13, 17, 19},  {4, 6, 0},     {40, 3, 0},   {7, 33, 1},   {25, 47, 300},
                          {31, 9, 1000}, {49, 130, 257}, {128, 512, 784}, {128, 512, 512}, {128, 10, 512},
                          {16, 512, 784}, {32, 10, 512}};
  for (const Shape s : shapes) {
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    host_matrix ha("a", s.m, s.k), hb("b", s.k, s.n), hbias("bias", 1, s.n);
    fill(ha, ++seed);
    fill(hb, ++seed);
    fill(hbias, ++seed);
    host_matrix expected = reference<gemm_op::nn>(ha, hb, s.m, s.n, s.k);
    for (int i = 0; i < s.m; ++i)
      for (int j = 0; j < s.n; ++j) expected(i, j) = expected(i, j) + hbias(0, j);
    Space space;
    matrix<Space> a("a", s.m, s.k), b("b", s.k, s.n), c("c", s.m, s.n);
    Kokkos::View<float*, typename Space::memory_space> bias("bias", s.n);
    Kokkos::deep_copy(a, ha);
    Kokkos::deep_copy(b, hb);
    Kokkos::deep_copy(bias, Kokkos::subview(hbias, 0, Kokkos::ALL()));
    host_matrix got("got", s.m, s.n);
    Kokkos::deep_copy(c, std::nanf(""));
    reprosgd::gemm_nn_bias(space, a, b, bias, c);
    space.fence();
    Kokkos::deep_copy(got, c);
    CHECK(bit_differences(got, expected) == 0);

    Kokkos::deep_copy(c, std::nanf(""));
    reprosgd::detail::gemm_generic<gemm_op::nn>(space, a, b, c, s.m, s.n, s.k, bias.data());
    space.fence();
    Kokkos::deep_copy(got, c);
    CHECK(bit_differences(got, expected) == 0);
    Kokkos::deep_copy(c, std::nanf(""));
    shared_tiles<gemm_op::nn>(space, a, b, c, s, bias.data());
    space.fence();
    Kokkos::deep_copy(got, c);
    CHECK(bit_differences(got, expected) == 0);
    for (const int threads : {1, 2, 3, 5, 8}) {
      CAPTURE(threads);
      check_every_host_kernel<gemm_op::nn>(space, a, b, c, s, bias.data(), expected, threads);
    }
  }
  host_matrix a("a", 4, 5), b("b", 5, 6), c("c", 4, 6);
  Kokkos::View<float*, Kokkos::HostSpace> short_bias("short_bias", 5);
  CHECK_THROWS_WITH_AS(reprosgd::gemm_nn_bias(Kokkos::DefaultHostExecutionSpace(), a, b, short_bias, c),
                       "reprosgd::gemm_nn_bias: B is 5x6 but the bias has 5 elements", reprosgd::config_error);
}
TEST_CASE_TEMPLATE_APPLY(gemm_bias_test, reprosgd_test::spaces);

#if REPROSGD_IMPL_GEMM_HOST_KERNEL
TEST_CASE_TEMPLATE_DEFINE("the result does not depend on the thread count or the tiling", Space,
                          gemm_threads_test) {
  // The host kernel's tiling and K blocking follow the thread count; force the plans of 1, 2, 3,
  // 5 and 8 threads on this backend (whatever its real thread count) and compare bits.
  const int m = 128, n = 512, k = 784;
  host_matrix ha("a", m, k), hb("b", k, n);
  fill(ha, 7);
  fill(hb, 8);
  const host_matrix expected = reference<gemm_op::nn>(ha, hb, m, n, k);
  Space space;
  matrix<Space> a("a", m, k), b("b", k, n), c("c", m, n);
  Kokkos::deep_copy(a, ha);
  Kokkos::deep_copy(b, hb);
  for (const int threads : {1, 2, 3, 5, 8}) {
    CAPTURE(threads);
    check_every_host_kernel<gemm_op::nn>(space, a, b, c, {m, n, k}, nullptr, expected, threads);
  }
}
TEST_CASE_TEMPLATE_APPLY(gemm_threads_test, reprosgd_test::host_spaces);
#endif

#if defined(KOKKOS_ENABLE_SERIAL) && (defined(KOKKOS_ENABLE_OPENMP) || defined(KOKKOS_ENABLE_THREADS))
TEST_CASE("the parallel host backend gives the bits of Serial (1 thread)") {
#if defined(KOKKOS_ENABLE_OPENMP)
  using Parallel = Kokkos::OpenMP;
#else
  using Parallel = Kokkos::Threads;
#endif
  const int threads = reprosgd::detail::concurrency(Parallel());
  MESSAGE("parallel backend ", std::string(Parallel::name()), " runs ", threads, " threads");
  WARN_MESSAGE(threads > 1, "only one thread: run with OMP_NUM_THREADS=2 (or --kokkos-threads=2)");
  const int m = 128, n = 784, k = 512;
  host_matrix ha("a", m, k), hb("b", n, k);
  fill(ha, 21);
  fill(hb, 22);
  matrix<Kokkos::Serial> as("a", m, k), bs("b", n, k), cs("c", m, n);
  matrix<Parallel> ap("a", m, k), bp("b", n, k), cp("c", m, n);
  Kokkos::deep_copy(as, ha);
  Kokkos::deep_copy(bs, hb);
  Kokkos::deep_copy(ap, ha);
  Kokkos::deep_copy(bp, hb);
  reprosgd::gemm_nt(Kokkos::Serial(), as, bs, cs);
  reprosgd::gemm_nt(Parallel(), ap, bp, cp);
  Kokkos::fence();
  host_matrix hs("s", m, n), hp("p", m, n);
  Kokkos::deep_copy(hs, cs);
  Kokkos::deep_copy(hp, cp);
  CHECK(bit_differences(hs, hp) == 0);
}
#endif

TEST_CASE("unmanaged views, subviews and the default-instance overloads") {
  using unmanaged_const =
      Kokkos::View<const float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using unmanaged = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const int m = 19, n = 37, k = 300;
  InputGenerator g(5);
  std::vector<float> abuf(m * k), bbuf(k * n), cbuf(m * n, std::nanf(""));
  for (float& x : abuf) x = g.next();
  for (float& x : bbuf) x = g.next();
  unmanaged_const a(abuf.data(), m, k), b(bbuf.data(), k, n);
  unmanaged c(cbuf.data(), m, n);
  reprosgd::gemm_nn(a, b, c);
  Kokkos::fence();
  host_matrix ha("a", m, k), hb("b", k, n), hc("c", m, n);
  Kokkos::deep_copy(ha, a);
  Kokkos::deep_copy(hb, b);
  Kokkos::deep_copy(hc, c);
  CHECK(bit_differences(hc, reference<gemm_op::nn>(ha, hb, m, n, k)) == 0);

  // Subviews: a block of rows and columns of bigger matrices, so every operand has a row stride
  // larger than its width (the padded layout a LayoutRight subview keeps).
  host_matrix big_a("big_a", 40, 350), big_b("big_b", 330, 60), big_c("big_c", 30, 70);
  fill(big_a, 31);
  fill(big_b, 32);
  Kokkos::deep_copy(big_c, std::nanf(""));
  const auto sa = Kokkos::subview(big_a, std::make_pair(3, 3 + m), std::make_pair(10, 10 + k));
  const auto sb = Kokkos::subview(big_b, std::make_pair(7, 7 + k), std::make_pair(5, 5 + n));
  const auto sc = Kokkos::subview(big_c, std::make_pair(2, 2 + m), std::make_pair(1, 1 + n));
  static_assert(reprosgd::RowMajorMatrix<decltype(sa)>);
  static_assert(reprosgd::MutableRowMajorMatrix<decltype(sc)>);
  CHECK(sa.stride(0) == 350);
  host_matrix ca("ca", m, k), cb("cb", k, n), cc("cc", m, n);
  Kokkos::deep_copy(ca, sa);
  Kokkos::deep_copy(cb, sb);
  reprosgd::gemm_nn(sa, sb, sc);
  Kokkos::fence();
  Kokkos::deep_copy(cc, sc);
  CHECK(bit_differences(cc, reference<gemm_op::nn>(ca, cb, m, n, k)) == 0);
  // Elements of big_c outside the subview are untouched.
  CHECK(std::isnan(big_c(1, 1)));
  CHECK(std::isnan(big_c(2, 0)));
  CHECK(std::isnan(big_c(2, 1 + n)));
  CHECK(std::isnan(big_c(2 + m, 1)));

  // A^T*B and A*B^T through row subviews: the transposed operands keep their stride too.
  host_matrix t_c("t_c", m, n);
  const auto sat = Kokkos::subview(big_b, std::make_pair(0, k), std::make_pair(0, m));  // K x M
  reprosgd::gemm_tn(sat, sb, t_c);
  host_matrix cat("cat", k, m);
  Kokkos::deep_copy(cat, sat);
  CHECK(bit_differences(t_c, reference<gemm_op::tn>(cat, cb, m, n, k)) == 0);
  const auto sbt = Kokkos::subview(big_a, std::make_pair(0, n), std::make_pair(0, k));  // N x K
  reprosgd::gemm_nt(sa, sbt, t_c);
  host_matrix cbt("cbt", n, k);
  Kokkos::deep_copy(cbt, sbt);
  CHECK(bit_differences(t_c, reference<gemm_op::nt>(ca, cbt, m, n, k)) == 0);
}

#if REPROSGD_IMPL_GEMM_HOST_KERNEL
TEST_CASE("a narrow C is computed transposed, a wide one as it is, by every kernel") {
  // The output layer's shapes (N = 10) fill a third of an AVX-512 micro-tile's columns at best; the
  // plan computes C^T there (its rows fill 10 of 12). The bits are the reference's either way (the
  // shapes of the tests above include these); this pins which path those tests exercise.
  namespace gh = reprosgd::detail::gemm_host;
  for (const gh::Isa isa : gh::isas_here()) {
    const std::string kernel = gh::kernel_name(isa);
    CAPTURE(kernel);
    CHECK(gh::make_plan(isa, 128, 10, 512, 1).transposed);
    CHECK(gh::make_plan(isa, 512, 10, 128, 2).transposed);
    CHECK(gh::make_plan(isa, 32, 10, 512, 1).transposed);
    CHECK(gh::make_plan(isa, 100, 1, 70, 1).transposed);
    CHECK(gh::make_plan(isa, 40, 3, 0, 1).transposed);
    CHECK_FALSE(gh::make_plan(isa, 128, 512, 784, 1).transposed);
    CHECK_FALSE(gh::make_plan(isa, 128, 512, 10, 1).transposed);
    CHECK_FALSE(gh::make_plan(isa, 10, 128, 512, 1).transposed);
    CHECK_FALSE(gh::make_plan(isa, 0, 10, 5, 1).transposed);
    const gh::Plan p = gh::make_plan(isa, 128, 10, 512, 2);
    CHECK(p.m == 10);  // C^T's rows
    CHECK(p.n == 128);
    CHECK(p.buffer_floats() >= p.packing_floats() + static_cast<std::size_t>(p.max_strips_m * p.mr) *
                                                        static_cast<std::size_t>(p.max_strips_n * p.nr));
  }
}
#endif

#if REPROSGD_IMPL_GEMM_HOST_KERNEL
TEST_CASE("a large C finished in one K block is streamed past the caches, with the same bits, aligned or not") {
  namespace gh = reprosgd::detail::gemm_host;
  for (const gh::Isa isa : gh::isas_here()) {
    const std::string kernel = gh::kernel_name(isa);
    CAPTURE(kernel);
    // The weight gradients of a micro-batch (K = 32) and of a batch (K = 128): non-temporal stores in
    // the AVX kernels (16 or 32 columns per micro-tile), ordinary ones in the SSE2 kernel (8), for a
    // CPU whose threshold is the smallest one.
    const long least = gh::stream_c_min_bytes;
    const gh::Plan wide = gh::make_plan(isa, 784, 512, 32, 1, least);
    CHECK(wide.stream_c == (wide.nr >= 16));
    CHECK(gh::make_plan(isa, 512, 512, 128, 2, least).stream_c == (wide.nr >= 16));
    CHECK_FALSE(gh::make_plan(isa, 128, 512, 784, 1, least).stream_c);  // several K blocks: C is read back
    CHECK_FALSE(gh::make_plan(isa, 32, 512, 512, 1, least).stream_c);   // 64 KiB: its reader finds it in cache
    CHECK_FALSE(gh::make_plan(isa, 512, 10, 128, 1, least).stream_c);   // transposed: C^T goes to the scratch
    // A CPU whose last-level cache holds a 1.6 MB C many times over keeps it there.
    CHECK_FALSE(gh::make_plan(isa, 784, 512, 32, 1, 784L * 512 * 4 + 1).stream_c);
    CHECK(gh::make_plan(isa, 784, 512, 32, 1, 784L * 512 * 4).stream_c == (wide.nr >= 16));
  }
  // This CPU's threshold: the smallest one, or its last-level cache's 64th part when larger.
  const long llc = gh::last_level_cache_bytes();
  CAPTURE(llc);
  CHECK(gh::stream_c_threshold() == std::max(gh::stream_c_min_bytes, llc / gh::stream_c_llc_share));
  // Bits: C aligned (a Kokkos allocation: every micro-tile streamed), C whose rows are aligned but
  // which starts one row down (streamed), and C one column in with an odd stride (every store an
  // ordinary one); each against the scalar loop, through the entry point and every kernel here.
  const int m = 784, n = 512, k = 32;
  host_matrix a("a", k, m), b("b", k, n);  // tn: A stored K x M
  fill(a, 71);
  fill(b, 72);
  const host_matrix expected = reference<gemm_op::tn>(a, b, m, n, k);
  host_matrix aligned("aligned", m, n), rows_down("rows_down", m + 1, n), odd("odd", m, n + 3);
  const auto down = Kokkos::subview(rows_down, std::make_pair(1, 1 + m), Kokkos::ALL());
  const auto shifted = Kokkos::subview(odd, Kokkos::ALL(), std::make_pair(1, 1 + n));
  Kokkos::deep_copy(rows_down, std::nanf(""));
  Kokkos::deep_copy(odd, std::nanf(""));
  const Kokkos::DefaultHostExecutionSpace space;
  host_matrix got("got", m, n);
  const auto check = [&](const auto& c) {
    Kokkos::deep_copy(c, std::nanf(""));
    reprosgd::gemm_tn(space, a, b, c);
    space.fence();
    Kokkos::deep_copy(got, c);
    CHECK(bit_differences(got, expected) == 0);
    // Every kernel streaming C, whatever this CPU's own threshold.
    check_every_host_kernel<gemm_op::tn>(space, a, b, c, Shape{m, n, k}, nullptr, expected, 0,
                                         reprosgd::detail::gemm_host::stream_c_min_bytes);
  };
  check(aligned);
  check(down);
  check(shifted);
  CHECK(std::isnan(odd(0, 0)));  // the columns beside the subview are untouched
  CHECK(std::isnan(odd(m - 1, n + 1)));
  CHECK(std::isnan(rows_down(0, 0)));
}
#endif

TEST_CASE("shape errors name the operation and both shapes") {
  host_matrix a("a", 128, 784), b("b", 512, 512), c("c", 128, 512), c2("c2", 128, 10);
  CHECK_THROWS_WITH_AS(reprosgd::gemm_nn(a, b, c),
                       "reprosgd::gemm_nn: A is 128x784 but B is 512x512 (inner dimensions differ)",
                       reprosgd::config_error);
  host_matrix w("w", 784, 512);
  CHECK_THROWS_WITH_AS(reprosgd::gemm_nn(a, w, c2), "reprosgd::gemm_nn: C is 128x10 but A*B is 128x512",
                       reprosgd::config_error);
  CHECK_THROWS_WITH_AS(
      reprosgd::gemm_tn(a, b, c),
      "reprosgd::gemm_tn: A is 128x784 (A^T is 784x128) but B is 512x512 (inner dimensions differ)",
      reprosgd::config_error);
  host_matrix g("g", 128, 512), wg("wg", 784, 10);
  CHECK_THROWS_WITH_AS(reprosgd::gemm_tn(a, g, wg), "reprosgd::gemm_tn: C is 784x10 but A^T*B is 784x512",
                       reprosgd::config_error);
  host_matrix dy("dy", 128, 512), wt("wt", 10, 784);
  CHECK_THROWS_WITH_AS(
      reprosgd::gemm_nt(dy, wt, c),
      "reprosgd::gemm_nt: A is 128x512 but B is 10x784 (B^T is 784x10; inner dimensions differ)",
      reprosgd::config_error);
  host_matrix w2("w2", 784, 512);
  CHECK_THROWS_WITH_AS(reprosgd::gemm_nt(dy, w2, c), "reprosgd::gemm_nt: C is 128x512 but A*B^T is 128x784",
                       reprosgd::config_error);
  // The result must not alias an input.
  host_matrix sq("sq", 64, 64);
  host_matrix sq2("sq2", 64, 64);
  CHECK_THROWS_WITH_AS(reprosgd::gemm_nn(sq, sq2, sq),
                       "reprosgd::gemm_nn: C overlaps A (the result must not alias an input)",
                       reprosgd::config_error);
  CHECK_THROWS_WITH_AS(reprosgd::gemm_tn(sq2, Kokkos::subview(sq, std::make_pair(0, 64), Kokkos::ALL), sq),
                       "reprosgd::gemm_tn: C overlaps B (the result must not alias an input)",
                       reprosgd::config_error);
  // A column block of a row-major matrix ends at its last row's last column, not a whole row
  // stride later: a result stored right after the parent matrix does not overlap it (a false
  // positive here once made Dense::chunk_partial throw, depending on where memory landed).
  Kokkos::View<float*, Kokkos::HostSpace> buffer("buffer", 6 * 20 + 6 * 4);
  using unmanaged = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const unmanaged gy(buffer.data(), 6, 20), after(buffer.data() + 6 * 20, 6, 4);
  host_matrix w4("w4", 4, 4);
  const auto block = Kokkos::subview(gy, Kokkos::ALL, std::make_pair(16, 20));
  CHECK_NOTHROW(reprosgd::gemm_nt(block, w4, after));
  // ... while a result starting inside the block's last row still does.
  const unmanaged inside(buffer.data() + 5 * 20 + 17, 1, 4);
  CHECK_THROWS_WITH_AS(reprosgd::gemm_nt(Kokkos::subview(block, std::make_pair(5, 6), Kokkos::ALL), w4, inside),
                       "reprosgd::gemm_nt: C overlaps A (the result must not alias an input)", reprosgd::config_error);
}

}  // TEST_SUITE

TEST_CASE("host_gemm_kernel_name names the kernel this CPU runs, chosen at run time where wider than the build's") {
  const std::string name = reprosgd::host_gemm_kernel_name();
  MESSAGE("host GEMM kernel: ", name);
#if REPROSGD_IMPL_GEMM_HOST_KERNEL
  namespace g = reprosgd::detail::gemm_host;
  // The build's own kernel: the translation unit's instruction set.
#if defined(__AVX512F__)
  const std::string own = "avx512f, 16 lanes, 12x32 micro-tile, FMA instructions";
#elif defined(__AVX2__) && defined(__FMA__)
  const std::string own = "avx2, 8 lanes, 6x16 micro-tile, FMA instructions";
#elif defined(__AVX2__)  // without FMA
  const std::string own = "avx2, 8 lanes, 6x16 micro-tile, fmaf per lane";
#elif defined(__AVX__) && defined(__FMA__)
  const std::string own = "avx, 8 lanes, 6x16 micro-tile, FMA instructions";
#elif defined(__AVX__)
  const std::string own = "avx, 8 lanes, 6x16 micro-tile, fmaf per lane";
#elif defined(__SSE2__)
  const std::string own = "sse2, 4 lanes, 6x8 micro-tile, fmaf per lane";
#else
  const std::string own = "generic, 4 lanes, 6x8 micro-tile, fmaf per lane";
#endif
  CHECK(g::kernel_name(g::Isa::native) == own);
  const g::Isa best = g::best_isa();
  CHECK(g::runs_here(best));
  const std::vector<g::Isa> here = g::isas_here();
  REQUIRE(!here.empty());
  CHECK(here.front() == g::Isa::native);
  CHECK(here.back() == best);  // the widest kernel the CPU runs
  if (best == g::Isa::native) {
    CHECK(name == own);
  } else {
    const std::string wide = best == g::Isa::avx512 ? "avx512f, 16 lanes, 12x32 micro-tile, FMA instructions"
                                                    : "avx2, 8 lanes, 6x16 micro-tile, FMA instructions";
    CHECK(name == wide + " (chosen at run time; the build's own: " + own + ")");
  }
  // A kernel above the build's own exists only where the build lacks that instruction set, and runs
  // only where the CPU has it.
#if defined(REPROSGD_IMPL_GEMM_AVX512_KERNEL) || defined(REPROSGD_IMPL_GEMM_AVX2_KERNEL)
  __builtin_cpu_init();
#endif
#if defined(REPROSGD_IMPL_GEMM_AVX512_KERNEL)
  CHECK(g::runs_here(g::Isa::avx512) == (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
                                         __builtin_cpu_supports("fma")));
#else
  CHECK_FALSE(g::runs_here(g::Isa::avx512));
#endif
#if defined(REPROSGD_IMPL_GEMM_AVX2_KERNEL)
  CHECK(g::runs_here(g::Isa::avx2) == (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")));
#else
  CHECK_FALSE(g::runs_here(g::Isa::avx2));
#endif
#else
  CHECK(name == "portable loop");
#endif
}
