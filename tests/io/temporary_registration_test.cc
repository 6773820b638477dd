// A temporary is registered for removal on a fatal signal before it exists (io::create_registered):
// a signal at the first instant it exists still removes it. model_cli_paths item 6 once found a
// temporary folder left by a SIGINT under load, when the registration came after the mkdir.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "io/cleanup_registry.h"
#include "nmkit/files.h"
#include "tests/io/io_test_util.h"

namespace nmkit {
namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

bool random_tail(const std::string& path, const std::string& prefix) {
  if (path.size() != prefix.size() + 6 || path.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < path.size(); ++i) {
    const char c = path[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
  }
  return true;
}

TEST(TemporaryRegistration, ASignalAtTheFirstInstantAFileExistsRemovesIt) {
  test::TempDir dir;
  const std::string prefix = dir.file("out.gguf.tmp.");
  std::string path, made;
  int slot = -1;
  const int fd = io::create_registered(prefix, false, [&](const char* name) {
    const int created = ::open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    made = name;
    EXPECT_TRUE(exists(made));
    remove_temporaries();  // what the signal handler does, right after the file appears
    return created;
  }, path, slot);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(path, made);
  EXPECT_TRUE(random_tail(path, prefix)) << path;
  EXPECT_GE(slot, 0);
  EXPECT_FALSE(exists(path)) << "created before it was registered";
  ::close(fd);
  io::unregister_temporary(slot);
}

TEST(TemporaryRegistration, ASignalAtTheFirstInstantAFolderExistsRemovesIt) {
  test::TempDir dir;
  const std::string prefix = dir.file("model.tmp.");
  std::string path;
  int slot = -1;
  const int rc = io::create_registered(prefix, true, [&](const char* name) {
    const int created = ::mkdir(name, 0777);
    EXPECT_TRUE(exists(name));
    remove_temporaries();
    return created;
  }, path, slot);
  ASSERT_EQ(rc, 0);
  EXPECT_TRUE(random_tail(path, prefix)) << path;
  EXPECT_FALSE(exists(path)) << "created before it was registered";
  io::unregister_temporary_folder(slot);
}

TEST(TemporaryRegistration, ATakenNameTriesAnotherAndOtherErrorsRegisterNothing) {
  test::TempDir dir;
  const std::string prefix = dir.file("x.tmp.");
  std::vector<std::string> tried;
  std::string path;
  int slot = -1;
  const int fd = io::create_registered(prefix, false, [&](const char* name) {
    tried.push_back(name);
    if (tried.size() < 3) {
      errno = EEXIST;
      return -1;
    }
    return ::open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }, path, slot);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(tried.size(), 3u);
  EXPECT_EQ(path, tried.back());
  EXPECT_NE(tried[0], tried[1]);
  ::close(fd);
  io::unregister_temporary(slot);
  ::unlink(path.c_str());

  // A failure other than EEXIST stops at once with its errno, and leaves the name unregistered: a
  // file made under that name afterwards survives the handler.
  tried.clear();
  std::string none;
  int none_slot = -1;
  const int failed = io::create_registered(prefix, false, [&](const char* name) {
    tried.push_back(name);
    errno = EACCES;
    return -1;
  }, none, none_slot);
  EXPECT_EQ(failed, -1);
  EXPECT_EQ(errno, EACCES);
  ASSERT_EQ(tried.size(), 1u);
  EXPECT_TRUE(none.empty());
  const int later = ::open(tried[0].c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(later, 0);
  ::close(later);
  remove_temporaries();
  EXPECT_TRUE(exists(tried[0]));
}

}  // namespace
}  // namespace nmkit
