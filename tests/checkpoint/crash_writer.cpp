// SPDX-License-Identifier: BSD-3-Clause
// The writer of the crash-safety test: resumes from the newest good checkpoint in argv[1], then
// saves step after step forever (until the test SIGKILLs it).
#include "crash_payload.hpp"

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 2;
  }
  try {
    crash_test::Manager mgr(argv[1], {.keep_last = crash_test::keep_last});
    crash_test::Payload staging;
    const reprosgd::ResumeResult r = mgr.resume_auto(crash_test::config(), staging);
    if (r && staging.step != r.info.step) return 3;  // the payload must be the step's
    for (std::uint64_t step = r ? r.info.step + 1 : 1;; ++step) {
      reprosgd::SnapshotInfo info;
      info.config = crash_test::config();
      info.step = step;
      mgr.save(info, crash_test::payload_for(step));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "crash_writer: %s\n", e.what());
    return 1;
  }
}
