// Exhaustive selection tests (docs/design.md 2 and 10.7): for every group width g <= 16 and every
// keep < g, every subset of a group's positions is made "strong", and the library's choice is
// compared bit for bit with the sort-based oracle. The values are built so that the rules are all
// exercised: strong beats weak, equal scores go to the larger |w| and then to the lower index,
// -0 ties with +0, and tail groups keep min(keep, t) of their t real elements.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "nmkit/prune.h"
#include "tests/prune/oracle.h"

namespace nmkit {
namespace {

using test::first_bit_difference;
using test::oracle_kept;
using test::oracle_masked;

// Inputs of one exhaustive case: rows x K with row r's strong positions given by bits(r, k).
struct Case {
  std::vector<float> w, grad, norms;
  int64_t rows = 0, K = 0;
};

template <class Bits>
Case build(PruneMethod method, int64_t rows, int64_t K, int group, const Bits& bits) {
  Case c;
  c.rows = rows;
  c.K = K;
  c.w.resize(rows * K);
  c.grad.resize(rows * K);
  c.norms.resize(K);
  // Norms 1, 1/2, 1/4 so that |w| * a can tie while |w| differs.
  for (int64_t k = 0; k < K; ++k) c.norms[k] = 1.0f / static_cast<float>(1 << (k % 3));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      const int i = static_cast<int>(k % group);
      const bool strong = bits(r, k);
      const float sign = (i % 2) ? -1.0f : 1.0f;
      float w = 0, g = 0;
      switch (method) {
        case PruneMethod::Magnitude:
          // Strong: |w| 1 or 2; weak: +0 or -0 (equal scores, decided by index).
          w = strong ? sign * (i % 3 == 0 ? 2.0f : 1.0f) : (i % 2 ? -0.0f : 0.0f);
          break;
        case PruneMethod::Gradient: {
          // Strong: score exactly 1 from |w| in {1, 2, 4}; weak: score 0.5 with |w| = 8 (a larger
          // |w| must not beat a higher score) or a -0 weight with score 0.
          static const float ws[3] = {1.0f, 2.0f, -4.0f};
          static const float gs[3] = {1.0f, 0.5f, 0.25f};
          if (strong) {
            w = ws[i % 3];
            g = gs[i % 3];
          } else if (i % 2 == 0) {
            w = 8.0f;
            g = -0.0625f;
          } else {
            w = -0.0f;
            g = 3.0f;
          }
          break;
        }
        case PruneMethod::Wanda: {
          const float a = c.norms[k];
          // Strong: |w| * a = 1 with |w| = 1/a; weak: score 0.25 or a +0 weight.
          w = strong ? sign / a : (i % 2 == 0 ? -0.25f / a : 0.0f);
          break;
        }
      }
      c.w[r * K + k] = w;
      c.grad[r * K + k] = g;
    }
  }
  return c;
}

// Prunes `c` and compares with the oracle; returns false (after one failure message) on mismatch.
bool check(const Case& c, Pattern p, PruneMethod method) {
  const Tensor w = Tensor::from_f32(c.w, {c.rows, c.K});
  const Tensor grad = Tensor::from_f32(c.grad, {c.rows, c.K});
  const Tensor norms = Tensor::from_f32(c.norms, {c.K});
  const TensorView gv = grad.view(), nv = norms.view();
  ScoreInputs in;
  in.gradient = &gv;
  in.act_norms = &nv;
  auto got = prune(w.view(), p, method, in, "exhaustive");
  if (!got.ok()) {
    ADD_FAILURE() << got.error().message();
    return false;
  }
  const auto kept = oracle_kept(c.w, c.rows, c.K, p, method, &c.grad, &c.norms);
  const Tensor expected = oracle_masked(w.view(), kept);
  const int64_t diff = first_bit_difference(got->pruned, expected);
  if (diff >= 0) {
    const int64_t r = diff / c.K;
    std::string row;
    for (int64_t k = 0; k < c.K; ++k) row += std::to_string(c.w[r * c.K + k]) + " ";
    ADD_FAILURE() << "pattern " << p.str() << " method " << prune_method_name(method) << " K "
                  << c.K << ": first difference at row " << r << ", column " << diff % c.K
                  << "; row = " << row;
    return false;
  }
  int64_t n_kept = 0;
  for (uint8_t k : kept) n_kept += k;
  if (got->sums.pruned_count != c.rows * c.K - n_kept) {
    ADD_FAILURE() << "pruned_count " << got->sums.pruned_count << " expected "
                  << c.rows * c.K - n_kept;
    return false;
  }
  return true;
}

class ExhaustiveSelection : public ::testing::TestWithParam<PruneMethod> {};

// Magnitude runs every width up to 16; the score-tie rules of gradient and Wanda add no width-
// dependent path beyond those, so they stop at 14 to keep the suite within a few seconds.
int max_width(PruneMethod method) { return method == PruneMethod::Magnitude ? 16 : 14; }

