// slide() and lift() against docs/design.md section 5: exhaustive over every mask of every group up to 16
// wide, random compliant weights of awkward K, and the promised errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "nmkit/slide.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// Independent oracle of the greedy placement for one group: window w takes the first (at most two)
// non-zero, not yet placed positions among 2w..2w+3, in lane order.
std::vector<float> oracle_group(const std::vector<float>& group, int N) {
  std::vector<float> out(static_cast<size_t>(4 * (N - 1)), 0.0f);
  std::vector<bool> placed(group.size(), false);
  for (int w = 0; w < N - 1; ++w) {
    std::vector<int> take;
    for (int lane = 0; lane < 4; ++lane) {
      const auto i = static_cast<size_t>(2 * w + lane);
      if (i < group.size() && group[i] != 0.0f && !placed[i]) take.push_back(lane);
    }
    if (take.size() > 2) take.resize(2);
    for (int lane : take) {
      const auto i = static_cast<size_t>(2 * w + lane);
      out[static_cast<size_t>(4 * w + lane)] = group[i];
      placed[i] = true;
    }
  }
  return out;
}

// Checks every window of every output group holds at most two non-zeros.
void expect_windows_are_24(const std::vector<float>& row, int64_t K_prime) {
  for (int64_t j = 0; j < K_prime; j += 4) {
    int count = 0;
    for (int64_t l = 0; l < 4; ++l) count += row[static_cast<size_t>(j + l)] != 0.0f ? 1 : 0;
    ASSERT_LE(count, 2) << "window at column " << j;
  }
}

