// SPDX-License-Identifier: BSD-3-Clause
/// @file The Trainer's gradient rows (one per micro-batch) start at vector-aligned addresses for
/// any parameter count: the GEMMs write the large weight gradients with aligned non-temporal
/// stores only where a row starts aligned (docs/gemm.md, "C written past the caches"), and an
/// unpadded row of an odd parameter count would start mid-line.
#include <doctest/doctest.h>

#include <reprosgd/data/synthetic.hpp>
#include <reprosgd/detail/vector_alignment.hpp>
#include <reprosgd/nn/dense.hpp>
#include <reprosgd/nn/sequential.hpp>
#include <reprosgd/optim/sgd.hpp>
#include <reprosgd/parallel/serial.hpp>
#include <reprosgd/trainer.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

// A test layer in a named namespace (nvcc's extended lambdas).
namespace gradient_rows_test {

/// Where each backward's parameter gradient started (host addresses; the test runs on the host).
inline std::vector<std::uintptr_t> gradient_addresses;

/// y = x, with one parameter whose gradient is 0: as the first layer, its parameter gradient is
/// the start of the micro-batch's gradient row, which backward records.
struct AddressProbe {
  int in = 7;  // the first layer states the model's input width
  static constexpr const char* name() noexcept { return "address_probe"; }
  [[nodiscard]] int output_width(int width) const noexcept { return width; }
  [[nodiscard]] std::size_t parameter_count(int) const noexcept { return 1; }
  [[nodiscard]] std::string describe(int) const { return "address_probe"; }
  template <class Ctx, class P>
  void initialize(const Ctx& ctx, const P& p, int) const {
    Kokkos::deep_copy(ctx.space, p, 1.0f);
  }
  template <class Ctx, class P, class In, class Out>
  void forward(const Ctx& ctx, const P&, const In& x, const Out& y) const {
    Kokkos::deep_copy(ctx.space, y, x);
  }
  template <class Ctx, class P, class In, class Out, class GOut, class GIn, class GP>
  void backward(const Ctx& ctx, const P&, const In&, const Out&, const GOut& gy, const GIn& gx, const GP& gp) const {
    gradient_addresses.push_back(reinterpret_cast<std::uintptr_t>(gp.data()));
    if (gx.extent(0) > 0) Kokkos::deep_copy(ctx.space, gx, gy);
    Kokkos::deep_copy(ctx.space, gp, 0.0f);
  }
};
static_assert(reprosgd::Layer<AddressProbe>);

}  // namespace gradient_rows_test

TEST_SUITE("trainer/gradient_rows") {
  TEST_CASE("every micro-batch's gradient row starts vector-aligned, for an odd parameter count") {
    using gradient_rows_test::AddressProbe, gradient_rows_test::gradient_addresses;
    const auto train = reprosgd::make_synthetic_classification(7, 64, 7, 3);
    // 1 + 7 x 3 + 3 = 25 parameters: unpadded, row u would start 100 u bytes in.
    reprosgd::Sequential model{AddressProbe{}, reprosgd::Dense{7, 3}};
    REQUIRE(model.parameter_count() == 25);
    const reprosgd::Sgd sgd{{.lr = 0.05f}};
    reprosgd::Trainer<reprosgd::Serial<>> trainer({.global_batch = 16, .micro_batch = 4, .steps = 2, .seed = 3,
                                                    .evaluate_each_epoch = false});
    auto state = trainer.start(model, sgd);
    gradient_addresses.clear();
    trainer.fit(model, sgd, state, train);
    REQUIRE(gradient_addresses.size() == 8);  // 2 steps x 4 micro-batches
    std::set<std::uintptr_t> rows;
    for (const std::uintptr_t a : gradient_addresses) {
      CAPTURE(a);
      CHECK(a % reprosgd::detail::vector_alignment == 0);
      rows.insert(a);
    }
    CHECK(rows.size() == 4);  // four rows, the same four in both steps
    // Consecutive rows are one padded stride apart: 25 floats rounded up to 32.
    CHECK(*std::next(rows.begin()) - *rows.begin() == 32 * sizeof(float));
  }
}