TEST_P(ExhaustiveSelection, EverySubsetOfOneGroup) {
  const PruneMethod method = GetParam();
  for (int g = 2; g <= max_width(method); ++g) {
    // Five groups per row, so that both the four-groups-at-a-time path and the one-group path
    // of the library see every subset (subset s sits in row s / 5, group s % 5).
    const int64_t subsets = int64_t{1} << g, per_row = 5;
    const int64_t rows = (subsets + per_row - 1) / per_row;
    const Case c = build(method, rows, g * per_row, g, [g, per_row, subsets](int64_t r, int64_t k) {
      const int64_t subset = (r * per_row + k / g) % subsets;
      return ((subset >> (k % g)) & 1) != 0;
    });
    for (int keep = 1; keep < g; ++keep) {
      ASSERT_TRUE(check(c, Pattern{keep, g}, method)) << "g=" << g << " keep=" << keep;
    }
  }
}

// Tails: rows made only of a tail group (K = t < g), every subset of its t real elements; then rows
// of four full groups (pseudo-random subsets, taking the four-groups-at-a-time path) followed by
// every subset of a tail of t <= 8 elements; then, for g <= 8, one full group and a tail.
TEST_P(ExhaustiveSelection, EverySubsetOfEveryTail) {
  const PruneMethod method = GetParam();
  for (int g = 2; g <= max_width(method); ++g) {
    for (int t = 1; t < g; ++t) {
      const int64_t rows = int64_t{1} << t;
      const Case c = build(method, rows, t, g, [](int64_t r, int64_t k) { return (r >> k) & 1; });
      for (int keep = 1; keep < g; ++keep) {
        ASSERT_TRUE(check(c, Pattern{keep, g}, method)) << "g=" << g << " t=" << t
                                                        << " keep=" << keep;
      }
    }
    for (int t = 1; t < g && t <= 8; ++t) {
      const int64_t rows = int64_t{1} << t;
      const Case c = build(method, rows, 4 * g + t, g, [g](int64_t r, int64_t k) {
        if (k >= 4 * g) return ((r >> (k - 4 * g)) & 1) != 0;
        const uint64_t h = static_cast<uint64_t>(r * 4 + k / g + 1) * 0x9E3779B97F4A7C15ull;
        return ((h >> (40 + k % g)) & 1) != 0;
      });
      for (int keep = 1; keep < g; ++keep) {
        ASSERT_TRUE(check(c, Pattern{keep, g}, method)) << "g=" << g << " t=" << t
                                                        << " keep=" << keep;
      }
    }
  }
  for (int g = 2; g <= 8; ++g) {
    for (int t = 1; t < g; ++t) {
      const int64_t rows = int64_t{1} << t;
      const Case c = build(method, rows, g + t, g, [g](int64_t r, int64_t k) {
        if (k >= g) return ((r >> (k - g)) & 1) != 0;
        const uint64_t h = static_cast<uint64_t>(r + 1) * 0x9E3779B97F4A7C15ull;
        return ((h >> (40 + k)) & 1) != 0;
      });
      for (int keep = 1; keep < g; ++keep) {
        ASSERT_TRUE(check(c, Pattern{keep, g}, method)) << "g=" << g << " t=" << t
                                                        << " keep=" << keep;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Methods, ExhaustiveSelection,
                         ::testing::Values(PruneMethod::Magnitude, PruneMethod::Gradient,
                                           PruneMethod::Wanda),
                         [](const auto& param_info) { return std::string(prune_method_name(param_info.param)); });

// Tail rule spelled out: K = 5 with 2:4 has a tail of one real element, which is always kept
// (min(2, 1) = 1); K = 7 with 3:4 keeps all three real tail elements.
TEST(TailGroups, KeepMinOfKeepAndRealElements) {
  const Tensor w = Tensor::from_f32({1, 2, 3, 4, 0.5f, 9, 8, 7, 6, 0.25f}, {2, 5});
  auto got = prune(w.view(), Pattern{2, 4}, PruneMethod::Magnitude);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->pruned.to_f32(), (std::vector<float>{0, 0, 3, 4, 0.5f, 9, 8, 0, 0, 0.25f}));
  EXPECT_EQ(got->sums.pruned_count, 4);

  const Tensor w7 = Tensor::from_f32({5, 1, 2, 3, 4, 6, 7}, {1, 7});
  auto got7 = prune(w7.view(), Pattern{3, 4}, PruneMethod::Magnitude);
  ASSERT_TRUE(got7.ok());
  EXPECT_EQ(got7->pruned.to_f32(), (std::vector<float>{5, 0, 2, 3, 4, 6, 7}));
}

// Wide groups (17..64) take a different selection path: a few hand-checked cases plus random ties.
TEST(WideGroups, MatchTheOracleWithTies) {
  for (int g : {17, 24, 31, 32, 33, 63, 64}) {
    for (int keep : {1, g / 2, g - 2, g - 1}) {
      for (int64_t K : {int64_t{g}, int64_t{g} * 9 + 5, int64_t{1}, int64_t{g} - 1}) {
        const uint64_t seed = 1000u + static_cast<uint64_t>(g * 100 + keep);
        SCOPED_TRACE(test::seed_trace(seed));
        Case c;
        c.rows = 9;
        c.K = K;
        c.w = test::random_small_ints(c.rows * K, seed, -3, 3);
        c.grad = test::random_small_ints(c.rows * K, seed + 1, -2, 2);
        c.norms = test::random_small_ints(K, seed + 2, 0, 2);
        for (PruneMethod m : {PruneMethod::Magnitude, PruneMethod::Gradient, PruneMethod::Wanda}) {
          ASSERT_TRUE(check(c, Pattern{keep, g}, m)) << "g=" << g << " keep=" << keep;
        }
      }
    }
  }
}

}  // namespace
}  // namespace nmkit
