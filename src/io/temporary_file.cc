#include "io/temporary_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <utility>

#include "io/mapped_file.h"

namespace nmkit::io {
namespace {

// Permissions a plain creat() would give (0666 minus the umask); mkstemp makes files 0600. The
// umask is read from /proc because umask() can only be read by changing it, which races threads.
mode_t default_file_mode() {
  mode_t mask = 022;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Umask:", 0) == 0) {
      mask = static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
      break;
    }
  }
  return 0666 & ~mask;
}


// Makes the rename itself durable; best effort, since the data is already safe and some file
// systems refuse fsync on folders.
void sync_folder(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

TemporaryFile::~TemporaryFile() {
  unmap();
  if (fd_ >= 0) ::close(fd_);
  if (created_ && !committed_) ::unlink(name_.c_str());
}

Status TemporaryFile::create(uint64_t size) {
  fd_ = ::mkostemp(name_.data(), O_CLOEXEC);
  if (fd_ < 0) return Error(name_ + ": cannot create temporary file: " + errno_text(errno));
  created_ = true;
  if (::fchmod(fd_, default_file_mode()) != 0) return failure("cannot set permissions");
  // Reserve the blocks now: a full disk is then an error here instead of a SIGBUS while a fill
  // writes into the mapping.
  const int err = ::posix_fallocate(fd_, 0, static_cast<off_t>(size));
  if (err != 0) {
    return Error(name_ + ": cannot allocate " + std::to_string(size) + " bytes: " + errno_text(err));
  }
  if (size == 0) return ok_status();  // nothing to map (mmap refuses length 0)
  // MAP_POPULATE: every page is written, so map them all in one pass instead of one page fault
  // per 4 KiB inside the fills.
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, 0);
  if (map == MAP_FAILED) return failure("cannot map " + std::to_string(size) + " bytes");
  data_ = static_cast<std::byte*>(map);
  size_ = size;
  return ok_status();
}

Status TemporaryFile::commit(const std::string& path) {
  unmap();  // dirty pages stay in the page cache and are written by fsync below
  if (::fsync(fd_) != 0) return failure("cannot sync");
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return failure("cannot close");
  if (::rename(name_.c_str(), path.c_str()) != 0) {
    return Error(path + ": cannot rename " + name_ + " onto it: " + errno_text(errno));
  }
  committed_ = true;
  sync_folder(path);
  return ok_status();
}

Status TemporaryFile::failure(const std::string& what) const {
  return Error(name_ + ": " + what + ": " + errno_text(errno));
}

void TemporaryFile::unmap() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
}

}  // namespace nmkit::io
