// What the machine can give this process: the memory a model or a cache may take before it is built.
#pragma once

#include <cstddef>

namespace nmkit {

// MemAvailable of /proc/meminfo (memory that can be allocated without swapping), lowered to what the
// address-space limit (RLIMIT_AS, `ulimit -v`) leaves beside the process's current size where that is
// smaller; 0 when neither is known.
size_t available_memory_bytes();

}  // namespace nmkit
