// Atomic safetensors writing: every tensor is produced directly in a memory mapping of a temporary
// file in the destination folder, which is renamed onto the destination only when all succeeded.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/mapped_file.h"
#include "io/safetensors_header.h"
#include "io/text.h"
#include "nmkit/safetensors.h"

namespace nmkit {
namespace {

struct Layout {
  std::string header;              // JSON padded with spaces to a multiple of 8 bytes
  std::vector<uint64_t> begins;    // data offset of each tensor
  uint64_t data_size = 0;
};

// A JSON string literal; throws nlohmann's type_error for invalid UTF-8 (caught by plan()).
void append_json_string(std::string& out, const std::string& text) {
  out += nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
}

// The header in the reference implementation's form: "__metadata__" first (only when non-empty),
// then each tensor as {"dtype", "shape", "data_offsets"} with contiguous offsets in the given order.
// Built as text: nlohmann's ordered_json inserts by linear search, quadratic in the tensor count.
Result<Layout> plan(const std::string& path, const std::vector<OutputTensor>& tensors, const Metadata& metadata) {
  const std::string prefix = path + ": ";
  Layout layout;
  layout.begins.reserve(tensors.size());
  std::string& header = layout.header;
  header = "{";
  try {
    if (!metadata.empty()) {
      header += "\"__metadata__\":{";
      bool first = true;
      for (const auto& [key, value] : metadata) {
        if (!first) header += ',';
        first = false;
        append_json_string(header, key);
        header += ':';
        append_json_string(header, value);
      }
      header += '}';
    }
    std::unordered_set<std::string_view> names;
    uint64_t offset = 0;
    for (const OutputTensor& t : tensors) {
      const std::string where = prefix + "tensor " + io::quote_name(t.name) + ": ";
      if (t.name.empty()) return Error(prefix + "a tensor has an empty name");
      if (t.name == "__metadata__") return Error(where + "the name is reserved for the metadata");
      if (!names.insert(t.name).second) return Error(where + "listed twice");
      uint64_t numel = 1;
      for (const int64_t dim : t.shape) {
        if (dim < 0) return Error(where + "shape " + shape_str(t.shape) + " has a negative entry " + std::to_string(dim));
        if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dim), &numel)) {
          return Error(where + "shape " + shape_str(t.shape) + " overflows 64-bit element counts");
        }
      }
      uint64_t end = 0;
      if (numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(t.dtype)), &end) ||
          __builtin_add_overflow(offset, end, &end)) {
        return Error(where + "shape " + shape_str(t.shape) + " overflows 64-bit byte counts");
      }
      if (!t.fill) return Error(where + "no fill function");
      if (header.size() > 1) header += ',';
      append_json_string(header, t.name);
      header += ":{\"dtype\":\"";
      header += dtype_name(t.dtype);
      header += "\",\"shape\":[";
      for (size_t d = 0; d < t.shape.size(); ++d) {
        if (d > 0) header += ',';
        header += std::to_string(t.shape[d]);
      }
      header += "],\"data_offsets\":[";
      header += std::to_string(offset);
      header += ',';
      header += std::to_string(end);
      header += "]}";
      layout.begins.push_back(offset);
      offset = end;
      if (header.size() > io::kMaxHeaderBytes) break;  // reported below
    }
    layout.data_size = offset;
  } catch (const std::exception& e) {
    return Error(prefix + "tensor names and metadata must be valid UTF-8: " + io::one_line(e.what(), 200));
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > io::kMaxHeaderBytes) {
    return Error(prefix + "header of more than " + std::to_string(io::kMaxHeaderBytes) +
                 " bytes exceeds the limit readers accept");
  }
  return layout;
}

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

// Owns the temporary file until commit: any early return unmaps, closes and unlinks it.
class Temporary {
 public:
  explicit Temporary(const std::string& path) : name_(path + ".tmp.XXXXXX") {}
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;
  ~Temporary() {
    unmap();
    if (fd_ >= 0) ::close(fd_);
    if (created_ && !committed_) ::unlink(name_.c_str());
  }

