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
  bool borrowed = false;  // not ours (bytes in a file's mapping): nothing to free
  void operator()(std::byte* p) const;
};
using PageBytes = std::unique_ptr<std::byte[], PageBytesFree>;

// At least max(bytes, 1) bytes, 64-byte aligned; every byte zero when `zeroed` (free for a fresh
// mapping, a memset for a recycled one). Throws std::bad_alloc when the memory cannot be had, as new
// does.
PageBytes allocate_page_bytes(size_t bytes, bool zeroed);

// While one of these lives, a freed mapping is kept (up to the smallest `max_bytes` of the live
// scopes, and 512 MiB, in all) for the next large allocation of about its size, instead of going back
// to the kernel: the kernel clears every page it hands out on first touch, 1-2 GB/s on this project's
// VMs against 11 GB/s for rewriting a page already held, and a model build frees and allocates the
// same temporaries block after block. When the last one ends, the kept mappings are unmapped.
class PageRecycling {
 public:
  static constexpr size_t kMaxRecycleBytes = size_t{512} << 20;
  explicit PageRecycling(size_t max_bytes);
  ~PageRecycling();
  // The bytes kept for reuse now.
  static size_t kept_bytes();
  PageRecycling(const PageRecycling&) = delete;
  PageRecycling& operator=(const PageRecycling&) = delete;

 private:
  size_t max_bytes_;
};

}  // namespace nmkit
