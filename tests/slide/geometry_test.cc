// SlideGeometry sizes and index map against an independent enumeration of docs/design.md section 5.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "nmkit/slide.h"
#include "nmkit/slide_geometry.h"

namespace nmkit {
namespace {

// The output columns in the order the design lists them: groups, then windows, then lanes.
std::vector<int64_t> enumerate_map(int N, int64_t K, int64_t K_prime) {
  std::vector<int64_t> map;
  const int64_t groups = (K + 2 * N - 1) / (2 * N);
  for (int64_t q = 0; q < groups; ++q) {
    for (int w = 0; w < N - 1; ++w) {
      for (int lane = 0; lane < 4; ++lane) {
        const int64_t i = q * 2 * N + 2 * w + lane;
        map.push_back(i < K ? i : -1);
      }
    }
  }
  while (static_cast<int64_t>(map.size()) < K_prime) map.push_back(-1);
  return map;
}

TEST(SlideGeometry, SizesAndMapForAwkwardK) {
  for (int N = 2; N <= 32; ++N) {
    for (int keep : {1, 2 * N - 2}) {
      const Pattern pattern{keep, 2 * N};
      for (int64_t K : {1, 7, 100, 1000, 4097}) {
        for (int align : {4, 16, 32, 64}) {
          SCOPED_TRACE(pattern.str() + " K=" + std::to_string(K) + " align=" + std::to_string(align));
          auto g = SlideGeometry::make(pattern, K, align);
          ASSERT_TRUE(g.ok()) << g.error().message();
          EXPECT_EQ(g->N(), N);
          EXPECT_EQ(g->windows_per_group(), N - 1);
          EXPECT_EQ(g->K_pad() % (2 * N), 0);
          EXPECT_GE(g->K_pad(), K);
          EXPECT_LT(g->K_pad() - K, 2 * N);
          EXPECT_EQ(g->K_prime_raw(), g->K_pad() / (2 * N) * 4 * (N - 1));
          EXPECT_EQ(g->K_prime() % align, 0);
          EXPECT_GE(g->K_prime(), g->K_prime_raw());
          EXPECT_LT(g->K_prime() - g->K_prime_raw(), align);
          EXPECT_DOUBLE_EQ(g->ideal_speedup(), static_cast<double>(N) / (N - 1));
          const auto expected = enumerate_map(N, K, g->K_prime());
          ASSERT_EQ(static_cast<int64_t>(expected.size()), g->K_prime());
          const auto map = lift_index_map(*g);
          ASSERT_EQ(map, expected);
          for (int64_t j = 0; j < g->K_prime(); ++j) {
            ASSERT_EQ(g->source_column(j), expected[static_cast<size_t>(j)]) << "j=" << j;
          }
          EXPECT_EQ(g->source_column(-1), -1);
          EXPECT_EQ(g->source_column(g->K_prime()), -1);
          // Every input column appears in the map at least once (nothing is lost by lifting).
          std::vector<int> seen(static_cast<size_t>(K), 0);
          for (int64_t i : map) {
            if (i >= 0) ++seen[static_cast<size_t>(i)];
          }
          for (int64_t k = 0; k < K; ++k) ASSERT_GE(seen[static_cast<size_t>(k)], 1) << "k=" << k;
        }
      }
    }
  }
}

TEST(SlideGeometry, ExpansionMatchesDesign) {
  // K a multiple of 2N and of the alignment: K'/K = 2(N-1)/N exactly.
  for (int N = 2; N <= 32; ++N) {
    const int64_t K = 2 * N * 64;
    auto g = SlideGeometry::make(Pattern{2 * N - 2, 2 * N}, K, 4);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->K_prime() * N, K * 2 * (N - 1)) << "N=" << N;
  }
}

TEST(SlideGeometry, HugeKThatFitsKeepsItsSizesPositive) {
  // K_prime = ceil(K / 8) * 12 = 9e18 < 2^63: accepted, every derived size exact and positive.
  auto g = SlideGeometry::make(Pattern{6, 8}, 6000000000000000000, 4);
  ASSERT_TRUE(g.ok()) << g.error().message();
  EXPECT_EQ(g->K_pad(), 6000000000000000000);
  EXPECT_EQ(g->K_prime_raw(), 9000000000000000000);
  EXPECT_EQ(g->K_prime(), 9000000000000000000);
}

TEST(SlideGeometry, Errors) {
  struct Case {
    Pattern pattern;
    int64_t K;
    int align;
    const char* needle;
  };
  const std::vector<Case> cases{
      {{3, 5}, 16, 32, "odd"},     {{4, 7}, 16, 32, "odd"},    {{7, 8}, 16, 32, "keep 7"},
      {{3, 4}, 16, 32, "keep 3"},  {{1, 2}, 16, 32, "keep 1"}, {{63, 64}, 16, 32, "keep 63"},
      {{6, 8}, 16, 0, "align 0"},  {{6, 8}, 16, -4, "align -4"}, {{6, 8}, 16, 6, "align 6"},
      {{6, 8}, 16, 30, "align 30"}, {{6, 8}, 0, 32, "K 0"},     {{6, 8}, -3, 32, "K -3"},
      // Issue 13 W3: a [0, K] tensor costs no bytes, so K can be near 2^63; K_prime = ~1.94 K for
      // keep:64 wrapped to a negative width from K ~4.8e18 on.
      {{62, 64}, 4800000000000000000, 32, "too large"},
      {{6, 8}, std::numeric_limits<int64_t>::max(), 32, "too large"},
      {{2, 4}, std::numeric_limits<int64_t>::max() - 2, 4, "too large"},
  };
  for (const auto& c : cases) {
    auto g = SlideGeometry::make(c.pattern, c.K, c.align);
    ASSERT_FALSE(g.ok()) << c.pattern.str() << " K=" << c.K << " align=" << c.align;
    EXPECT_NE(g.error().message().find(c.needle), std::string::npos) << g.error().message();
    EXPECT_EQ(g.error().message().find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace nmkit
