// What the machine can give this process: the memory a model or a cache may take before it is built
// (docs/design.md 14; issue 24, item 2: a model that cannot fit is refused before loading).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace nmkit {

// Memory this process can still take: the least of MemAvailable + SwapFree (/proc/meminfo), the
// address space left under RLIMIT_AS (`ulimit -v`) and RLIMIT_DATA (`ulimit -d`) beside the process's
// current size, and the cgroup's memory.max less what the group holds (page cache excepted); `limit`
// names which one it is ("" and SIZE_MAX when none is known).
struct MemoryBudget {
  size_t bytes = SIZE_MAX;
  std::string limit;
};
MemoryBudget available_memory();
// available_memory().bytes, 0 when nothing is known.
size_t available_memory_bytes();

// "1.07 GB", "287.7 kB": sizes in the memory and disk-space messages (decimal units, as df -H).
std::string decimal_bytes(uint64_t bytes);
// Makes glibc's malloc give large freed blocks back to the system at once: allocations from 1 MiB up
// are mapped and unmapped on their own. Without it glibc raises its mmap threshold to the largest
// block freed (up to 32 MiB), so every conversion temporary below that size freed while a model is
// built stays in the heap for the rest of the process (docs/design.md 11.7; docs/data.md). Set once,
// by the first call; left alone where the user has set the threshold (MALLOC_MMAP_THRESHOLD_ or
// GLIBC_TUNABLES) and without glibc.
void release_freed_memory_eagerly();

}  // namespace nmkit
