// The temporary file behind every atomic write (safetensors and GGUF): created next to the
// destination, its blocks reserved and mapped for writing, then fsynced and renamed onto the
// destination by commit(). Destroying it before commit() removes it, so an error never leaves a
// partial output.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "nmkit/status.h"

namespace nmkit::io {

class TemporaryFile {
 public:
  // Names the temporary "PATH.tmp.XXXXXX" (same folder, so the rename is atomic).
  explicit TemporaryFile(const std::string& path) : name_(path + ".tmp.XXXXXX") {}
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile();

  // Creates the file with the permissions creat() would give, reserves `size` bytes (a full disk is
  // an Error here instead of a SIGBUS while writing into the mapping) and maps them for writing.
  Status create(uint64_t size);
  std::byte* data() { return data_; }
  // Unmaps, fsyncs, closes and renames onto `path`, then syncs the folder (best effort).
  Status commit(const std::string& path);

 private:
  Status failure(const std::string& what) const;
  void unmap();

  std::string name_;
  int fd_ = -1;
  bool created_ = false;
  bool committed_ = false;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace nmkit::io
