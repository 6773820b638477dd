// Read-only memory mapping of a whole file (MAP_PRIVATE, PROT_READ), owned RAII-style.
#pragma once

#include <cstddef>
#include <string>

#include "nmkit/status.h"

namespace nmkit::io {

class MappedFile {
 public:
  // An Error "PATH: <reason>" when the file cannot be opened, is not a regular file, or is empty
  // (an empty file cannot be mapped; callers reject it by size before needing the bytes).
  static Result<MappedFile> open_read(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(const std::byte* data, size_t size, int slot) : data_(data), size_(size), slot_(slot) {}
  void reset();

  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  int slot_ = -1;  // in the registry mapped_input_at() reads (a SIGBUS names this file)
};

// Drops this process's mapping of the whole pages inside [data, data + bytes) of a read-only file
// mapping (MADV_DONTNEED on a MAP_PRIVATE mapping that was never written): they leave the process's
// resident set and come back from the page cache if read again. For a model that has converted a
// tensor of its file and will not read those bytes again (docs/design.md 14).
void release_pages(const void* data, size_t bytes);

// Outputs up to this size are mapped populated (one pass instead of a fault per page); larger ones
// page by page, each tensor's pages released once it is written (release_pages), so that writing a
// model does not hold the whole output in the writer's resident set.
inline constexpr size_t kPopulateLimit = size_t{1} << 30;

// "strerror(errno)" for messages; thread-safe (strerror_r).
std::string errno_text(int err);

}  // namespace nmkit::io
