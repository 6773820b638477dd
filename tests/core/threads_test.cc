#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "nmkit/cpu.h"
#include "nmkit/threads.h"
#include "core/thread_costs.h"

namespace nmkit {
namespace {

TEST(Threads, ParallelForCoversEveryIndexOnceInWholeGrains) {
  for (int64_t n : {1, 2, 3, 7, 64, 1000, 4097}) {
    for (int64_t grain : {1, 4, 16, 5000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for(n, grain, [&](int64_t begin, int64_t end) {
        EXPECT_EQ(begin % grain, 0);
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
    }
  }
}

TEST(Threads, ManyBackToBackJobsAndNestedCalls) {
  std::atomic<int64_t> total{0};
  for (int job = 0; job < 2000; ++job) {
    parallel_for(8, 1, [&](int64_t b, int64_t e) {
      parallel_for(4, 1, [&](int64_t ib, int64_t ie) { total += (e - b) * (ie - ib); });
    });
  }
  EXPECT_EQ(total.load(), 2000 * 8 * 4);
  EXPECT_GE(thread_count(), 1);
}

// The header promises that any thread may call parallel_for, several at once: each caller's job
// runs completely, whichever pool (OpenMP team or std::thread pool) the build uses.
TEST(Threads, ConcurrentCallersEachRunTheirWholeJob) {
  constexpr int kCallers = 4, kJobs = 200;
  std::vector<std::atomic<int64_t>> sums(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int job = 0; job < kJobs; ++job) {
        parallel_for(1000 + c, 3, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) sums[static_cast<size_t>(c)] += i;
        });
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    const int64_t n = 1000 + c;
    EXPECT_EQ(sums[static_cast<size_t>(c)].load(), kJobs * (n * (n - 1) / 2)) << "caller " << c;
  }
}

TEST(Cpu, TiersAreConsistent) {
  const auto tiers = supported_tiers();
  ASSERT_FALSE(tiers.empty());
  EXPECT_EQ(tiers.front(), IsaTier::Scalar);
  EXPECT_EQ(tiers.back(), detected_tier());
  for (auto t : tiers) EXPECT_EQ(*tier_from_name(tier_name(t)), t);
  const auto bad = tier_from_name("sse9");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(bad.error().message(), "unknown ISA tier 'sse9' (expected scalar, avx2 or avx512)");
  auto active = active_tier();
  ASSERT_TRUE(active.ok()) << active.error().message();
}


// A job is split only when splitting saves more than starting the workers costs: never with one
// thread, always for a job far longer than the start, never for one far shorter.
TEST(Threads, GrainForSplitsOnlyJobsWorthStartingTheWorkers) {
  const double start = pool_start_seconds();
  ASSERT_GT(start, 0.0);
  EXPECT_EQ(grain_for(100, 3, 0.0), 100);
  EXPECT_FALSE(worth_splitting(0.0));
  if (thread_count() == 1) {
    EXPECT_FALSE(worth_splitting(1.0));
    EXPECT_EQ(grain_for(100, 3, 1.0), 100);
    return;
  }
  EXPECT_TRUE(worth_splitting(1.0));
  const double saved_share = 1.0 - 1.0 / thread_count();
  EXPECT_EQ(grain_for(100, 3, 1.0), 3);
  EXPECT_EQ(grain_for(100, 3, 2.0 * start / saved_share), 3);
  EXPECT_EQ(grain_for(100, 3, 0.5 * start / saved_share), 100);
}

// Workers that sleep between jobs (OMP_WAIT_POLICY=passive, the ctest run threads_sleeping_workers)
// cost tens of microseconds to start; spinning ones about one.
TEST(Threads, PoolStartFollowsTheWaitPolicy) {
#if NMKIT_OPENMP_POOL
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const bool sleeping = policy != nullptr && (std::string(policy) == "passive" || std::string(policy) == "PASSIVE");
#else
  const bool sleeping = false;  // the std::thread pool spins whatever OpenMP is told
#endif
  if (sleeping) {
    EXPECT_GE(pool_start_seconds(), 10e-6);
  } else {
    EXPECT_LE(pool_start_seconds(), 5e-6);
  }
}

}  // namespace
}  // namespace nmkit
