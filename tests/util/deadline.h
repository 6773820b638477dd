// Runs a call that must finish quickly, and fails the test process at once if it does not: the
// reproducers of issue 13 C1 looped over 2^48 rows (days), and a test that hangs until CTest's
// timeout says less than one that stops after a few seconds naming the call.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <utility>

namespace nmkit::test {

// Runs fn() on its own thread; returns its result when it finishes within `seconds`, else prints
// `what` and ends the process with exit code 1 (the hung thread cannot be stopped or joined).
template <class Fn>
auto finishes_within(double seconds, const std::string& what, Fn fn) {
  std::packaged_task<decltype(fn())()> task(std::move(fn));
  auto done = task.get_future();
  std::thread(std::move(task)).detach();
  if (done.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: %s did not finish within %g s\n", what.c_str(), seconds);
    std::fflush(stderr);
    std::_Exit(1);
  }
  return done.get();
}

}  // namespace nmkit::test
