// SPDX-License-Identifier: BSD-3-Clause
/// @file BackgroundWriter (trainer/background_writer.hpp): jobs run one at a time in posting order,
/// behind the caller or on it; settle() returns once every posted job has run; the first error is
/// kept; a job that throws is an error, not a crash; the destructor runs what is still posted.
#include <doctest/doctest.h>

#include <reprosgd/trainer/background_writer.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using reprosgd::detail::BackgroundWriter;

TEST_CASE("BackgroundWriter runs jobs in posting order, one at a time, behind the caller") {
  for (const bool inline_jobs : {false, true}) {
    CAPTURE(inline_jobs);
    std::vector<int> order;  // touched by one job at a time, read after settle()
    std::atomic<int> running{0}, most{0};
    const auto caller = std::this_thread::get_id();
    std::atomic<int> on_caller{0};
    {
      BackgroundWriter writer(inline_jobs);
      CHECK(writer.runs_inline() == inline_jobs);
      for (int i = 0; i < 50; ++i)
        writer.post([&, i] {
          const int now = ++running;
          most = std::max(most.load(), now);
          if (std::this_thread::get_id() == caller) ++on_caller;
          if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
          order.push_back(i);
          --running;
          return std::string();
        });
      writer.settle();
      REQUIRE(order.size() == 50);
      for (int i = 0; i < 50; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
      CHECK(most.load() == 1);
      CHECK(on_caller.load() == (inline_jobs ? 50 : 0));
      CHECK(writer.error().empty());
      // What is posted before destruction still runs.
      writer.post([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        order.push_back(50);
        return std::string();
      });
    }
    CHECK(order.size() == 51);
  }
}

TEST_CASE("BackgroundWriter keeps the first error; a throwing job is an error") {
  for (const bool inline_jobs : {false, true}) {
    CAPTURE(inline_jobs);
    BackgroundWriter writer(inline_jobs);
    writer.post([] { return std::string(); });
    writer.post([] { return std::string("first"); });
    writer.post([]() -> std::string { throw std::runtime_error("second"); });
    writer.settle();
    CHECK(writer.error() == "first");
    writer.clear_error();
    CHECK(writer.error().empty());
    writer.post([]() -> std::string { throw std::runtime_error("disk full"); });
    writer.settle();
    CHECK(writer.error() == "disk full");
    writer.clear_error();
    writer.post([]() -> std::string { throw 7; });
    writer.settle();
    CHECK(writer.error() == "reprosgd: a trace job failed with an unknown exception");
  }
}

TEST_CASE("BackgroundWriter::set_inline lets the job in flight finish first") {
  BackgroundWriter writer(false);
  std::vector<int> order;
  writer.post([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    order.push_back(1);
    return std::string();
  });
  writer.set_inline(true);
  writer.post([&] {
    order.push_back(2);
    return std::string();
  });
  REQUIRE(order.size() == 2);  // the inline job ran at post(), after the one in flight
  CHECK(order[0] == 1);
  CHECK(order[1] == 2);
}