TEST(Slide, ExhaustiveMasksUpTo16) {
  for (int N = 2; N <= 8; ++N) {
    const int group = 2 * N;
    const int keep = group - 2;
    SCOPED_TRACE("pattern " + std::to_string(keep) + ":" + std::to_string(group));
    // One row per mask with at most keep non-zeros; value of position i is +-(i+1), so every
    // placed value identifies its source.
    std::vector<uint32_t> masks;
    for (uint32_t mask = 0; mask < (1u << group); ++mask) {
      if (std::popcount(mask) <= keep) masks.push_back(mask);
    }
    const auto rows = static_cast<int64_t>(masks.size());
    std::vector<float> w(static_cast<size_t>(rows * group), 0.0f);
    for (size_t r = 0; r < masks.size(); ++r) {
      for (int i = 0; i < group; ++i) {
        if ((masks[r] >> i) & 1) w[r * group + i] = static_cast<float>((i % 2 ? -1 : 1) * (i + 1));
      }
    }
    Tensor wt = Tensor::from_f32(w, {rows, group});
    auto slid = slide(wt.view(), Pattern{keep, group}, 4, "exhaustive");
    ASSERT_TRUE(slid.ok()) << slid.error().message();
    const SlideGeometry& g = slid->geometry;
    ASSERT_EQ(g.K_prime(), 4 * (N - 1));
    const auto out = slid->weight.to_f32();
    // Lifted activation: x[i] = 1000^... would overflow; small distinct integers suffice because the
    // placed values are checked one by one as well.
    std::vector<float> x(static_cast<size_t>(group));
    for (int i = 0; i < group; ++i) x[static_cast<size_t>(i)] = static_cast<float>(3 * i - 7);
    Tensor xt = Tensor::from_f32(x, {1, group});
    auto lifted = lift(xt.view(), g, "x");
    ASSERT_TRUE(lifted.ok());
    const auto xl = lifted->to_f32();
    for (int64_t r = 0; r < rows; ++r) {
      SCOPED_TRACE("mask 0x" + std::to_string(masks[static_cast<size_t>(r)]));
      std::vector<float> in(w.begin() + r * group, w.begin() + (r + 1) * group);
      std::vector<float> row(out.begin() + r * g.K_prime(), out.begin() + (r + 1) * g.K_prime());
      expect_windows_are_24(row, g.K_prime());
      ASSERT_EQ(row, oracle_group(in, N));
      // Every non-zero placed exactly once, at a column whose source is its own position.
      std::vector<int> placed(static_cast<size_t>(group), 0);
      for (int64_t j = 0; j < g.K_prime(); ++j) {
        const float v = row[static_cast<size_t>(j)];
        if (v == 0.0f) continue;
        const int64_t i = g.source_column(j);
        ASSERT_GE(i, 0);
        ASSERT_EQ(v, in[static_cast<size_t>(i)]);
        ++placed[static_cast<size_t>(i)];
      }
      for (int i = 0; i < group; ++i) {
        ASSERT_EQ(placed[static_cast<size_t>(i)], in[static_cast<size_t>(i)] != 0.0f ? 1 : 0);
      }
      double dot = 0, dot_lifted = 0;
      for (int i = 0; i < group; ++i) dot += double(in[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
      for (int64_t j = 0; j < g.K_prime(); ++j) {
        dot_lifted += double(row[static_cast<size_t>(j)]) * xl[static_cast<size_t>(j)];
      }
      ASSERT_EQ(dot, dot_lifted);
    }
  }
}

// Random weight compliant with keep:group, small integer values, every group (tail included) with
// at most keep non-zeros; some groups have exactly keep.
std::vector<float> compliant_weight(int64_t rows, int64_t K, Pattern p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> w(static_cast<size_t>(rows * K), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t begin = 0; begin < K; begin += p.group) {
      const int real = static_cast<int>(std::min<int64_t>(p.group, K - begin));
      std::vector<int> pos(static_cast<size_t>(real));
      for (int i = 0; i < real; ++i) pos[static_cast<size_t>(i)] = i;
      std::shuffle(pos.begin(), pos.end(), rng);
      const int count = static_cast<int>(rng() % static_cast<uint64_t>(std::min(p.keep, real) + 1));
      for (int c = 0; c < count; ++c) {
        int v = static_cast<int>(rng() % 15) - 7;
        if (v == 0) v = 9;
        w[static_cast<size_t>(r * K + begin + pos[static_cast<size_t>(c)])] = static_cast<float>(v);
      }
    }
  }
  return w;
}

TEST(Slide, RandomCompliantAwkwardK) {
  const uint64_t seed = 20260522;
  SCOPED_TRACE(test::seed_trace(seed));
  const std::vector<Pattern> patterns{{2, 4}, {1, 4}, {4, 6}, {6, 8}, {3, 8}, {8, 10}, {14, 16}, {62, 64}, {20, 40}};
  const int64_t rows = 3, M = 2;
  uint64_t s = seed;
  for (const auto& p : patterns) {
    for (int64_t K : {1, 7, 100, 1000, 4097}) {
      for (int align : {4, 16, 32, 64}) {
        for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
          SCOPED_TRACE(p.str() + " K=" + std::to_string(K) + " align=" + std::to_string(align) +
                       " " + std::string(dtype_name(dtype)));
          const auto w = compliant_weight(rows, K, p, ++s);
          Tensor wt = Tensor::from_f32(w, {rows, K}, dtype);
          auto slid = slide(wt.view(), p, align, "w");
          ASSERT_TRUE(slid.ok()) << slid.error().message();
          const SlideGeometry& g = slid->geometry;
          ASSERT_EQ(slid->weight.dtype(), dtype);
          ASSERT_EQ(slid->weight.shape(), (Shape{rows, g.K_prime()}));
          const auto out = slid->weight.to_f32();
          const auto xv = test::random_small_ints(static_cast<size_t>(M * K), s, -9, 9);
          Tensor xt = Tensor::from_f32(xv, {M, K}, dtype);
          auto lifted = lift(xt.view(), g, "x");
          ASSERT_TRUE(lifted.ok());
          ASSERT_EQ(lifted->dtype(), dtype);
          const auto xl = lifted->to_f32();
          const auto map = lift_index_map(g);
          for (int64_t m = 0; m < M; ++m) {
            for (int64_t j = 0; j < g.K_prime(); ++j) {
              const float expected = map[static_cast<size_t>(j)] < 0
                                         ? 0.0f
                                         : xv[static_cast<size_t>(m * K + map[static_cast<size_t>(j)])];
              ASSERT_EQ(xl[static_cast<size_t>(m * g.K_prime() + j)], expected);
            }
          }
          for (int64_t r = 0; r < rows; ++r) {
            std::vector<float> row(out.begin() + r * g.K_prime(), out.begin() + (r + 1) * g.K_prime());
            expect_windows_are_24(row, g.K_prime());
            for (int64_t j = g.K_prime_raw(); j < g.K_prime(); ++j) ASSERT_EQ(row[static_cast<size_t>(j)], 0.0f);
            // Per group against the oracle (the tail group padded with zeros).
            for (int64_t q = 0; q < g.K_pad() / p.group; ++q) {
              std::vector<float> in(static_cast<size_t>(p.group), 0.0f);
              for (int i = 0; i < p.group && q * p.group + i < K; ++i) {
                in[static_cast<size_t>(i)] = w[static_cast<size_t>(r * K + q * p.group + i)];
              }
              const auto expected = oracle_group(in, g.N());
              const int64_t o = 4 * (g.N() - 1);
              ASSERT_TRUE(std::equal(expected.begin(), expected.end(), row.begin() + q * o)) << "group " << q;
            }
            for (int64_t m = 0; m < M; ++m) {
              double dot = 0, dot_lifted = 0;
              for (int64_t k = 0; k < K; ++k) {
                dot += double(w[static_cast<size_t>(r * K + k)]) * xv[static_cast<size_t>(m * K + k)];
              }
              for (int64_t j = 0; j < g.K_prime(); ++j) {
                dot_lifted += double(row[static_cast<size_t>(j)]) * xl[static_cast<size_t>(m * g.K_prime() + j)];
              }
              ASSERT_EQ(dot, dot_lifted) << "row " << r << " token " << m;
            }
          }
        }
      }
    }
  }
}

