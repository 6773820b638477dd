// Output files: identity checks against the inputs, symlink resolution, temporaries that are
// reserved, locked, registered for signal cleanup, fsynced and renamed into place.
#include "nmkit/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <utility>

#include "io/cleanup_registry.h"
#include "io/mapped_file.h"
#include "io/text.h"

namespace nmkit {
namespace {

// ".tmp." + 6 random characters (io::create_registered).
constexpr size_t kTempSuffixBytes = 11;
constexpr size_t kNameMax = NAME_MAX;  // 255 on Linux file systems

std::string shown(std::string_view path) { return io::quote_name(path); }

// A path's identity for comparison: device+inode when it exists, else its canonical absolute path.
struct Identity {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string canonical;
};

Identity identity_of(const std::string& path) {
  Identity id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    return id;
  }
  std::error_code ec;
  auto canonical = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  id.canonical = ec ? path : canonical.string();
  return id;
}

bool same(const Identity& a, const Identity& b) {
  if (a.exists != b.exists) return false;
  if (a.exists) return a.dev == b.dev && a.ino == b.ino;
  return a.canonical == b.canonical;
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The temporary's name without its 6 random characters: "NAME.tmp.", with NAME cut so that the whole
// name stays within NAME_MAX (an output named with 245-255 bytes would otherwise be unwritable).
std::string temp_prefix(const std::string& target) {
  std::string base = base_of(target);
  if (base.size() + kTempSuffixBytes > kNameMax) base.resize(kNameMax - kTempSuffixBytes);
  const std::string folder = folder_of(target);
  const std::string dir = target.find('/') == std::string::npos ? std::string() : folder + (folder == "/" ? "" : "/");
  return dir + base + ".tmp.";
}

bool is_random_tail(std::string_view tail) {
  if (tail.size() != 6) return false;
  for (const char c : tail) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum) return false;
  }
  return true;
}

// Wall-clock time of the first output this process wrote: a temporary older than it and not locked
// by its writer belongs to a run that died.
const timespec& first_write_time() {
  static const timespec start = [] {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    return now;
  }();
  return start;
}

bool older(const timespec& a, const timespec& b) {
  return a.tv_sec < b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec < b.tv_nsec);
}

// Best effort: a stale temporary that cannot be removed is only disk space, never a wrong output.
void remove_stale_temporaries(const std::string& prefix) {
  const std::string folder = folder_of(prefix);
  const std::string stem = base_of(prefix);
  DIR* dir = ::opendir(folder.c_str());
  if (dir == nullptr) return;
  const timespec& start = first_write_time();
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name(entry->d_name);
    if (name.size() != stem.size() + 6 || name.substr(0, stem.size()) != stem ||
        !is_random_tail(name.substr(stem.size()))) {
      continue;
    }
    const std::string full = folder + "/" + std::string(name);
    const int fd = ::open(full.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st {};
    // Locked: its writer is alive. Newer than this run: perhaps a writer between creating and locking it.
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && older(st.st_mtim, start) &&
        ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      ::unlink(full.c_str());
    }
    ::close(fd);
  }
  ::closedir(dir);
}

// Permissions a plain creat() would give (0666 minus the umask); a temporary is created 0600. The
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

// Makes a rename durable; best effort, since the data is already safe and some file systems refuse
// fsync on folders.
void sync_parent_folder(const std::string& path) {
  const int fd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

Status check_distinct_files(const std::vector<FileRole>& outputs, const std::vector<FileRole>& inputs) {
  std::vector<Identity> input_ids;
  input_ids.reserve(inputs.size());
  for (const FileRole& input : inputs) input_ids.push_back(identity_of(input.path));
  std::vector<Identity> output_ids;
  for (size_t o = 0; o < outputs.size(); ++o) {
    const FileRole& output = outputs[o];
    const Identity id = identity_of(output.path);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (same(id, input_ids[i])) {
        return Error(output.label + " " + shown(output.path) + ": same file as the " + inputs[i].label + " " +
                     shown(inputs[i].path)).classified(ErrorCode::SameFile);
      }
    }
    for (size_t p = 0; p < output_ids.size(); ++p) {
      if (same(id, output_ids[p])) {
        return Error(output.label + " " + shown(output.path) + ": same file as " + outputs[p].label + " " +
                     shown(outputs[p].path)).classified(ErrorCode::SameFile);
      }
    }
    output_ids.push_back(id);
  }
  return ok_status();
}

