#include "peak_rss.h"

#include <fstream>
#include <string>

namespace nmkit::bench {
namespace {

// The value of `key` (in kB) in a /proc file of "Key:   N kB" lines, in bytes.
size_t proc_kb(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0) return std::stoull(line.substr(key.size())) * 1024;
  }
  return 0;
}

}  // namespace

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  return static_cast<bool>(out.flush());
}

size_t peak_rss_bytes() { return proc_kb("/proc/self/status", "VmHWM:"); }

size_t available_memory_bytes() { return proc_kb("/proc/meminfo", "MemAvailable:"); }

}  // namespace nmkit::bench
