// A fixed pool of worker threads for data-parallel loops. NMKIT_THREADS sets its size (default: all
// cores). Workers are created once, so a kernel call of a few microseconds does not pay for threads.
#pragma once

#include <cstdint>
#include <functional>

namespace nmkit {

// Threads the pool runs (NMKIT_THREADS, else std::thread::hardware_concurrency()).
int thread_count();

// Splits [0, n) into at most thread_count() contiguous chunks of whole `grain`s and runs
// fn(begin, end) on each, the calling thread taking one; returns when all are done. Nested calls run
// serially on the caller. fn must not throw.
// Thread safety: any thread may call it, also several at once; the pool runs one caller's job at a
// time and the others wait for it (their work is not interleaved), so a caller must not hold a lock
// that fn of another caller's job needs.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace nmkit
