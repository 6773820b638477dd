// A fixed pool of worker threads for data-parallel loops. NMKIT_THREADS sets its size (default: all
// cores). Workers are created once, so a kernel call of a few microseconds does not pay for threads.
// The default build runs it on OpenMP's team, the threads oneDNN also uses, so the two never compete
// for cores (CMake option NMKIT_OPENMP_POOL; off, a std::thread pool).
#pragma once

#include <cstdint>
#include <functional>

namespace nmkit {

// Threads the pool runs (NMKIT_THREADS, else std::thread::hardware_concurrency()).
int thread_count();

// Splits [0, n) into at most thread_count() contiguous chunks of whole `grain`s and runs
// fn(begin, end) on each, the calling thread taking one; returns when all are done. Nested calls run
// serially on the caller. An exception from fn (std::bad_alloc) is thrown again on the caller once
// every chunk has finished (the first one, when several throw).
// Thread safety: any thread may call it, also several at once. With the std::thread pool the
// callers' jobs run one at a time (the others wait, so a caller must not hold a lock that fn of
// another caller's job needs); with OpenMP each caller gets its own team.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

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
