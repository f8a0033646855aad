// SPDX-License-Identifier: BSD-3-Clause
/// @file Optimizers and schedules: bitwise agreement with a scalar reference, known values, errors;
/// AnyOptimizer is the optimizer it holds.
#include <doctest/doctest.h>

#include <reprosgd/optim/adam.hpp>
#include <reprosgd/optim/any_optimizer.hpp>
#include <reprosgd/optim/schedule.hpp>
#include <reprosgd/optim/sgd.hpp>
#include <reprosgd/testing/doctest_helpers.hpp>

#include <support/exec_spaces.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {
using Mem = Kokkos::HostSpace;
using B = reprosgd::Buffer<Mem>;

float value(std::uint64_t i) {
  std::uint64_t x = i * 0x9E3779B97F4A7C15ull + 777;
  x = (x ^ (x >> 31)) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<float>(x >> 40) * 0x1p-24f * 2.0f - 1.0f;
}
B filled(const char* name, long n, std::uint64_t seed) {
  B b(std::string(name), n);
  for (long i = 0; i < n; ++i) b(i) = value(seed * 100003 + static_cast<std::uint64_t>(i));
  return b;
}
}  // namespace

TEST_SUITE("optim") {
  TEST_CASE_TEMPLATE_DEFINE("SGD in every variant (momentum, Nesterov, weight decay, dampening) equals the scalar reference",
                            Space, sgd_id) {
    struct Variant {
      float momentum;
      bool nesterov;
      float wd;
      float damp = 0.0f;
    };
    // Sizes below, at and across the update's 2048-element chunks, with a ragged tail.
    for (const long n : {1000L, 2048L, 5000L}) {
      for (const Variant var : {Variant{0.0f, false, 0.0f}, Variant{0.0f, false, 1e-3f}, Variant{0.9f, false, 0.0f},
                                Variant{0.9f, false, 1e-3f}, Variant{0.9f, true, 0.0f}, Variant{0.9f, true, 1e-3f},
                                Variant{0.9f, false, 0.0f, 0.3f}, Variant{0.5f, false, 1e-3f, 1.0f}}) {
        CAPTURE(n);
        CAPTURE(var.momentum);
        CAPTURE(var.nesterov);
        CAPTURE(var.wd);
        CAPTURE(var.damp);
        reprosgd::Sgd sgd{{.lr = 0.05f, .momentum = var.momentum, .nesterov = var.nesterov, .weight_decay = var.wd,
                           .dampening = var.damp}};
        B p = filled("p", n, 1);
        std::vector<float> rp(p.data(), p.data() + n), rv(n, 0.0f);
        auto state = sgd.init<Mem>(n);
        for (int step = 0; step < 5; ++step) {
          B g = filled("g", n, 10 + step);
          const float lr = 0.05f * (1.0f - 0.1f * step);
          sgd.step(Space(), state, p, g, lr);
          Space().fence();
          for (long i = 0; i < n; ++i) {  // the general formula, one element at a time
            float gi = g(i);
            if (var.wd != 0.0f) gi = gi + var.wd * rp[i];
            if (var.momentum != 0.0f && var.damp != 0.0f) {  // torch.optim.SGD: the first step's buffer is g
              rv[i] = step == 0 ? gi : var.momentum * rv[i] + (1.0f - var.damp) * gi;
              gi = rv[i];
            } else if (var.momentum != 0.0f) {
              rv[i] = var.momentum * rv[i] + gi;
              gi = var.nesterov ? gi + var.momentum * rv[i] : rv[i];
            }
            rp[i] = rp[i] - lr * gi;
          }
        }
        Kokkos::View<float*, Mem, Kokkos::MemoryUnmanaged> ref(rp.data(), n);
        REPROSGD_CHECK_BITWISE_EQUAL(p, ref);
        if (var.momentum != 0.0f) {
          Kokkos::View<float*, Mem, Kokkos::MemoryUnmanaged> ref_v(rv.data(), n);
          REPROSGD_CHECK_BITWISE_EQUAL(state.velocity, ref_v);
        }
        CHECK(state.steps == 5);
      }
    }
  }
  TEST_CASE_TEMPLATE_APPLY(sgd_id, reprosgd_test::spaces);

  TEST_CASE_TEMPLATE_DEFINE("Adam and AdamW equal the scalar reference", Space, adam_id) {
    const long n = 777;
    for (bool decoupled : {false, true}) {
      CAPTURE(decoupled);
      reprosgd::Adam adam{{.lr = 1e-2f, .weight_decay = 0.01f}};
      reprosgd::AdamW adamw{{.lr = 1e-2f, .weight_decay = 0.01f}};
      B p = filled("p", n, 2);
      std::vector<float> rp(p.data(), p.data() + n), rm(n, 0.0f), rv(n, 0.0f);
      auto sa = adam.init<Mem>(n);
      auto sw = adamw.init<Mem>(n);
      double b1t = 1.0, b2t = 1.0;
      for (int step = 0; step < 4; ++step) {
        B g = filled("g", n, 20 + step);
        if (decoupled)
          adamw.step(Space(), sw, p, g, 1e-2f);
        else
          adam.step(Space(), sa, p, g, 1e-2f);
        Space().fence();
        b1t *= 0.9f;
        b2t *= 0.999f;
        const float c1 = static_cast<float>(1.0 / (1.0 - b1t)), c2 = static_cast<float>(1.0 / (1.0 - b2t));
        for (long i = 0; i < n; ++i) {
          float pi = rp[i], gi = g(i);
          if (decoupled)
            pi = pi - 1e-2f * 0.01f * pi;
          else
            gi = gi + 0.01f * pi;
          rm[i] = 0.9f * rm[i] + (1.0f - 0.9f) * gi;
          rv[i] = 0.999f * rv[i] + (1.0f - 0.999f) * (gi * gi);
          rp[i] = pi - 1e-2f * (rm[i] * c1) / (std::sqrt(rv[i] * c2) + 1e-8f);
        }
      }
      Kokkos::View<float*, Mem, Kokkos::MemoryUnmanaged> ref(rp.data(), n);
      REPROSGD_CHECK_BITWISE_EQUAL(p, ref);
    }
  }
  TEST_CASE_TEMPLATE_APPLY(adam_id, reprosgd_test::spaces);

  TEST_CASE_TEMPLATE_DEFINE("step_ranges: the bits of step() over any ranges, after(r) once per range once it is written",
                            Space, ranges_id) {
    const long n = 40000;
    // Ragged ranges: one element, several of the Sgd's 2048-element blocks and a partial one,
    // a trace chunk (16384 floats), a short one, the rest.
    const std::vector<reprosgd::ElementRange> ranges{{0, 1}, {1, 7001}, {7001, 23385}, {23385, 23390}, {23390, 40000}};
    auto check = [&](const auto& opt, auto&& states_equal) {
      B p1 = filled("p1", n, 3), p2 = filled("p2", n, 3), seen("seen", n);
      auto s1 = opt.template init<Mem>(n);
      auto s2 = opt.template init<Mem>(n);
      for (int step = 0; step < 3; ++step) {
        B g = filled("g", n, 30 + step);
        std::vector<std::atomic<int>> calls(ranges.size());
        opt.step(Space(), s1, p1, g, 0.01f);
        opt.step_ranges(Space(), s2, p2, g, 0.01f, std::span<const reprosgd::ElementRange>(ranges),
                        [&](std::size_t r) {
                          ++calls[r];
                          for (std::size_t i = ranges[r].begin; i < ranges[r].end; ++i) seen(i) = p2(i);
                        });
        Space().fence();
        for (const auto& c : calls) CHECK(c.load() == 1);
        REPROSGD_CHECK_BITWISE_EQUAL(p2, p1);
        REPROSGD_CHECK_BITWISE_EQUAL(seen, p2);  // what after(r) saw was the range's final value
        states_equal(s1, s2);
      }
    };
    for (const auto& sgd : {reprosgd::Sgd{{.lr = 0.05f}}, reprosgd::Sgd{{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f}},
                            reprosgd::Sgd{{.lr = 0.05f, .momentum = 0.9f, .nesterov = true}},
                            reprosgd::Sgd{{.lr = 0.05f, .momentum = 0.5f, .dampening = 0.3f}}}) {
      CAPTURE(sgd.describe());
      check(sgd, [](const auto& a, const auto& b) {
        if (a.velocity.extent(0) > 0) REPROSGD_CHECK_BITWISE_EQUAL(b.velocity, a.velocity);
        CHECK(b.steps == a.steps);
      });
    }
    auto adam_equal = [](const auto& a, const auto& b) {
      REPROSGD_CHECK_BITWISE_EQUAL(b.m, a.m);
      REPROSGD_CHECK_BITWISE_EQUAL(b.v, a.v);
      CHECK(b.steps == a.steps);
      CHECK(b.beta1_power == a.beta1_power);
      CHECK(b.beta2_power == a.beta2_power);
    };
    check(reprosgd::Adam{{.lr = 1e-2f, .weight_decay = 0.01f}}, adam_equal);
    check(reprosgd::AdamW{{.lr = 1e-2f, .weight_decay = 0.01f}}, adam_equal);
  }
  TEST_CASE_TEMPLATE_APPLY(ranges_id, reprosgd_test::host_spaces);

  TEST_CASE_TEMPLATE_DEFINE("AnyOptimizer is the optimizer it holds: description, state elements and bits", Space, any_id) {
    const long n = 5000;
    const std::vector<reprosgd::ElementRange> ranges{{0, 3}, {3, 2100}, {2100, 5000}};
    // The state's elements as (name, bits) in visit order: what checkpoints and fingerprints read.
    auto elements = [](const auto& state) {
      std::vector<std::pair<std::string, std::vector<float>>> out;
      state.visit([&](const char* name, const auto& x) {
        using X = std::remove_cvref_t<decltype(x)>;
        std::vector<float> bits;
        if constexpr (Kokkos::is_view<X>::value) {
          auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x);
          bits.assign(h.data(), h.data() + h.extent(0));
        } else {
          bits.push_back(static_cast<float>(x));
        }
        out.emplace_back(name, std::move(bits));
      });
      return out;
    };
    auto check = [&](const auto& opt) {
      CAPTURE(opt.describe());
      const reprosgd::AnyOptimizer any(opt);
      CHECK(any.describe() == opt.describe());
      CHECK(std::string(any.held_name()) == opt.name());
      CHECK(any.base_lr() == opt.base_lr());
      using DevMem = typename Space::memory_space;
      auto to_space = [](const B& h) {
        reprosgd::Buffer<DevMem> d("d", h.extent(0));
        Kokkos::deep_copy(d, h);
        return d;
      };
      auto p1 = to_space(filled("p", n, 4)), p2 = to_space(filled("p", n, 4));
      auto s1 = opt.template init<DevMem>(n);
      auto s2 = any.template init<DevMem>(n);
      auto s3 = any.template init<Kokkos::HostSpace>(n);
      B p3h = filled("p", n, 4);
      for (int step = 0; step < 3; ++step) {
        const B gh = filled("g", n, 40 + step);
        const auto g = to_space(gh);
        opt.step(Space(), s1, p1, g, 0.02f);
        any.step(Space(), s2, p2, g, 0.02f);
        if constexpr (Kokkos::SpaceAccessibility<Space, Kokkos::HostSpace>::accessible)
          any.step_ranges(Space(), s3, p3h, gh, 0.02f, std::span<const reprosgd::ElementRange>(ranges), [](std::size_t) {});
        Space().fence();
      }
      REPROSGD_CHECK_BITWISE_EQUAL(p2, p1);
      CHECK(elements(s2) == elements(s1));
      if constexpr (Kokkos::SpaceAccessibility<Space, Kokkos::HostSpace>::accessible) {
        REPROSGD_CHECK_BITWISE_EQUAL(p3h, p1);
        CHECK(elements(s3) == elements(s1));
      }
    };
    check(reprosgd::Sgd{{.lr = 0.05f, .momentum = 0.9f, .nesterov = true, .weight_decay = 1e-3f}});
    check(reprosgd::Adam{{.lr = 1e-2f, .weight_decay = 0.01f}});
    check(reprosgd::AdamW{{.lr = 1e-2f, .weight_decay = 0.01f}});
  }
  TEST_CASE_TEMPLATE_APPLY(any_id, reprosgd_test::spaces);

  TEST_CASE("AnyOptimizer refuses invalid hyperparameters as the held one does, and another optimizer's state") {
    const reprosgd::AnyOptimizer bad(reprosgd::AdamW{{.lr = 1e-3f, .beta2 = 1.0f}});
    std::string held_message;
    try {
      reprosgd::AdamW{{.lr = 1e-3f, .beta2 = 1.0f}}.check();
    } catch (const reprosgd::config_error& e) {
      held_message = e.what();
    }
    REQUIRE(!held_message.empty());
    CHECK_THROWS_WITH_AS(bad.check(), held_message.c_str(), reprosgd::config_error);
    const reprosgd::AnyOptimizer adam(reprosgd::Adam{{.lr = 1e-3f}}), sgd(reprosgd::Sgd{{.lr = 0.1f}});
    auto state = sgd.init<Mem>(4);
    B p("p", 4), g("g", 4);
    CHECK_THROWS_WITH_AS(adam.step(Kokkos::Serial(), state, p, g, 1e-3f),
                         "reprosgd::AnyOptimizer: the state was made by another optimizer than adam (use the state "
                         "this optimizer's init() made)",
                         reprosgd::config_error);
  }

  TEST_CASE("known values") {
    B p("p", 1), g("g", 1);
    p(0) = 1.0f;
    g(0) = 0.5f;
    reprosgd::Sgd sgd{{.lr = 0.1f}};
    auto s = sgd.init<Mem>(1);
    CHECK(s.velocity.extent(0) == 0);  // no momentum, no velocity buffer
    sgd.step(Kokkos::Serial(), s, p, g, 0.1f);
    Kokkos::fence();
    CHECK(p(0) == 1.0f - 0.1f * 0.5f);
    // Adam's first step moves by lr * g / (|g| + eps) ~ lr.
    p(0) = 1.0f;
    reprosgd::Adam adam{{.lr = 0.001f}};
    auto sa = adam.init<Mem>(1);
    adam.step(Kokkos::Serial(), sa, p, g, 0.001f);
    Kokkos::fence();
    CHECK(p(0) == doctest::Approx(0.999f).epsilon(1e-6));
    CHECK(sa.beta1_power == doctest::Approx(0.9));
    // Dampening is in the description (which checkpoints compare) only when set: the description
    // of every run without it is unchanged.
    CHECK(reprosgd::Sgd{{.lr = 0.1f, .momentum = 0.9f}}.describe().find("dampening") == std::string::npos);
    CHECK(reprosgd::Sgd{{.lr = 0.1f, .momentum = 0.9f, .dampening = 0.5f}}.describe().find("dampening=0x1p-1") !=
          std::string::npos);
  }

  TEST_CASE("invalid hyperparameters are refused with the name of the field") {
    CHECK_THROWS_WITH_AS(reprosgd::Sgd{{.lr = 0.0f}}.check(), "reprosgd::Sgd: lr must be a finite number > 0, got 0",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS(reprosgd::Sgd{{.lr = -1.0f}}.check(), "reprosgd::Sgd: lr must be a finite number > 0, got -1",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS(reprosgd::Sgd{{.lr = NAN}}.check(), "reprosgd::Sgd: lr must be a finite number > 0, got nan",
                         reprosgd::config_error);
    const reprosgd::Sgd momentum1{{.lr = 0.1f, .momentum = 1.0f}};
    CHECK_THROWS_WITH_AS(momentum1.check(),
                         "reprosgd::Sgd: momentum must be in [0, 1), got 1", reprosgd::config_error);
    const reprosgd::Sgd nesterov0{{.lr = 0.1f, .nesterov = true}};
    CHECK_THROWS_WITH_AS(nesterov0.check(), "reprosgd::Sgd: nesterov needs momentum > 0",
                         reprosgd::config_error);
    const reprosgd::Sgd damp2{{.lr = 0.1f, .momentum = 0.9f, .dampening = 2.0f}};
    CHECK_THROWS_WITH_AS(damp2.check(), "reprosgd::Sgd: dampening must be in [0, 1], got 2", reprosgd::config_error);
    const reprosgd::Sgd nesterov_damp{{.lr = 0.1f, .momentum = 0.9f, .nesterov = true, .dampening = 0.1f}};
    CHECK_THROWS_WITH_AS(nesterov_damp.check(), "reprosgd::Sgd: nesterov needs dampening 0 (as torch.optim.SGD)",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS(reprosgd::Adam{{.beta2 = 1.0f}}.check(), "reprosgd::Adam: beta2 must be in [0, 1), got 1",
                         reprosgd::config_error);
    CHECK_THROWS_WITH_AS(reprosgd::AdamW{{.weight_decay = -1.0f}}.check(),
                         "reprosgd::AdamW: weight_decay must be a finite number >= 0, got -1", reprosgd::config_error);
  }

  TEST_CASE("schedules") {
    reprosgd::Schedule constant;
    CHECK(constant.factor(12345) == 1.0);
    reprosgd::Schedule step{.kind = reprosgd::ScheduleKind::step, .step_size = 10, .gamma = 0.5};
    CHECK(step.factor(9) == 1.0);
    CHECK(step.factor(10) == 0.5);
    CHECK(step.factor(35) == 0.125);
    reprosgd::Schedule cosine{.kind = reprosgd::ScheduleKind::cosine, .warmup_steps = 10, .total_steps = 110};
    cosine.check();
    CHECK(cosine.factor(0) == 0.1);
    CHECK(cosine.factor(9) == 1.0);
    CHECK(cosine.factor(10) == 1.0);
    CHECK(cosine.factor(60) == doctest::Approx(0.5).epsilon(1e-15));
    CHECK(cosine.factor(110) == 0.0);
    CHECK(cosine.factor(500) == 0.0);
    CHECK(cosine.lr(0.1f, 60) == static_cast<float>(0.1f * cosine.factor(60)));
    reprosgd::Schedule bad{.kind = reprosgd::ScheduleKind::cosine, .warmup_steps = 10, .total_steps = 10};
    CHECK_THROWS_WITH_AS(bad.check(), "reprosgd::Schedule: total_steps (10) must exceed warmup_steps (10)",
                         reprosgd::config_error);
    reprosgd::Schedule bad_step{.kind = reprosgd::ScheduleKind::step, .step_size = 0};
    CHECK_THROWS_WITH_AS(bad_step.check(), "reprosgd::Schedule: step_size must be > 0, got 0", reprosgd::config_error);
  }
}
