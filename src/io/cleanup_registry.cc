// Fixed tables of atomics and plain buffers: a signal handler may read them at any instant, so no
// allocation, no lock, and a slot's contents are published (release) before it is marked in use.
#include "io/cleanup_registry.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

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

}  // namespace

int register_temporary(const char* path) noexcept { return claim(temporaries, nullptr, 0, path); }
void unregister_temporary(int slot) noexcept { release(temporaries, slot); }
int register_mapping(const void* begin, size_t size, const char* path) noexcept {
  return claim(mappings, begin, size, path);
}
void unregister_mapping(int slot) noexcept { release(mappings, slot); }

}  // namespace nmkit::io

namespace nmkit {

void remove_temporaries() noexcept {
  for (auto& slot : io::temporaries) {
    if (slot.state.load(std::memory_order_acquire) == io::kActive) ::unlink(slot.path);  // async-signal-safe
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
