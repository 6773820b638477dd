// What starting the thread pool costs, for the planners that decide whether a job is worth splitting
// (src/linear's plan, quantization): internal to the library, beside the pool of
// include/nmkit/threads.h, whose workers they describe.
#pragma once

#include <cstdint>

namespace nmkit {

// Whether the pool's workers sleep between jobs (OMP_WAIT_POLICY=passive or GOMP_SPINCOUNT=0 with the
// OpenMP pool) instead of spinning; some routes pay a wake-up per call on small layers (linear_plan.cc).
bool workers_sleep();

// About how long the pool takes to start a job on its workers, in seconds. Workers that spin between
// jobs (OpenMP's default, the std::thread pool) start in about a microsecond; workers that sleep
// (OMP_WAIT_POLICY=passive or GOMP_SPINCOUNT=0, which `nmkit bench linear` sets so that the
// libraries it compares do not steal each other's cores) are woken through the kernel, measured at
// ~50 us on this project's VM (docs/design.md section 8.3).
double pool_start_seconds();

// Whether splitting a job the caller alone finishes in about `seconds` across the pool saves more than
// starting the workers costs (never with one thread). oneDNN calls ask it too: oneDNN starts the
// same team.
bool worth_splitting(double seconds);

// The grain for parallel_for(n, grain, fn) over such a job: `grain` when worth_splitting(seconds),
// else n (one chunk: the caller runs it all).
int64_t grain_for(int64_t n, int64_t grain, double seconds);

// About one core's copy rate (read + write bytes per second) on this project's machines: half the
// 2-thread copy bandwidth `nmkit bench linear` prints (26-29 GB/s). Streaming passes over activations
// (quantizing, converting, the oneDNN epilogue) estimate their one-thread time with it.
inline constexpr double kOneCoreCopyBytesPerSecond = 13e9;

}  // namespace nmkit
