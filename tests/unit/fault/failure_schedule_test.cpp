// SPDX-License-Identifier: BSD-3-Clause
/// @file FailureSchedule: parsing (exact error messages), lookups, and maybe_fail's SIGKILL; fault policies.
#include <doctest/doctest.h>

#include <reprosgd/fault/fault_injection.hpp>
#include <reprosgd/fault/policies.hpp>
#include <reprosgd/parallel/serial.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using reprosgd::FailurePoint;
using reprosgd::FailureSchedule;
using reprosgd::ScheduledFailure;

std::string parse_error(const std::string& spec) {
  try {
    (void)FailureSchedule::parse(spec);
  } catch (const reprosgd::config_error& e) {
    return e.what();
  }
  return "no error";
}

std::string expected_error(const std::string& problem, const std::string& token, const std::string& spec) {
  return "reprosgd::FailureSchedule::parse: " + problem + " in entry \"" + token + "\" of \"" + spec +
         "\" (expected RANK@STEP[:step|allreduce|checkpoint|setup|start|regrow], e.g. 2@17:allreduce)";
}

/// Run maybe_fail in a child process; its wait status.
int status_of_child(const FailureSchedule& s, int rank, std::uint64_t step, FailurePoint point) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    s.maybe_fail(rank, step, point);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

}  // namespace

TEST_CASE("FailureSchedule::parse reads ranks, steps and points") {
  const FailureSchedule s = FailureSchedule::parse("2@17:allreduce,0@5:checkpoint,3@0,1@18446744073709551615:step");
  const std::vector<ScheduledFailure> want{{2, 17, FailurePoint::allreduce},
                                           {0, 5, FailurePoint::checkpoint},
                                           {3, 0, FailurePoint::step},
                                           {1, 18446744073709551615ull, FailurePoint::step}};
  CHECK(s.failures() == want);
  CHECK_FALSE(s.empty());
  CHECK(s.scheduled(2, 17, FailurePoint::allreduce));
  CHECK_FALSE(s.scheduled(2, 17, FailurePoint::step));
  CHECK_FALSE(s.scheduled(2, 16, FailurePoint::allreduce));
  CHECK_FALSE(s.scheduled(1, 17, FailurePoint::allreduce));
  CHECK(s.scheduled(3, 0, FailurePoint::step));
  CHECK(FailureSchedule::parse("").empty());
  CHECK(FailureSchedule::parse("7@3").failures() == std::vector<ScheduledFailure>{{7, 3, FailurePoint::step}});
  // The set-up point (train_mlp: after MPI_Init, before the policy's communicators; step 0).
  const FailureSchedule setup = FailureSchedule::parse("2@0:setup");
  CHECK(setup.failures() == std::vector<ScheduledFailure>{{2, 0, FailurePoint::setup}});
  CHECK(setup.scheduled(2, 0, FailurePoint::setup));
  CHECK_FALSE(setup.scheduled(2, 0, FailurePoint::step));
  CHECK(std::string(reprosgd::to_string(FailurePoint::setup)) == "setup");
  // fit()'s start stage (before its agreements and first buddy snapshot).
  const FailureSchedule start = FailureSchedule::parse("1@0:start,3@20:start");
  CHECK(start.failures() == std::vector<ScheduledFailure>{{1, 0, FailurePoint::start}, {3, 20, FailurePoint::start}});
  CHECK(start.scheduled(3, 20, FailurePoint::start));
  CHECK_FALSE(start.scheduled(1, 0, FailurePoint::step));
  CHECK(std::string(reprosgd::to_string(FailurePoint::start)) == "start");
  // A regrow: the spares recruited, the state not yet sent (at the step the failure interrupted).
  const FailureSchedule regrow = FailureSchedule::parse("4@20:regrow");
  CHECK(regrow.failures() == std::vector<ScheduledFailure>{{4, 20, FailurePoint::regrow}});
  CHECK(regrow.scheduled(4, 20, FailurePoint::regrow));
  CHECK_FALSE(regrow.scheduled(4, 20, FailurePoint::step));
  CHECK(std::string(reprosgd::to_string(FailurePoint::regrow)) == "regrow");
}

