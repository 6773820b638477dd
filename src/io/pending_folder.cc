// PendingFolder: an output folder built under a temporary name and moved into place whole
// (include/nmkit/files.h, docs/design.md section 10.12).
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "io/cleanup_registry.h"
#include "io/mapped_file.h"  // errno_text
#include "nmkit/files.h"

namespace nmkit {
namespace {

namespace fs = std::filesystem;

Status sync_folder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Error(dir + ": cannot open folder: " + io::errno_text(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return Error(dir + ": fsync failed: " + io::errno_text(err));
  return ok_status();
}

std::string parent_of(const std::string& target) {
  const std::string parent = fs::path(target).parent_path().string();
  return parent.empty() ? "." : parent;
}

// Temporary folders of `target` that no process holds locked and that are older than this write
// were left by a killed writer (a younger one may be another writer's, between mkdir and flock).
void remove_stale(const std::string& target) {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const std::string prefix = fs::path(target).filename().string() + ".tmp.";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent_of(target), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) continue;
    if (!entry.is_directory(ec)) continue;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0 || st.st_mtim.tv_sec + 2 > now.tv_sec) continue;  // 2 s: whole-second slack
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) fs::remove_all(entry.path(), ec);
    ::close(fd);
  }
}

}  // namespace

Result<PendingFolder> PendingFolder::create(const std::string& target) {
  remove_stale(target);
  // mkdir (mode 0777 less the umask, as any folder the user makes) rather than mkdtemp, whose 0700
  // the renamed folder would keep.
  PendingFolder folder;
  folder.target_ = target;
  if (io::create_registered(target + ".tmp.", true, [](const char* name) { return ::mkdir(name, 0777); },
                            folder.path_, folder.slot_) < 0) {
    return Error(target + ": cannot create a temporary folder beside it: " + io::errno_text(errno));
  }
  folder.fd_ = ::open(folder.path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder.fd_ < 0 || ::flock(folder.fd_, LOCK_EX | LOCK_NB) != 0) {
    return Error(folder.path_ + ": cannot lock the temporary folder: " + io::errno_text(errno));
  }
  return folder;
}

PendingFolder::PendingFolder(PendingFolder&& other) noexcept
    : target_(std::move(other.target_)),
      path_(std::exchange(other.path_, std::string())),
      fd_(std::exchange(other.fd_, -1)),
      slot_(std::exchange(other.slot_, -1)) {}

PendingFolder::~PendingFolder() {
  if (!path_.empty()) {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  io::unregister_temporary_folder(slot_);
  if (fd_ >= 0) ::close(fd_);
}

Status PendingFolder::commit(const std::function<Status(const std::string& target)>& may_replace) {
  NMKIT_TRY(sync_folder(path_));
  // Another writer may create or replace the target between any two of these calls: a rename that
  // finds a target asks may_replace and exchanges; an exchange that finds none renames again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target_.c_str(), RENAME_NOREPLACE) == 0) {
      path_.clear();
      return sync_folder(parent_of(target_));
    }
    if (errno != EEXIST) {
      return Error(target_ + ": cannot rename the finished folder into place: " + io::errno_text(errno));
    }
    NMKIT_TRY(may_replace(target_));
    if (::renameat2(AT_FDCWD, path_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) == 0) {
      // path_ now names the old folder, which the destructor removes (a signal before that removes
      // it too: the slot still holds path_).
      return sync_folder(parent_of(target_));
    }
    if (errno != ENOENT) return Error(target_ + ": cannot replace the folder: " + io::errno_text(errno));
  }
  return Error(target_ + ": cannot move the finished folder into place: other writers keep replacing it");
}

}  // namespace nmkit
