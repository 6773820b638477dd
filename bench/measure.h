// Measurement helpers shared by every benchmark (docs/design.md 10.9): warm up, rotate operands through
// a working set larger than the last-level cache, take the median, and measure the machine's copy
// bandwidth in the same run so that GB/s figures have a ceiling next to them.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace nmkit::bench {

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  double max_ms = 0;
  int samples = 0;
};

// Median of v (the mean of the middle two for an even count); v must not be empty.
double median_of(std::vector<double> v);

// Calls fn(i) with i = 0, 1, 2, ... (use i % copies to pick a rotated operand): `warmup` untimed
// calls, then timed calls until at least min_samples and min_seconds have passed (and at most
// max_samples). Returns the median.
Timing time_median(const std::function<void(int)>& fn, int min_samples = 7, double min_seconds = 0.25,
                   int warmup = 2, int max_samples = 1000);

// Last-level cache size in bytes (sysfs; 32 MiB if unknown).
size_t last_level_cache_bytes();

// The machine's memory (sysconf; 8 GiB if unknown).
size_t physical_memory_bytes();

// The working set one operand's rotated copies aim at, so that each call reads its weight from
// memory: twice the last-level cache and at least 512 MiB (a VM may report less cache than its
// host's), but at most 1/48 of the machine's memory. A benchmark keeps about 20 such operands alive
// at once (every kernel of every weight set of one M, and the oneDNN copies inside nmkit's layers):
// on an Intel Xeon VM reporting 480 MiB of L3, 2x that per operand took 24 GiB and was killed at
// 49152x576. Where the cap binds, the working set is near the L3 and one-token figures are partly
// L3 figures, for every kernel alike.
size_t cold_working_set_bytes();

// Copies of an operand of `bytes` bytes to rotate through for a working set of
// cold_working_set_bytes() (at least 1, at most `max_copies`).
int rotation_copies(size_t bytes, int max_copies = 64);

// Median copy bandwidth of memcpy on buffers of `bytes` (default 4x the LLC) split over `threads`
// threads (0 = the pool's size). Counted as bytes read + bytes written per second, in GB/s (1e9).
double copy_bandwidth_gbs(size_t bytes = 0, int threads = 0);

}  // namespace nmkit::bench
