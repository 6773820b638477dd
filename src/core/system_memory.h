// What the machine can give this process: the memory a model or a cache may take before it is built.
#pragma once

#include <cstddef>

namespace nmkit {

// MemAvailable of /proc/meminfo (memory that can be allocated without swapping), lowered to what the
// address-space limit (RLIMIT_AS, `ulimit -v`) leaves beside the process's current size where that is
// smaller; 0 when neither is known.
size_t available_memory_bytes();

// Makes glibc's malloc give large freed blocks back to the system at once: allocations from 1 MiB up
// are mapped and unmapped on their own. Without it glibc raises its mmap threshold to the largest
// block freed (up to 32 MiB), so every conversion temporary below that size freed while a model is
// built stays in the heap for the rest of the process (docs/design.md 11.7; docs/data.md). Set once,
// by the first call; left alone where the user has set the threshold (MALLOC_MMAP_THRESHOLD_ or
// GLIBC_TUNABLES) and without glibc.
void release_freed_memory_eagerly();

}  // namespace nmkit
