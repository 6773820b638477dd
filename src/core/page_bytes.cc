#include "core/page_bytes.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace nmkit {
namespace {

// Below this a buffer comes from the heap: a huge page would be mostly empty, and the weights that
// matter (a 1B model's smallest linear holds 8 MB) are far above it.
constexpr size_t kMappedFrom = size_t{4} << 20;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kPage = 4096;

}  // namespace

void PageBytesFree::operator()(std::byte* p) const {
  if (mapped != 0) {
    munmap(p, mapped);
  } else {
    std::free(p);
  }
}

PageBytes allocate_page_bytes(size_t bytes, bool zeroed) {
  if (bytes < kMappedFrom) {
    const size_t rounded = (bytes + 63) / 64 * 64 + 64;  // non-zero, a multiple of the alignment
    auto* p = static_cast<std::byte*>(std::aligned_alloc(64, rounded));
    if (p == nullptr) throw std::bad_alloc();
    if (zeroed) std::memset(p, 0, rounded);
    return PageBytes(p, PageBytesFree{0});
  }
  // A start on a 2 MiB boundary, so the whole buffer but its last partial huge page can be huge
  // pages: map 2 MiB more, then unmap what lies before the boundary and after the buffer.
  const size_t length = (bytes + kPage - 1) / kPage * kPage;
  void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (start > base) munmap(raw, start - base);
  const uintptr_t end = base + length + kHugePage;
  if (end > start + length) munmap(reinterpret_cast<void*>(start + length), end - (start + length));
  // Advice only: where THP is off ("never") the mapping works in 4 KiB pages.
  madvise(reinterpret_cast<void*>(start), length, MADV_HUGEPAGE);
  return PageBytes(reinterpret_cast<std::byte*>(start), PageBytesFree{length});
}

}  // namespace nmkit