TEST(Slide, CopiesBitsOfAnyDtype) {
  // int8 codes slide like floats; -0.0 is treated as zero and becomes +0.
  const int64_t K = 8;
  Tensor w = Tensor::empty(DType::I8, {1, K});
  const int8_t codes[K] = {-128, 0, 5, 0, -1, 7, 0, 0};
  std::memcpy(w.data(), codes, K);
  auto slid = slide(w.view(), Pattern{6, 8}, 4, "codes");
  ASSERT_TRUE(slid.ok()) << slid.error().message();
  const auto* out = slid->weight.as<int8_t>();
  std::vector<float> as_float(codes, codes + K);
  const auto expected = oracle_group(as_float, 4);
  for (size_t j = 0; j < expected.size(); ++j) EXPECT_EQ(float(out[j]), expected[j]) << j;

  Tensor neg = Tensor::from_f32({-0.0f, 1, -0.0f, 2, 3, -0.0f, 4, 5}, {1, 8});
  auto slid_neg = slide(neg.view(), Pattern{6, 8}, 4, "neg");
  ASSERT_TRUE(slid_neg.ok());
  for (int64_t j = 0; j < slid_neg->geometry.K_prime(); ++j) {
    const float v = slid_neg->weight.as<float>()[j];
    if (v == 0.0f) {
      EXPECT_FALSE(std::signbit(v)) << j;
    }
  }
}

TEST(Slide, NonCompliantWeightNamesRowAndGroup) {
  // Row 1, group 2 of a 6:8 weight has 7 non-zeros.
  const int64_t rows = 3, K = 40;
  std::vector<float> w(static_cast<size_t>(rows * K), 0.0f);
  for (int i = 0; i < 7; ++i) w[static_cast<size_t>(1 * K + 16 + i)] = 1.0f;
  Tensor wt = Tensor::from_f32(w, {rows, K}, DType::BF16);
  auto slid = slide(wt.view(), Pattern{6, 8}, 32, "layers.0.mlp.up_proj.weight");
  ASSERT_FALSE(slid.ok());
  const std::string& msg = slid.error().message();
  EXPECT_NE(msg.find("layers.0.mlp.up_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("row 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("group 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("7 non-zeros"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);

  // A smaller keep is enforced even though the greedy placement could absorb the extra value.
  std::vector<float> w2(16, 0.0f);
  for (int i = 0; i < 5; ++i) w2[static_cast<size_t>(8 + i)] = 2.0f;
  Tensor wt2 = Tensor::from_f32(w2, {1, 16});
  auto slid2 = slide(wt2.view(), Pattern{4, 8}, 32, "w2");
  ASSERT_FALSE(slid2.ok());
  EXPECT_NE(slid2.error().message().find("row 0, group 1"), std::string::npos) << slid2.error().message();

  // The tail group counts too: K = 10, 6:8, tail of 2 columns is fine, 7 in the first group is not.
  std::vector<float> w3(10, 1.0f);
  w3[0] = 0.0f;
  Tensor wt3 = Tensor::from_f32(w3, {1, 10});
  auto slid3 = slide(wt3.view(), Pattern{6, 8}, 32, "w3");
  ASSERT_FALSE(slid3.ok());
  EXPECT_NE(slid3.error().message().find("group 0"), std::string::npos) << slid3.error().message();
}

TEST(Slide, PatternsThatCannotSlide) {
  Tensor w = Tensor::zeros(DType::F32, {2, 16});
  for (Pattern p : {Pattern{3, 5}, Pattern{7, 8}, Pattern{3, 4}, Pattern{5, 6}}) {
    auto slid = slide(w.view(), p, 32, "w");
    ASSERT_FALSE(slid.ok()) << p.str();
    EXPECT_NE(slid.error().message().find(p.str()), std::string::npos) << slid.error().message();
    EXPECT_NE(slid.error().message().find("'w'"), std::string::npos) << slid.error().message();
  }
  auto bad_align = slide(w.view(), Pattern{6, 8}, 6, "w");
  ASSERT_FALSE(bad_align.ok());
  Tensor three_d = Tensor::zeros(DType::F32, {2, 2, 8});
  EXPECT_FALSE(slide(three_d.view(), Pattern{6, 8}, 32, "w").ok());
  auto g = SlideGeometry::make(Pattern{6, 8}, 24, 32);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(slide(w.view(), *g, "w").ok());  // K 16 != 24
  EXPECT_FALSE(lift(w.view(), *g, "x").ok());
}

}  // namespace
}  // namespace nmkit
