// Issue 13, data loss (D1-D3, M1, R3-R5) and temporaries (M2): an output never replaces an input
// (compared by device and inode, so "./in", absolute paths, hard and symbolic links all count), a
// report is checked like an output, everything is written before the first rename, a symlinked
// output is written through to its target, and stale temporaries of a dead run are removed.
#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/cli_harness.h"

namespace nmkit::cli_test {
namespace {

constexpr const char* kWeight = "layers.0.q.weight";

std::vector<float> values(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
  return v;
}

class OutputSafety : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    write_file("in.safetensors", safetensors_bytes({{kWeight, "F32", {3, 8}, f32_bytes(values(24))},
                                                    {"layers.0.norm.weight", "F32", {8}, f32_bytes(values(8))}}));
    write_file("x.safetensors", safetensors_bytes({{"x", "F32", {2, 8}, f32_bytes(values(16))}}));
    write_file("act.safetensors", safetensors_bytes({{"act", "F32", {2, 8}, f32_bytes(values(16))}}));
  }
};

// D1: the report may not be the input, nor the new checkpoint.
TEST_F(OutputSafety, ReportOntoTheInputIsRefused) {
  expect_clean_failure({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "2:4", "--report",
                        "in.safetensors"},
                       {"--report", "in.safetensors", "same file"});
}

TEST_F(OutputSafety, ReportOntoTheOutputIsRefused) {
  expect_clean_failure({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "2:4", "--report",
                        "out.safetensors"},
                       {"--report", "out.safetensors", "same file"});
  // Also when the output already exists (it is then compared by inode, not only by path).
  write_file("out.safetensors", read_file("x.safetensors"));
  expect_clean_failure({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "2:4", "--report",
                        "./out.safetensors"},
                       {"--report", "same file"});
}

// D2: linear's -o may be neither the weights nor the activations.
TEST_F(OutputSafety, LinearOutputOntoAnInputIsRefused) {
  expect_clean_failure({"linear", "in.safetensors", "x.safetensors", "--weight", kWeight, "-o", "in.safetensors"},
                       {"-o", "in.safetensors", "same file"});
  expect_clean_failure({"linear", "in.safetensors", "x.safetensors", "--weight", kWeight, "-o", "x.safetensors"},
                       {"-o", "x.safetensors", "same file"});
}

// D3: the same file under another spelling, for every command that writes.
TEST_F(OutputSafety, SameFileUnderAnotherPathIsRefused) {
  const std::string absolute = path("in.safetensors");
  std::filesystem::create_hard_link(path("in.safetensors"), path("hard.safetensors"));
  std::filesystem::create_symlink("in.safetensors", path("soft.safetensors"));
  for (const std::string& out : {std::string("./in.safetensors"), absolute, std::string("hard.safetensors"),
                                 std::string("soft.safetensors")}) {
    SCOPED_TRACE(out);
    expect_clean_failure({"prune", "in.safetensors", "-o", out, "--pattern", "2:4"}, {"same file"});
    expect_clean_failure({"slide", "in.safetensors", "-o", out, "--pattern", "6:8"}, {"same file"});
    expect_clean_failure({"quantize", "in.safetensors", "-o", out, "--dtype", "int8"}, {"same file"});
    expect_clean_failure({"linear", "in.safetensors", "x.safetensors", "--weight", kWeight, "-o", out},
                         {"same file"});
  }
  // Gradient and norm files are inputs too.
  write_file("g.safetensors", safetensors_bytes({{kWeight, "F32", {3, 8}, f32_bytes(values(24))}}));
  expect_clean_failure({"prune", "in.safetensors", "-o", "./g.safetensors", "--pattern", "2:4", "--method",
                        "gradient", "--grad", "g.safetensors"},
                       {"same file", "g.safetensors"});
}

// R5: -o naming a symlink writes through to the link's target; the link stays a link.
TEST_F(OutputSafety, SymlinkedOutputIsWrittenThroughToItsTarget) {
  std::filesystem::create_directory(path("store"));
  write_file("store/old.safetensors", "old");
  std::filesystem::create_symlink("store/old.safetensors", path("link.safetensors"));
  const RunResult r = run({"prune", "in.safetensors", "-o", "link.safetensors", "--pattern", "2:4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_symlink(path("link.safetensors")));
  EXPECT_NE(read_file("store/old.safetensors"), "old");
  EXPECT_EQ(read_file("store/old.safetensors").substr(8, 1), "{");
  // No temporary left in either folder.
  EXPECT_EQ(listing().size(), 5u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(path("store")), {}), 1);
}

// R3: an output whose name is 250 bytes long (the temporary's suffix used to push it past NAME_MAX).
TEST_F(OutputSafety, LongOutputNamesWork) {
  const std::string name = std::string(238, 'o') + ".safetensors";
  ASSERT_EQ(name.size(), 250u);
  const RunResult r = run({"prune", "in.safetensors", "-o", name, "--pattern", "2:4", "--report",
                           std::string(250, 'r')});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(exists(name));
  EXPECT_TRUE(exists(std::string(250, 'r')));
  EXPECT_EQ(listing().size(), 5u);
}

// M1: a report that cannot be written leaves the checkpoint untouched too (nothing renamed).
TEST_F(OutputSafety, UnwritableReportLeavesNoCheckpoint) {
  std::filesystem::create_directory(path("report_dir"));
  // The report names a folder: its temporary can be created next to it but the rename fails.
  expect_clean_failure({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "2:4", "--report",
                        "report_dir"},
                       {"report_dir"});
  EXPECT_FALSE(exists("out.safetensors"));
}

// M2: a temporary left by a killed run (nobody holds its lock) is removed by the next run for the same
// output; one still being written (its lock held) is left alone; other files are never touched.
TEST_F(OutputSafety, StaleTemporariesOfTheSameOutputAreRemoved) {
  write_file("out.safetensors.tmp.AbC123", "stale");
  write_file("out.safetensors.tmp.LOCKED", "in use");
  write_file("other.safetensors.tmp.AbC123", "another output's");
  write_file("out.safetensors.tmp.toolong1", "not a temporary name");
  const int fd = ::open(path("out.safetensors.tmp.LOCKED").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const RunResult r = run({"prune", "in.safetensors", "-o", "out.safetensors", "--pattern", "2:4"});
  ::close(fd);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(exists("out.safetensors.tmp.AbC123"));
  EXPECT_TRUE(exists("out.safetensors.tmp.LOCKED"));
  EXPECT_TRUE(exists("other.safetensors.tmp.AbC123"));
  EXPECT_TRUE(exists("out.safetensors.tmp.toolong1"));
}

}  // namespace
}  // namespace nmkit::cli_test