TEST_CASE("FailureSchedule::parse names the bad entry exactly") {
  CHECK(parse_error("2@17,,1@3") == expected_error("empty entry", "", "2@17,,1@3"));
  CHECK(parse_error("2@17,") == expected_error("empty entry", "", "2@17,"));
  CHECK(parse_error("2@17,3") == expected_error("no '@'", "3", "2@17,3"));
  CHECK(parse_error("x@1") == expected_error("rank \"x\" is not an integer >= 0", "x@1", "x@1"));
  CHECK(parse_error("-1@1") == expected_error("rank \"-1\" is not an integer >= 0", "-1@1", "-1@1"));
  CHECK(parse_error("@1") == expected_error("rank \"\" is not an integer >= 0", "@1", "@1"));
  CHECK(parse_error("99999999999@1") ==
        expected_error("rank \"99999999999\" is not an integer >= 0", "99999999999@1", "99999999999@1"));
  CHECK(parse_error("1@ 2") == expected_error("step \" 2\" is not an integer >= 0", "1@ 2", "1@ 2"));
  CHECK(parse_error("1@2x:step") == expected_error("step \"2x\" is not an integer >= 0", "1@2x:step", "1@2x:step"));
  CHECK(parse_error("1@") == expected_error("step \"\" is not an integer >= 0", "1@", "1@"));
  CHECK(parse_error("1@18446744073709551616") ==
        expected_error("step \"18446744073709551616\" is not an integer >= 0", "1@18446744073709551616",
                       "1@18446744073709551616"));
  CHECK(parse_error("0@1:allreduce,2@17:allreduc") ==
        expected_error("unknown point \"allreduc\"", "2@17:allreduc", "0@1:allreduce,2@17:allreduc"));
  CHECK(parse_error("2@17:") == expected_error("unknown point \"\"", "2@17:", "2@17:"));
  CHECK(parse_error("1@2,1@2:step") ==
        "reprosgd::FailureSchedule::parse: duplicate entry \"1@2:step\" in \"1@2,1@2:step\"");
  CHECK_THROWS_WITH_AS(FailureSchedule(std::vector<ScheduledFailure>{{-2, 1, FailurePoint::step}}),
                       "reprosgd::FailureSchedule: rank -2 is negative", reprosgd::config_error);
}

TEST_CASE("FailureSchedule::maybe_fail kills the process with SIGKILL exactly when scheduled") {
  const FailureSchedule s = FailureSchedule::parse("1@4:allreduce");
  const int killed = status_of_child(s, 1, 4, FailurePoint::allreduce);
  CHECK(WIFSIGNALED(killed));
  CHECK(WTERMSIG(killed) == SIGKILL);
  for (const int status : {status_of_child(s, 0, 4, FailurePoint::allreduce), status_of_child(s, 1, 5, FailurePoint::allreduce),
                           status_of_child(s, 1, 4, FailurePoint::step)}) {
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  s.maybe_fail(0, 0, "checkpoint");  // not scheduled: returns
  CHECK_THROWS_WITH_AS(s.maybe_fail(0, 0, "reduce"),
                       "reprosgd::FailureSchedule::maybe_fail: unknown point \"reduce\" (expected step, allreduce, "
                       "checkpoint, setup, start or regrow)",
                       reprosgd::config_error);
}

TEST_CASE("fault policies: names, actions, restart exit code, compatibility") {
  static_assert(reprosgd::FaultPolicy<reprosgd::Abort>);
  static_assert(reprosgd::restart_exit_code == 75);
  static_assert(reprosgd::RestartFromCheckpoint::exit_code == 75);
  static_assert(reprosgd::check_fault_policy<reprosgd::Abort, reprosgd::Serial<>>());
  static_assert(reprosgd::check_fault_policy<reprosgd::RestartFromCheckpoint, reprosgd::Serial<>>());
  static_assert(!reprosgd::RecoverableParallelism<reprosgd::Serial<>>);
  CHECK(std::string(reprosgd::Abort::name()) == "abort");
  CHECK(std::string(reprosgd::RestartFromCheckpoint::name()) == "restart_from_checkpoint");
  CHECK(std::string(reprosgd::ShrinkAndContinue::name()) == "shrink_and_continue");
  CHECK(reprosgd::Abort::on_process_failure == reprosgd::FailureAction::abort);
  CHECK(reprosgd::RestartFromCheckpoint::on_process_failure == reprosgd::FailureAction::restart_from_checkpoint);
  CHECK(reprosgd::ShrinkAndContinue::on_process_failure == reprosgd::FailureAction::shrink_and_continue);
  CHECK(reprosgd::ShrinkAndContinue::needs_ulfm);
  CHECK_FALSE(reprosgd::RestartFromCheckpoint::needs_ulfm);
  CHECK(std::string(reprosgd::to_string(FailurePoint::allreduce)) == "allreduce");
}
