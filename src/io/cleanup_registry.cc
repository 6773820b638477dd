// Fixed tables of atomics and plain buffers: a signal handler may read them at any instant, so no
// allocation, no lock, and a slot's contents are published (release) before it is marked in use.
#include "io/cleanup_registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>

#include "nmkit/files.h"

namespace nmkit::io {
namespace {

// 64 outputs at once is far above what any command writes (a checkpoint and a report); PATH_MAX
// (4096) bounds every path the kernel accepts.
constexpr int kSlots = 64;
constexpr size_t kPathBytes = 4096;

enum : int { kFree = 0, kFilling = 1, kActive = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  const void* begin = nullptr;
  size_t size = 0;
  char path[kPathBytes] = {};
};

Slot temporaries[kSlots];
Slot folders[kSlots];
Slot mappings[kSlots];

int claim(Slot* table, const void* begin, size_t size, const char* path) noexcept {
  const size_t length = std::strlen(path);
  if (length >= kPathBytes) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (table[i].state.compare_exchange_strong(expected, kFilling, std::memory_order_acquire)) {
      table[i].begin = begin;
      table[i].size = size;
      std::memcpy(table[i].path, path, length + 1);
      table[i].state.store(kActive, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void release(Slot* table, int slot) noexcept {
  if (slot >= 0 && slot < kSlots) table[slot].state.store(kFree, std::memory_order_release);
}

// Unlinks the entries of a temporary folder (files, and empty folders: a writer makes no deeper
// tree), then the folder. getdents64 on an open descriptor instead of opendir, which allocates and
// is not async-signal-safe.
void remove_folder(const char* path) noexcept {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    alignas(8) char buffer[4096];
    for (;;) {
      const long got = ::syscall(SYS_getdents64, fd, buffer, sizeof(buffer));
      if (got <= 0) break;
      for (long at = 0; at < got;) {
        const auto* entry = reinterpret_cast<const struct dirent64*>(buffer + at);
        at += entry->d_reclen;
        const char* name = entry->d_name;
        if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) continue;
        ::unlinkat(fd, name, entry->d_type == DT_DIR ? AT_REMOVEDIR : 0);
      }
    }
    ::close(fd);
  }
  ::rmdir(path);
}

}  // namespace

int register_temporary(const char* path) noexcept { return claim(temporaries, nullptr, 0, path); }
void unregister_temporary(int slot) noexcept { release(temporaries, slot); }
int register_temporary_folder(const char* path) noexcept { return claim(folders, nullptr, 0, path); }
void unregister_temporary_folder(int slot) noexcept { release(folders, slot); }
int register_mapping(const void* begin, size_t size, const char* path) noexcept {
  return claim(mappings, begin, size, path);
}
void unregister_mapping(int slot) noexcept { release(mappings, slot); }

int create_registered(const std::string& prefix, bool folder, const std::function<int(const char*)>& create,
                      std::string& path, int& slot) {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device seed;
  std::mt19937_64 rng((static_cast<uint64_t>(seed()) << 32) ^ static_cast<uint64_t>(::getpid()));
  for (int attempt = 0; attempt <= 100; ++attempt) {
    std::string name = prefix;
    for (int i = 0; i < 6; ++i) name += kChars[rng() % (sizeof(kChars) - 1)];
    const int claimed = folder ? register_temporary_folder(name.c_str()) : register_temporary(name.c_str());
    const int made = create(name.c_str());
    if (made >= 0) {
      path = std::move(name);
      slot = claimed;
      return made;
    }
    const int err = errno;
    if (folder) {
      unregister_temporary_folder(claimed);
    } else {
      unregister_temporary(claimed);
    }
    errno = err;
    if (err != EEXIST) return -1;
  }
  return -1;
}

}  // namespace nmkit::io

namespace nmkit {

void remove_temporaries() noexcept {
  for (auto& slot : io::temporaries) {
    if (slot.state.load(std::memory_order_acquire) == io::kActive) ::unlink(slot.path);  // async-signal-safe
  }
  for (auto& slot : io::folders) {
    if (slot.state.load(std::memory_order_acquire) == io::kActive) io::remove_folder(slot.path);
  }
}

const char* mapped_input_at(const void* address) noexcept {
  const auto at = reinterpret_cast<uintptr_t>(address);
  for (const auto& slot : io::mappings) {
    if (slot.state.load(std::memory_order_acquire) != io::kActive) continue;
    const auto begin = reinterpret_cast<uintptr_t>(slot.begin);
    if (at >= begin && at - begin < slot.size) return slot.path;
  }
  return nullptr;
}

}  // namespace nmkit
