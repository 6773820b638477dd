// Storage of tensors and packed weights (docs/design.md 11.7, "Large buffers in huge pages"): small
// buffers from the heap, large ones in a mapping of their own that asks for transparent huge pages,
// so a 1 GB weight faults in 2 MiB at a time (512 faults) rather than 4 KiB (262144), and comes
// zeroed by the kernel.
#pragma once

#include <cstddef>
#include <memory>

namespace nmkit {

// Frees either kind: `mapped` is the mapping's length, 0 for a heap buffer.
struct PageBytesFree {
  size_t mapped = 0;
  void operator()(std::byte* p) const;
};
using PageBytes = std::unique_ptr<std::byte[], PageBytesFree>;

// At least max(bytes, 1) bytes, 64-byte aligned; every byte zero when `zeroed` (free for a mapping).
// Throws std::bad_alloc when the memory cannot be had, as new does.
PageBytes allocate_page_bytes(size_t bytes, bool zeroed);

}  // namespace nmkit