  Status create(uint64_t size) {
    fd_ = ::mkostemp(name_.data(), O_CLOEXEC);
    if (fd_ < 0) return Error(name_ + ": cannot create temporary file: " + io::errno_text(errno));
    created_ = true;
    if (::fchmod(fd_, default_file_mode()) != 0) return failure("cannot set permissions");
    // Reserve the blocks now: a full disk is then an error here instead of a SIGBUS while a fill
    // writes into the mapping.
    const int err = ::posix_fallocate(fd_, 0, static_cast<off_t>(size));
    if (err != 0) {
      return Error(name_ + ": cannot allocate " + std::to_string(size) + " bytes: " + io::errno_text(err));
    }
    // MAP_POPULATE: every page is written, so map them all in one pass instead of one page fault
    // per 4 KiB inside the fills.
    void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, 0);
    if (map == MAP_FAILED) return failure("cannot map " + std::to_string(size) + " bytes");
    data_ = static_cast<std::byte*>(map);
    size_ = size;
    return ok_status();
  }

  std::byte* data() { return data_; }

  Status commit(const std::string& path) {
    unmap();  // dirty pages stay in the page cache and are written by fsync below
    if (::fsync(fd_) != 0) return failure("cannot sync");
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) return failure("cannot close");
    if (::rename(name_.c_str(), path.c_str()) != 0) {
      return Error(path + ": cannot rename " + name_ + " onto it: " + io::errno_text(errno));
    }
    committed_ = true;
    sync_folder(path);
    return ok_status();
  }

 private:
  Status failure(const std::string& what) const { return Error(name_ + ": " + what + ": " + io::errno_text(errno)); }

  void unmap() {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = nullptr;
  }

  // Makes the rename itself durable; best effort, since the data is already safe and some file
  // systems refuse fsync on folders.
  static void sync_folder(const std::string& path) {
    const size_t slash = path.rfind('/');
    const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
  }

  std::string name_;
  int fd_ = -1;
  bool created_ = false;
  bool committed_ = false;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

OutputTensor OutputTensor::copy_of(std::string name, const TensorView& view) {
  OutputTensor out;
  out.name = std::move(name);
  out.dtype = view.dtype;
  out.shape = view.shape;
  out.fill = [src = view.data, bytes = view.nbytes()](std::byte* dst) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return ok_status();
  };
  return out;
}

OutputTensor OutputTensor::owning(std::string name, Tensor tensor) {
  // std::function needs a copyable callable; the tensor is shared by the copies of this one.
  auto held = std::make_shared<Tensor>(std::move(tensor));
  OutputTensor out;
  out.name = std::move(name);
  out.dtype = held->dtype();
  out.shape = held->shape();
  out.fill = [held](std::byte* dst) {
    if (held->nbytes() > 0) std::memcpy(dst, held->data(), held->nbytes());
    return ok_status();
  };
  return out;
}

Status write_safetensors(const std::string& path, const std::vector<OutputTensor>& tensors,
                         const Metadata& metadata, const WriteOptions& options) {
  auto layout = plan(path, tensors, metadata);
  if (!layout.ok()) return layout.error();
  const uint64_t header_len = layout->header.size();
  const uint64_t total = 8 + header_len + layout->data_size;

  Temporary temporary(path);
  NMKIT_TRY(temporary.create(total));
  std::byte* out = temporary.data();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(header_len >> (8 * i) & 0xFF);  // little-endian
  std::memcpy(out + 8, layout->header.data(), header_len);
  std::byte* data = out + 8 + header_len;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const OutputTensor& t = tensors[i];
    // Callbacks are the caller's code: an exception from one must not skip the cleanup or leave
    // the library (design.md 10.1).
    try {
      if (options.on_tensor) options.on_tensor(i, tensors.size(), t);
      NMKIT_TRY(t.fill(data + layout->begins[i]));
    } catch (const std::exception& e) {
      return Error(path + ": tensor " + io::quote_name(t.name) + ": " + io::one_line(e.what(), 200));
    } catch (...) {
      return Error(path + ": tensor " + io::quote_name(t.name) + ": fill threw an unknown exception");
    }
  }
  return temporary.commit(path);
}

}  // namespace nmkit
