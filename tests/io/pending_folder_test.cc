// PendingFolder (include/nmkit/files.h): a folder output appears whole or not at all, and writers
// racing for one new folder all succeed, the last to commit winning (issue 24, item 6: two
// concurrent `prune -o DIR/` to a new DIR failed one of them with "Directory not empty").
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "nmkit/files.h"
#include "tests/io/io_test_util.h"

namespace nmkit {
namespace {

Status write_marker(const PendingFolder& folder, const std::string& text) {
  auto file = prepare_text_file(folder.path() + "/marker.txt", text);
  if (!file.ok()) return file.error();
  return file->commit();
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Status anything_goes(const std::string&) { return ok_status(); }

TEST(PendingFolder, RacingWritersOfANewFolderBothSucceedAndTheLastWins) {
  test::TempDir dir;
  const std::string target = dir.file("model");
  {
    // Both start while the target is absent, as two processes would.
    auto first = PendingFolder::create(target);
    auto second = PendingFolder::create(target);
    ASSERT_TRUE(first.ok() && second.ok());
    ASSERT_TRUE(write_marker(*first, "first").ok());
    ASSERT_TRUE(write_marker(*second, "second").ok());
    ASSERT_TRUE(first->commit(anything_goes).ok());
    EXPECT_EQ(read_text(target + "/marker.txt"), "first");
    const Status st = second->commit(anything_goes);
    ASSERT_TRUE(st.ok()) << st.error().message();
    EXPECT_EQ(read_text(target + "/marker.txt"), "second");
  }
  // The replaced folder went with the object that swapped it out.
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model"});
}

TEST(PendingFolder, AFolderThatAppearedMeanwhileIsReplacedOnlyIfAllowed) {
  test::TempDir dir;
  const std::string target = dir.file("model");
  {
    auto folder = PendingFolder::create(target);
    ASSERT_TRUE(folder.ok());
    ASSERT_TRUE(write_marker(*folder, "new").ok());
    ASSERT_EQ(::mkdir(target.c_str(), 0777), 0);
    { std::ofstream(target + "/precious.txt") << "keep"; }
    const Status st =
        folder->commit([](const std::string& t) -> Status { return Error(t + ": holds other files"); });
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message().find("holds other files"), std::string::npos);
    EXPECT_EQ(read_text(target + "/precious.txt"), "keep");
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model"});  // the temporary folder is gone
}

TEST(PendingFolder, DroppedWithoutCommitLeavesNothing) {
  test::TempDir dir;
  {
    auto folder = PendingFolder::create(dir.file("model"));
    ASSERT_TRUE(folder.ok());
    ASSERT_TRUE(write_marker(*folder, "x").ok());
  }
  EXPECT_TRUE(dir.entries().empty());
}

}  // namespace
}  // namespace nmkit
