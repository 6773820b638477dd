#include "measure.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bandwidth.h"
#include "nmkit/threads.h"

namespace nmkit::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Page-touched buffer (so first-touch page faults are not timed).
std::unique_ptr<std::byte[]> touched_buffer(size_t bytes, std::byte fill) {
  std::unique_ptr<std::byte[]> buf(new std::byte[bytes]);
  std::memset(buf.get(), static_cast<int>(fill), bytes);
  return buf;
}

size_t default_stream_bytes(size_t bytes) {
  if (bytes != 0) return bytes;
  return std::min(4 * last_level_cache_bytes(), std::max(physical_memory_bytes() / 16, size_t{64} << 20));
}

}  // namespace

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Timing time_median(const std::function<void(int)>& fn, int min_samples, double min_seconds, int warmup,
                   int max_samples) {
  int call = 0;
  for (int i = 0; i < warmup; ++i) fn(call++);
  std::vector<double> samples;
  const auto start = Clock::now();
  while (static_cast<int>(samples.size()) < max_samples &&
         (static_cast<int>(samples.size()) < min_samples || ms_since(start) < 1000.0 * min_seconds)) {
    const auto t0 = Clock::now();
    fn(call++);
    samples.push_back(ms_since(t0));
  }
  Timing t;
  t.samples = static_cast<int>(samples.size());
  t.median_ms = median_of(samples);
  t.min_ms = *std::min_element(samples.begin(), samples.end());
  t.max_ms = *std::max_element(samples.begin(), samples.end());
  return t;
}

size_t last_level_cache_bytes() {
  size_t best = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (!(in >> text) || text.empty()) continue;
    size_t value = std::stoull(text);
    if (text.back() == 'K') value <<= 10;
    if (text.back() == 'M') value <<= 20;
    best = std::max(best, value);
  }
  return best ? best : size_t{32} << 20;
}

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : size_t{8} << 30;
}

size_t cold_working_set_bytes() {
  const size_t want = std::max(2 * last_level_cache_bytes(), size_t{512} << 20);
  return std::min(want, std::max(physical_memory_bytes() / 48, size_t{64} << 20));
}

int rotation_copies(size_t bytes, int max_copies) {
  if (bytes == 0) return 1;
  const size_t want = cold_working_set_bytes();
  const size_t copies = (want + bytes - 1) / bytes;
  return static_cast<int>(std::clamp<size_t>(copies, 1, static_cast<size_t>(max_copies)));
}

double copy_bandwidth_gbs(size_t bytes, int threads) {
  bytes = default_stream_bytes(bytes);
  const int parts = threads > 0 ? threads : thread_count();
  auto src = touched_buffer(bytes, std::byte{1});
  auto dst = touched_buffer(bytes, std::byte{2});
  const auto chunk = static_cast<int64_t>((bytes / static_cast<size_t>(parts) + 63) / 64 * 64);
  const Timing t = time_median([&](int) {
    parallel_for(parts, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const auto begin = static_cast<size_t>(std::min<int64_t>(p * chunk, static_cast<int64_t>(bytes)));
        const auto end = static_cast<size_t>(std::min<int64_t>((p + 1) * chunk, static_cast<int64_t>(bytes)));
        std::memcpy(dst.get() + begin, src.get() + begin, end - begin);
      }
    });
  }, 9, 0.3, 2, 200);
  return 2.0 * static_cast<double>(bytes) / (t.median_ms * 1e6);
}

}  // namespace nmkit::bench
