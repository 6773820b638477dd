#include "bandwidth.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>

#include "cpu/kernel_table.h"
#include "measure.h"
#include "nmkit/threads.h"

namespace nmkit::bench {
namespace {

// Rows of the 4-row pattern: 8 KiB, a dense f32 row of K = 2048 (bf16 4096, INT8 8192).
constexpr size_t kRowBytes = size_t{8} << 10;

size_t probe_bytes(size_t bytes) {
  if (bytes == 0) {
    bytes = std::max(4 * last_level_cache_bytes(), size_t{1} << 30);
    bytes = std::min(bytes, std::max(physical_memory_bytes() / 16, size_t{64} << 20));
  }
  return std::max<size_t>(bytes / (4 * kRowBytes) * (4 * kRowBytes), 4 * kRowBytes);
}

}  // namespace

ReadProbe::ReadProbe(size_t bytes, int threads)
    : bytes_(probe_bytes(bytes)), threads_(threads > 0 ? threads : thread_count()) {
  // Pages touched first (no page faults timed), with a value per page so that nothing is shared.
  buffer_.reset(new std::byte[bytes_]);
  for (size_t i = 0; i < bytes_; i += 4096) std::memset(buffer_.get() + i, static_cast<int>(i >> 12), std::min<size_t>(4096, bytes_ - i));
}

ReadBandwidth ReadProbe::measure() const {
  ReadBandwidth out;
  out.bytes = bytes_;
  out.threads = threads_;
  const auto table = cpu::kernels();
  const cpu::ReadStreamFn read = table.ok() ? (*table)->linear.read_stream : cpu::scalar::read_stream;
  // Each thread's part: whole 4-row blocks.
  const size_t unit = 4 * kRowBytes, units = bytes_ / unit;
  const auto parts = static_cast<int64_t>(threads_);
  const std::byte* const buffer = buffer_.get();
  std::atomic<uint64_t> sink{0};
  auto pass = [&](size_t row_bytes) {
    const Timing t = time_median([&](int) {
      parallel_for(parts, 1, [&](int64_t begin, int64_t end) {
        for (int64_t p = begin; p < end; ++p) {
          const size_t first = units * static_cast<size_t>(p) / static_cast<size_t>(parts);
          const size_t last = units * static_cast<size_t>(p + 1) / static_cast<size_t>(parts);
          sink.fetch_xor(read(buffer + first * unit, (last - first) * unit, row_bytes), std::memory_order_relaxed);
        }
      });
    }, 7, 0.3, 1, 100);
    return static_cast<double>(bytes_) / (t.median_ms * 1e6);
  };
  out.one_stream_gbs = pass(0);
  out.four_rows_gbs = pass(kRowBytes);
  out.gbs = std::max(out.one_stream_gbs, out.four_rows_gbs);
  return out;
}

ReadBandwidth measure_read_bandwidth(size_t bytes, int threads) { return ReadProbe(bytes, threads).measure(); }

}  // namespace nmkit::bench
