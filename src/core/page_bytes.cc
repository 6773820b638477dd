#include "core/page_bytes.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <utility>
#include <vector>

namespace nmkit {
namespace {

// Below this a buffer comes from the heap: a huge page would be mostly empty, and the weights that
// matter (a 1B model's smallest linear holds 8 MB) are far above it.
constexpr size_t kMappedFrom = size_t{4} << 20;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kPage = 4096;

// The mappings kept for reuse while a PageRecycling lives.
struct Recycler {
  std::mutex mutex;
  std::multiset<size_t> limits;  // each live scope's max_bytes
  size_t held = 0;
  std::vector<std::pair<std::byte*, size_t>> kept;  // start, length

  // The smallest kept mapping that holds `length` bytes with at most an eighth to spare: a model
  // build allocates the same sizes block after block, and a large mapping cut down for a small
  // request would be missing when its own size comes round again.
  std::optional<std::pair<std::byte*, size_t>> take(size_t length) {
    std::lock_guard lock(mutex);
    size_t best = kept.size();
    for (size_t i = 0; i < kept.size(); ++i) {
      const size_t have = kept[i].second;
      if (have >= length && have - length <= length / 8 && (best == kept.size() || have < kept[best].second)) best = i;
    }
    if (best == kept.size()) return std::nullopt;
    const auto found = kept[best];
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(best));
    held -= found.second;
    return found;
  }

  bool keep(std::byte* p, size_t length) {
    std::lock_guard lock(mutex);
    if (limits.empty() || held + length > *limits.begin()) return false;
    kept.emplace_back(p, length);
    held += length;
    return true;
  }
};

Recycler& recycler() {
  static Recycler* r = new Recycler;  // never destroyed: frees may come during static destruction
  return *r;
}

}  // namespace

PageRecycling::PageRecycling(size_t max_bytes) : max_bytes_(std::min(max_bytes, kMaxRecycleBytes)) {
  Recycler& r = recycler();
  std::lock_guard lock(r.mutex);
  r.limits.insert(max_bytes_);
}

PageRecycling::~PageRecycling() {
  Recycler& r = recycler();
  std::vector<std::pair<std::byte*, size_t>> kept;
  {
    std::lock_guard lock(r.mutex);
    r.limits.erase(r.limits.find(max_bytes_));
    if (!r.limits.empty()) return;
    kept.swap(r.kept);
    r.held = 0;
  }
  for (const auto& [p, length] : kept) munmap(p, length);
}

size_t PageRecycling::kept_bytes() {
  Recycler& r = recycler();
  std::lock_guard lock(r.mutex);
  return r.held;
}

void PageBytesFree::operator()(std::byte* p) const {
  if (borrowed) return;
  if (mapped == 0) {
    std::free(p);
  } else if (!recycler().keep(p, mapped)) {
    munmap(p, mapped);
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
  if (auto recycled = recycler().take(length)) {
    // What lies past this buffer goes back to the kernel: a kept tensor must not hold more than
    // its own pages.
    if (recycled->second > length) munmap(recycled->first + length, recycled->second - length);
    if (zeroed) std::memset(recycled->first, 0, length);
    return PageBytes(recycled->first, PageBytesFree{length});
  }
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
