// The thread pool behind parallel_for. Two implementations, one chosen at build time:
// - NMKIT_OPENMP_POOL (the default): OpenMP's team, the same threads oneDNN (Debian's libdnnl is
//   built on OpenMP) runs its GEMMs on. Two pools on one machine fight: after a oneDNN call its
//   workers spin for the next region while nmkit's workers start the attention, so three runnable
//   threads share two cores. One team removed that (SmolLM2 prefill of 512 tokens, one run each on
//   a quiet 2-core machine: f32 422 -> 527 tokens/s, int8 570 -> 958 tokens/s).
// - otherwise a persistent std::thread pool (kept for ThreadSanitizer builds: libgomp is not
//   instrumented, so TSan cannot see its barriers): workers start once and sleep between jobs,
//   spinning briefly first so back-to-back kernel calls (decode: a layer every few hundred
//   microseconds) do not pay a futex wake-up each time.
#include "nmkit/threads.h"
#include "core/thread_costs.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <immintrin.h>

#if NMKIT_OPENMP_POOL
#include <omp.h>
#endif

namespace nmkit {
namespace {

thread_local bool t_inside_parallel = false;

int configured_threads() {
  if (const char* env = std::getenv("NMKIT_THREADS"); env != nullptr && *env != '\0') {
    const int n = std::atoi(env);
    if (n >= 1) return std::min(n, 1024);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// How one parallel_for call cuts [0, n): `grains` grains of `grain` items in `chunks` chunks, chunk
// c covering grains [c*grains/chunks, (c+1)*grains/chunks). Both pools run exactly these chunks.
struct Split {
  int64_t n, grain, grains, chunks;
  std::pair<int64_t, int64_t> range(int64_t c) const {
    return {std::min(n, c * grains / chunks * grain), std::min(n, (c + 1) * grains / chunks * grain)};
  }
};

#if NMKIT_OPENMP_POOL
class Pool {
 public:
  explicit Pool(int threads) : threads_(threads) {}
  int threads() const { return threads_; }

  void run(const Split& split, const std::function<void(int64_t, int64_t)>& fn) {
    // One chunk per team member; a team smaller than asked (OMP_THREAD_LIMIT, nested teams) takes
    // the remaining chunks in turn, so every chunk runs exactly once.
#pragma omp parallel num_threads(static_cast<int>(split.chunks))
    {
      t_inside_parallel = true;
      const int64_t team = omp_get_num_threads();
      for (int64_t c = omp_get_thread_num(); c < split.chunks; c += team) {
        const auto [begin, end] = split.range(c);
        if (begin < end) fn(begin, end);
      }
      t_inside_parallel = false;
    }
  }

 private:
  const int threads_;
};
#else
// One parallel_for call. It lives on the caller's stack; the caller returns only when no worker
// still holds it (active == 0), so a late-waking worker can never touch a finished job.
struct Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  Split split{};
  std::atomic<int64_t> next_chunk{0};
  std::atomic<int64_t> pending{0};
  std::atomic<int> active{0};

  // Takes chunks until none is left.
  void work() {
    t_inside_parallel = true;
    for (;;) {
      const int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (c >= split.chunks) break;
      const auto [begin, end] = split.range(c);
      if (begin < end) (*fn)(begin, end);
      pending.fetch_sub(1, std::memory_order_acq_rel);
    }
    t_inside_parallel = false;
  }
};

class Pool {
 public:
  explicit Pool(int threads) : threads_(threads) {
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  ~Pool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
  }

  int threads() const { return threads_; }

  void run(const Split& split, const std::function<void(int64_t, int64_t)>& fn) {
    std::lock_guard submit(submit_mutex_);  // one job at a time; callers from other threads queue
    Job job;
    job.fn = &fn;
    job.split = split;
    job.pending.store(split.chunks, std::memory_order_relaxed);
    {
      std::lock_guard lock(mutex_);
      job_ = &job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    job.work();
    while (job.pending.load(std::memory_order_acquire) != 0) _mm_pause();
    {
      std::lock_guard lock(mutex_);
      job_ = nullptr;
    }
    while (job.active.load(std::memory_order_acquire) != 0) _mm_pause();
  }

 private:
  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      // Spin ~50 us for the next job before sleeping on the condition variable.
      for (int spin = 0; spin < 20000 && generation_.load(std::memory_order_acquire) == seen; ++spin) {
        _mm_pause();
      }
      Job* job = nullptr;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        seen = generation_.load(std::memory_order_acquire);
        if (stopping_) return;
        job = job_;
        if (job != nullptr) job->active.fetch_add(1, std::memory_order_acq_rel);
      }
      if (job != nullptr) {
        job->work();
        job->active.fetch_sub(1, std::memory_order_acq_rel);
      }
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  bool stopping_ = false;
  Job* job_ = nullptr;
};
#endif  // NMKIT_OPENMP_POOL

Pool& pool() {
  static Pool instance(configured_threads());
  return instance;
}

}  // namespace

// libgomp reads these two variables once, at start-up; so does this (once: the plan asks on every
// linear call). The std::thread pool always spins ~50 us first.
bool workers_sleep() {
#if NMKIT_OPENMP_POOL
  static const bool sleep = [] {
    auto equals = [](const char* value, const char* expected) {
      if (value == nullptr) return false;
      for (; *value != '\0' && *expected != '\0'; ++value, ++expected) {
        if (std::tolower(static_cast<unsigned char>(*value)) != *expected) return false;
      }
      return *value == '\0' && *expected == '\0';
    };
    return equals(std::getenv("OMP_WAIT_POLICY"), "passive") || equals(std::getenv("GOMP_SPINCOUNT"), "0");
  }();
  return sleep;
#else
  return false;
#endif
}

int thread_count() { return pool().threads(); }

// Measured with `nmkit bench linear --rows 192 --k 576 --m 1 --no-baselines` (quiet, dense f32, one
// token: 442 KB of weights): sleeping workers 58 us a call on 2 threads against 12 us on 1, so ~50 us
// to start them; spinning workers (OMP_WAIT_POLICY=active) 8 us on 2 threads against 15 us on 1.
double pool_start_seconds() {
  static const double seconds = workers_sleep() ? 50e-6 : 1e-6;
  return seconds;
}

bool worth_splitting(double seconds) {
  const int threads = thread_count();
  const double saved = seconds * (1.0 - 1.0 / threads);  // perfect split, at best; 0 with one thread
  return threads > 1 && saved > pool_start_seconds();
}

int64_t grain_for(int64_t n, int64_t grain, double seconds) {
  return worth_splitting(seconds) ? grain : std::max<int64_t>(n, 1);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t grains = (n + grain - 1) / grain;
  const Split split{n, grain, grains, std::min<int64_t>(pool().threads(), grains)};
  if (split.chunks <= 1 || t_inside_parallel) {  // nested calls run serially on the caller
    fn(0, n);
    return;
  }
  pool().run(split, fn);
}

}  // namespace nmkit
