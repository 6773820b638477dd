// Large buffers in their own huge-page mappings, and their reuse while a PageRecycling lives
// (src/core/page_bytes.h, docs/design.md 11.7).
#include "core/page_bytes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace nmkit {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool all_zero(const std::byte* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != std::byte{0}) return false;
  }
  return true;
}

TEST(PageBytes, SmallFromTheHeapLargeMappedOnAHugePageBoundary) {
  PageBytes small = allocate_page_bytes(1000, true);
  EXPECT_EQ(small.get_deleter().mapped, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.get()) % 64, 0u);
  EXPECT_TRUE(all_zero(small.get(), 1000));
  PageBytes none = allocate_page_bytes(0, false);  // still a valid pointer
  EXPECT_NE(none.get(), nullptr);
  PageBytes large = allocate_page_bytes(5 * kMiB + 3, true);
  EXPECT_EQ(large.get_deleter().mapped, 5 * kMiB + 4096);  // whole 4 KiB pages
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.get()) % (2 * kMiB), 0u);
  EXPECT_TRUE(all_zero(large.get(), 5 * kMiB + 3));
}

TEST(PageBytes, FreedMappingsAreReusedOnlyInsideAScopeAndForTheirSize) {
  allocate_page_bytes(8 * kMiB, false).reset();  // no scope: unmapped when freed
  EXPECT_EQ(PageRecycling::kept_bytes(), 0u);
  const PageRecycling scope(64 * kMiB);
  PageBytes a = allocate_page_bytes(8 * kMiB, false);
  std::memset(a.get(), 0x5A, 8 * kMiB);
  std::byte* kept = a.get();
  a.reset();
  EXPECT_EQ(PageRecycling::kept_bytes(), 8 * kMiB);
  // Much smaller, or larger: not that mapping.
  PageBytes smaller = allocate_page_bytes(4 * kMiB, false);
  PageBytes larger = allocate_page_bytes(9 * kMiB + 1, false);
  EXPECT_EQ(PageRecycling::kept_bytes(), 8 * kMiB);
  // Its size to an eighth: the same pages, zeroed on request, trimmed to the request.
  PageBytes again = allocate_page_bytes(7 * kMiB + 512 * 1024, true);
  EXPECT_EQ(again.get(), kept);
  EXPECT_EQ(PageRecycling::kept_bytes(), 0u);
  EXPECT_EQ(again.get_deleter().mapped, 7 * kMiB + 512 * 1024);
  EXPECT_TRUE(all_zero(again.get(), 7 * kMiB + 512 * 1024));
}

TEST(PageBytes, RecyclingKeepsNoMoreThanItsLimitAndReleasesAtTheEnd) {
  {
    const PageRecycling scope(20 * kMiB);
    PageBytes a = allocate_page_bytes(8 * kMiB, false);
    PageBytes b = allocate_page_bytes(16 * kMiB, false);
    a.reset();  // kept: 8 of 20 MiB
    b.reset();  // 24 > 20: unmapped
    EXPECT_EQ(PageRecycling::kept_bytes(), 8 * kMiB);
    {
      const PageRecycling inner(4 * kMiB);  // the smallest live limit rules
      allocate_page_bytes(6 * kMiB, false).reset();
      EXPECT_EQ(PageRecycling::kept_bytes(), 8 * kMiB);
    }
    allocate_page_bytes(6 * kMiB, false).reset();  // 14 <= 20 again
    EXPECT_EQ(PageRecycling::kept_bytes(), 14 * kMiB);
    allocate_page_bytes(2 * kMiB + 4096, false).reset();  // below 4 MiB: heap, never kept
    EXPECT_EQ(PageRecycling::kept_bytes(), 14 * kMiB);
  }
  EXPECT_EQ(PageRecycling::kept_bytes(), 0u);
}

}  // namespace
}  // namespace nmkit
