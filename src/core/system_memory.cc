#include "core/system_memory.h"

#include <sys/resource.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>

namespace nmkit {

namespace {

// The value of `key` (kB) in a /proc file of "Key:   N kB" lines, in bytes; 0 when absent.
size_t proc_kb(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0) return static_cast<size_t>(std::stoull(line.substr(key.size()))) * 1024;
  }
  return 0;
}

}  // namespace

size_t available_memory_bytes() {
  size_t available = proc_kb("/proc/meminfo", "MemAvailable:");
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const auto cap = static_cast<size_t>(limit.rlim_cur);
    const size_t used = proc_kb("/proc/self/status", "VmSize:");
    const size_t left = cap > used ? cap - used : 0;
    available = available == 0 ? left : std::min(available, left);
  }
  return available;
}

void release_freed_memory_eagerly() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
        (tunables != nullptr && std::strstr(tunables, "mmap_threshold") != nullptr)) {
      return;
    }
    // A fixed threshold also turns off glibc's dynamic one (mallopt(3)).
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
  });
#endif
}

}  // namespace nmkit
