#include "core/system_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace nmkit {
namespace {

// A "Key:   123 kB" line of /proc/meminfo, in bytes; nullopt when absent.
std::optional<uint64_t> meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    uint64_t kb = 0;
    if (fields >> kb) return kb * 1024;
  }
  return std::nullopt;
}

// Fields of /proc/self/statm (in pages): 0 the address space (VmSize), 5 data + stack (VmData).
uint64_t statm_bytes(int field) {
  std::ifstream in("/proc/self/statm");
  uint64_t value = 0;
  for (int i = 0; i <= field && (in >> value); ++i) {
  }
  return value * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t left_under(uint64_t limit, uint64_t used) { return limit > used ? limit - used : 0; }

// cgroup v2: memory.max less what the group holds, page cache excepted (the kernel reclaims it).
std::optional<uint64_t> cgroup_left() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, group;
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) == 0) group = line.substr(3);
  }
  if (group.empty()) return std::nullopt;
  const std::string dir = "/sys/fs/cgroup" + (group == "/" ? std::string() : group);
  std::ifstream max_file(dir + "/memory.max"), current_file(dir + "/memory.current");
  uint64_t max = 0, current = 0;
  if (!(max_file >> max) || !(current_file >> current)) return std::nullopt;  // "max": no limit
  std::ifstream stat(dir + "/memory.stat");
  std::string key;
  uint64_t value = 0, cache = 0;
  while (stat >> key >> value) {
    if (key == "file") cache = value;
  }
  return left_under(max, current > cache ? current - cache : 0);
}

}  // namespace

MemoryBudget available_memory() {
  MemoryBudget budget;
  const auto consider = [&budget](uint64_t bytes, const char* limit) {
    if (bytes < budget.bytes) budget = {static_cast<size_t>(bytes), limit};
  };
  if (auto available = meminfo_bytes("MemAvailable")) {
    consider(*available + meminfo_bytes("SwapFree").value_or(0), "free memory and swap");
  }
  rlimit as{}, data{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    consider(left_under(as.rlim_cur, statm_bytes(0)), "ulimit -v");
  }
  if (::getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY) {
    consider(left_under(data.rlim_cur, statm_bytes(5)), "ulimit -d");
  }
  if (auto left = cgroup_left()) consider(*left, "the cgroup's memory.max");
  return budget;
}

size_t available_memory_bytes() {
  const MemoryBudget budget = available_memory();
  return budget.limit.empty() ? 0 : budget.bytes;
}

std::string decimal_bytes(uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  char text[32];
  if (b >= 1e9) std::snprintf(text, sizeof text, "%.2f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(text, sizeof text, "%.1f MB", b / 1e6);
  else std::snprintf(text, sizeof text, "%.1f kB", b / 1e3);
  return text;
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
