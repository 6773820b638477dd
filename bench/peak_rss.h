// The peak resident set of this process (Linux: VmHWM of /proc/self/status), which a benchmark can
// reset between the forms it measures one after another (writing 5 to /proc/self/clear_refs), so
// that each form's figure is its own: the bytes it held, what building it took transiently, and what
// its runs used.
#pragma once

#include <cstddef>

namespace nmkit::bench {

// Resets the peak to the current resident set; false where the kernel does not allow it.
bool reset_peak_rss();
// The peak resident set in bytes since the process started or the last reset (0 if unknown).
size_t peak_rss_bytes();
// MemAvailable of /proc/meminfo in bytes (0 if unknown).
size_t available_memory_bytes();

}  // namespace nmkit::bench
