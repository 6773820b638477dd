// Issue 13 R2: pruning kept 48 bytes of row sums per row for the whole tensor, so a [50M, 1] f16
// weight (100 MB in a file) peaked at 2.5 GB. The sums now live for one window of rows at a time.
// Peak memory is measured in a child process (this test binary re-run on one test), whose maximum
// resident set the parent reads from wait4.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "nmkit/prune.h"

extern char** environ;

namespace nmkit {
namespace {

constexpr int64_t kRows = 10'000'000;  // K = 1: 20 MB in, 20 MB out; 480 MB of sums before the fix

TEST(PruneMemory, TallThinWeightChild) {
  if (std::getenv("NMKIT_PRUNE_MEMORY_CHILD") == nullptr) GTEST_SKIP() << "run by TallThinWeightStaysSmall";
  Tensor w = Tensor::zeros(DType::F16, {kRows, 1});
  auto r = prune(w.view(), Pattern{2, 4}, PruneMethod::Magnitude, {}, "tall");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->sums.total_count, kRows);
}

TEST(PruneMemory, TallThinWeightStaysSmall) {
  std::string self(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  ASSERT_GT(n, 0);
  self.resize(static_cast<size_t>(n));
  std::string filter = "--gtest_filter=PruneMemory.TallThinWeightChild";
  std::vector<char*> argv{self.data(), filter.data(), nullptr};
  std::vector<std::string> env_storage{"NMKIT_PRUNE_MEMORY_CHILD=1"};
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv.data(), envp.data()), 0);
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(pid, &status, 0, &usage), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  // ru_maxrss is in KiB. Input and output take 40 MB; the bound leaves room for the test binary
  // and a sanitizer runtime's shadow memory, and is far below the 480 MB of per-row sums.
  const long peak_mib = usage.ru_maxrss / 1024;
  std::printf("peak resident set of the child: %ld MiB\n", peak_mib);
  EXPECT_LT(peak_mib, 300) << "pruning [" << kRows << ", 1] f16 peaked at " << peak_mib << " MiB";
}

}  // namespace
}  // namespace nmkit
