// write_safetensors is atomic: whatever fails, no temporary is left behind and an existing
// destination keeps its bytes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "nmkit/safetensors.h"
#include "tests/io/io_test_util.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

OutputTensor constant(const std::string& name, Shape shape, uint8_t byte) {
  OutputTensor t;
  t.name = name;
  t.dtype = DType::U8;
  t.shape = std::move(shape);
  // Computed without shape_numel, so that the deliberately invalid shapes below cannot overflow here.
  size_t n = 1;
  for (const int64_t d : t.shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<size_t>(d), &n)) n = 0;
  }
  t.fill = [n, byte](std::byte* dst) {
    std::memset(dst, byte, n);
    return ok_status();
  };
  return t;
}

OutputTensor failing(const std::string& name) {
  OutputTensor t = constant(name, {16}, 0);
  t.fill = [name](std::byte* dst) -> Status {
    std::memset(dst, 0xAB, 8);  // a partial write before failing
    return Error("fill of '" + name + "' failed on purpose");
  };
  return t;
}

class AtomicWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    // A previous good file at the destination.
    ASSERT_TRUE(write_safetensors(path(), {constant("old", {5}, 7)}, {{"v", "1"}}).ok());
    before_ = test::read_bytes(path());
    ASSERT_FALSE(before_.empty());
  }
  // The destination is unchanged and is the only entry in the folder.
  void expect_untouched() {
    EXPECT_EQ(dir_.entries(), std::vector<std::string>{"out.safetensors"});
    EXPECT_EQ(test::read_bytes(path()), before_);
  }
  std::string path() const { return dir_.file("out.safetensors"); }

  test::TempDir dir_;
  std::vector<uint8_t> before_;
};

TEST_F(AtomicWrite, FailingFillLeavesNoFileInAnEmptyFolder) {
  test::TempDir empty;
  const std::string target = empty.file("new.safetensors");
  const Status status = write_safetensors(target, {constant("a", {100}, 1), failing("b"), constant("c", {3}, 2)});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().message(), "fill of 'b' failed on purpose");
  EXPECT_TRUE(empty.entries().empty());
}

TEST_F(AtomicWrite, FailingFillKeepsExistingDestination) {
  const Status status = write_safetensors(path(), {constant("a", {100}, 1), failing("b")});
  ASSERT_FALSE(status.ok());
  expect_untouched();
}

TEST_F(AtomicWrite, ThrowingCallbacksBecomeErrors) {
  OutputTensor thrower = constant("t", {4}, 1);
  thrower.fill = [](std::byte*) -> Status { throw std::runtime_error("boom"); };
  Status status = write_safetensors(path(), {thrower});
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().message(), path() + ": tensor 't': boom");
  expect_untouched();

  WriteOptions options;
  options.on_tensor = [](size_t, size_t, const OutputTensor&) { throw 42; };
  status = write_safetensors(path(), {constant("a", {4}, 1)}, {}, options);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("tensor 'a'"), std::string::npos);
  expect_untouched();
}

TEST_F(AtomicWrite, InvalidTensorListsAreRefusedBeforeWriting) {
  struct Bad {
    std::vector<OutputTensor> tensors;
    std::string expected;
  };
  OutputTensor no_fill = constant("nofill", {2}, 1);
  no_fill.fill = nullptr;
  const std::vector<Bad> cases = {
      {{constant("a", {2}, 1), constant("a", {3}, 2)}, path() + ": tensor 'a': listed twice"},
      {{constant("neg", {2, -3}, 1)}, path() + ": tensor 'neg': shape [2, -3] has a negative entry -3"},
      {{constant("huge", {int64_t{1} << 40, int64_t{1} << 40}, 1)}, path() + ": tensor 'huge': shape [1099511627776, 1099511627776] overflows"},
      {{constant("__metadata__", {1}, 1)}, path() + ": tensor '__metadata__': the name is reserved"},
      {{constant(std::string(4097, 'n'), {1}, 1)}, path() + ": tensor 'nnn"},  // over the readers' name limit
      {{no_fill}, path() + ": tensor 'nofill': no fill function"},
      {{constant("bad\xFFutf8", {1}, 1)}, path() + ": tensor names and metadata must be valid UTF-8"},
  };
  for (const Bad& bad : cases) {
    const Status status = write_safetensors(path(), bad.tensors);
    ASSERT_FALSE(status.ok()) << bad.expected;
    EXPECT_EQ(status.error().message().rfind(bad.expected, 0), 0u) << status.error().message();
    EXPECT_EQ(status.error().message().find('\n'), std::string::npos);
    expect_untouched();
  }
}