Result<std::string> resolve_output_path(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) {
    return Error(path + ": a symbolic link whose target cannot be resolved (" + io::errno_text(errno) +
                 "); give the target itself");
  }
  std::string target(real);
  std::free(real);
  return target;
}

Result<PendingFile> PendingFile::create(const std::string& path, uint64_t size) {
  auto target = resolve_output_path(path);
  if (!target.ok()) return target.error();
  struct stat st {};
  if (::stat(target->c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Error(path + ": is a folder").classified(ErrorCode::Io);
  const std::string prefix = temp_prefix(*target);
  remove_stale_temporaries(prefix);

  PendingFile file;
  file.path_ = path;
  file.target_ = std::move(*target);
  // As mkostemp (mode 0600 until fchmod below), with the name registered before the file exists.
  file.fd_ = io::create_registered(
      prefix, false, [](const char* name) { return ::open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600); },
      file.temp_, file.slot_);
  if (file.fd_ < 0) {
    const int err = errno;
    return Error(path + ": cannot create a temporary file next to it: " + io::errno_text(err)).classified(ErrorCode::Io);
  }
  // Held until the file is closed: tells a later run that this temporary is not stale.
  ::flock(file.fd_, LOCK_EX | LOCK_NB);
  if (::fchmod(file.fd_, default_file_mode()) != 0) return file.failure("cannot set permissions", errno);
  if (size > 0) {
    const int err = ::posix_fallocate(file.fd_, 0, static_cast<off_t>(size));
    if (err != 0) return file.failure("cannot allocate " + std::to_string(size) + " bytes", err);
    // MAP_POPULATE: every page is written, so map them all in one pass instead of one page fault
    // per 4 KiB inside the writer; but a populated mapping holds the whole file in the process's
    // resident set, so a file larger than kPopulateLimit is mapped page by page as it is written and
    // its writer releases each tensor's pages once filled (docs/design.md 11.7).
    const int populate = size <= io::kPopulateLimit ? MAP_POPULATE : 0;
    void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | populate, file.fd_, 0);
    if (map == MAP_FAILED) return file.failure("cannot map " + std::to_string(size) + " bytes", errno);
    file.data_ = static_cast<std::byte*>(map);
    file.size_ = size;
  }
  return file;
}

PendingFile::PendingFile(PendingFile&& other) noexcept
    : path_(std::move(other.path_)),
      target_(std::move(other.target_)),
      temp_(std::exchange(other.temp_, std::string())),
      fd_(std::exchange(other.fd_, -1)),
      slot_(std::exchange(other.slot_, -1)),
      finished_(other.finished_),
      committed_(other.committed_),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

PendingFile::~PendingFile() {
  unmap();
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty() && !committed_) ::unlink(temp_.c_str());
  io::unregister_temporary(slot_);
}

void PendingFile::unmap() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
}

Error PendingFile::failure(const std::string& what, int err) const {
  return Error(temp_ + ": " + what + ": " + io::errno_text(err)).classified(ErrorCode::Io);
}

Status PendingFile::append(std::string_view bytes) {
  NMKIT_ASSERT(fd_ >= 0 && !finished_);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error(path_ + ": write failed: " + io::errno_text(errno)).classified(ErrorCode::Io);
    }
    done += static_cast<size_t>(n);
  }
  return ok_status();
}

Status PendingFile::finish() {
  if (finished_) return ok_status();
  NMKIT_ASSERT(fd_ >= 0);
  unmap();  // dirty pages stay in the page cache and are written by fsync below
  if (::fsync(fd_) != 0) return failure("cannot sync", errno);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return failure("cannot close", errno);
  finished_ = true;
  return ok_status();
}

Status PendingFile::commit() {
  NMKIT_TRY(finish());
  NMKIT_ASSERT(!committed_);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    return Error(path_ + ": cannot rename " + temp_ + " onto it: " + io::errno_text(errno)).classified(ErrorCode::Io);
  }
  committed_ = true;
  io::unregister_temporary(std::exchange(slot_, -1));
  sync_parent_folder(target_);
  return ok_status();
}

Result<PendingFile> prepare_text_file(const std::string& path, std::string_view content) {
  auto file = PendingFile::create(path);
  if (!file.ok()) return file.error();
  NMKIT_TRY(file->append(content));
  NMKIT_TRY(file->finish());
  return std::move(*file);
}

}  // namespace nmkit
