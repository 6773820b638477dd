#include "io/mapped_file.h"

#include "io/cleanup_registry.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

namespace nmkit::io {

std::string errno_text(int err) {
  char buffer[256];
  // GNU strerror_r returns the message pointer, which may or may not be `buffer`.
  const char* text = strerror_r(err, buffer, sizeof(buffer));
  return text;
}

Result<MappedFile> MappedFile::open_read(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return Error(err == ENOENT ? ErrorCode::NotFound : ErrorCode::Io, "cannot open: " + errno_text(err)).with_file(path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Error(ErrorCode::Io, "cannot stat: " + errno_text(err)).with_file(path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(ErrorCode::Io, "not a regular file").with_file(path);
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return MappedFile();
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps its own reference to the file
  if (map == MAP_FAILED) {
    return Error(ErrorCode::Io, "cannot map " + std::to_string(size) + " bytes: " + errno_text(err)).with_file(path);
  }
  return MappedFile(static_cast<const std::byte*>(map), size, io::register_mapping(map, size, path.c_str()));
}

void release_pages(const void* data, size_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + page - 1) / page * page, last = (begin + bytes) / page * page;
  // Only whole pages: the neighbours' bytes on a shared page stay mapped. Advice, so a failure
  // (never expected on a valid mapping) changes nothing but memory use.
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      slot_(std::exchange(other.slot_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  io::unregister_mapping(std::exchange(slot_, -1));
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace nmkit::io