TEST_F(AtomicWrite, MissingFolderIsAnError) {
  const std::string target = dir_.file("no/such/folder/x.safetensors");
  const Status status = write_safetensors(target, {constant("a", {1}, 1)});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find(target), std::string::npos) << status.error().message();
  expect_untouched();
}

TEST_F(AtomicWrite, DestinationThatIsAFolderIsAnError) {
  test::TempDir other;
  const Status status = write_safetensors(other.path(), {constant("a", {1}, 1)});
  ASSERT_FALSE(status.ok());
  // Refused before any temporary is made (a rename onto a folder would fail only after all the work).
  EXPECT_NE(status.error().message().find("is a folder"), std::string::npos) << status.error().message();
  // No temporary next to the folder (in its parent); it must be gone.
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(other.path()).parent_path())) {
    EXPECT_EQ(e.path().string().find(other.path() + ".tmp."), std::string::npos) << e.path();
  }
}

// A file size limit makes the space reservation fail as a full disk would (EFBIG instead of ENOSPC):
// the error must come back as a Status, and nothing may be left behind.
TEST_F(AtomicWrite, NoSpaceIsAnErrorNotACrash) {
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = signal(SIGXFSZ, SIG_IGN);  // exceeding the limit raises SIGXFSZ otherwise
  struct rlimit small = old;
  small.rlim_cur = 1 << 16;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status status = write_safetensors(path(), {constant("big", {1 << 20}, 3)});
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("cannot allocate"), std::string::npos) << status.error().message();
  expect_untouched();
}

TEST_F(AtomicWrite, SuccessReplacesDestinationAndReportsProgress) {
  std::vector<std::string> seen;
  std::vector<size_t> counts;
  std::vector<OutputTensor> tensors = {constant("x", {3}, 1), constant("y", {0}, 2), constant("z", {2, 2}, 3)};
  // Each fill checks that on_tensor announced it first.
  for (OutputTensor& t : tensors) {
    auto inner = t.fill;
    t.fill = [inner, name = t.name, &seen](std::byte* dst) {
      EXPECT_FALSE(seen.empty());
      if (!seen.empty()) {
        EXPECT_EQ(seen.back(), name);
      }
      return inner(dst);
    };
  }
  WriteOptions options;
  options.on_tensor = [&](size_t i, size_t n, const OutputTensor& t) {
    EXPECT_EQ(i, seen.size());
    seen.push_back(t.name);
    counts.push_back(n);
  };
  ASSERT_TRUE(write_safetensors(path(), tensors, {}, options).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(counts, (std::vector<size_t>{3, 3, 3}));
  EXPECT_EQ(dir_.entries(), std::vector<std::string>{"out.safetensors"});
  auto file = SafetensorsFile::open(path());
  ASSERT_TRUE(file.ok()) << file.error().message();
  ASSERT_EQ(file->tensors().size(), 3u);
  EXPECT_EQ(static_cast<uint8_t>(file->view("z")->data[3]), 3);

  // Permissions as a plain creat() would give, not mkstemp's 0600.
  const mode_t mask = umask(0);
  umask(mask);
  struct stat st {};
  ASSERT_EQ(stat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666 & ~mask);
}

}  // namespace
}  // namespace nmkit
