// Seconds elapsed on the steady clock, for the timings that reports and progress lines print.
#pragma once

#include <chrono>

namespace nmkit {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace nmkit
