// A persistent pool: workers are started once and sleep between jobs, spinning briefly first so
// that back-to-back kernel calls (decode: a layer every few hundred microseconds) do not pay a
// futex wake-up each time.
#include "nmkit/threads.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <immintrin.h>

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

// One parallel_for call. It lives on the caller's stack; the caller returns only when no worker
// still holds it (active == 0), so a late-waking worker can never touch a finished job.
struct Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, grain = 1, grains = 0, chunks = 0;
  std::atomic<int64_t> next_chunk{0};
  std::atomic<int64_t> pending{0};
  std::atomic<int> active{0};

  // Takes chunks until none is left. Chunk c covers grains [c*grains/chunks, (c+1)*grains/chunks).
  void work() {
    t_inside_parallel = true;
    for (;;) {
      const int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) break;
      const int64_t begin = std::min(n, c * grains / chunks * grain);
      const int64_t end = std::min(n, (c + 1) * grains / chunks * grain);
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

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    const int64_t grains = (n + grain - 1) / grain;
    const int64_t chunks = std::min<int64_t>(threads_, grains);
    if (chunks <= 1 || t_inside_parallel) {
      fn(0, n);
      return;
    }
    std::lock_guard submit(submit_mutex_);  // one job at a time; callers from other threads queue
    Job job;
    job.fn = &fn;
    job.n = n;
    job.grain = grain;
    job.grains = grains;
    job.chunks = chunks;
    job.pending.store(chunks, std::memory_order_relaxed);
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

Pool& pool() {
  static Pool instance(configured_threads());
  return instance;
}

}  // namespace

int thread_count() { return pool().threads(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  pool().run(n, std::max<int64_t>(grain, 1), fn);
}

}  // namespace nmkit
