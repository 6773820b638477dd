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
// serially on the caller. fn must not throw.
// Thread safety: any thread may call it, also several at once. With the std::thread pool the
// callers' jobs run one at a time (the others wait, so a caller must not hold a lock that fn of
// another caller's job needs); with OpenMP each caller gets its own team.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace nmkit
