// InputStats (docs/design.md section 12): H = X^T X and the Wanda norms against naive float64 sums.
#include <gtest/gtest.h>

#include <cmath>

#include "nmkit/calib.h"
#include "tests/calib/calib_data.h"
#include "tests/calib/calib_oracle.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// Sizes around the converter's slab (2^18 / K rows, at least 64) so a batch spans several dsyrk
// calls, and K from 1 to a few hundred.
TEST(InputStats, HessianAndNormsEqualNaiveFloat64Sums) {
  for (int64_t K : {1, 3, 17, 100, 300}) {
    for (int64_t tokens : {1, 15, 1000}) {
      const uint64_t seed = 7000 + K * 31 + tokens;
      SCOPED_TRACE(test::seed_trace(seed) + " K=" + std::to_string(K) +
                   " tokens=" + std::to_string(tokens));
      const std::vector<float> X = test::random_floats(tokens * K, seed, -2.0f, 2.0f);
      InputStats stats(K, true);
      // Two batches, the first one with a row stride wider than K.
      const int64_t first = tokens / 2;
      std::vector<float> strided(first * (K + 5), 99.0f);
      for (int64_t t = 0; t < first; ++t) {
        for (int64_t k = 0; k < K; ++k) strided[t * (K + 5) + k] = X[t * K + k];
      }
      stats.add(strided.data(), first, K + 5);
      stats.add(X.data() + first * K, tokens - first);
      EXPECT_EQ(stats.tokens(), tokens);
      const std::vector<double> want = test::naive_hessian(X, tokens, K);
      const std::vector<double> got = stats.hessian();
      ASSERT_EQ(got.size(), want.size());
      // Products of floats are exact in float64; the sums of `tokens` terms of size <= 4 may be
      // ordered differently by dsyrk: |error| <= tokens * eps64 * sum|x_i x_j|.
      double max_err = 0;
      for (int64_t i = 0; i < K; ++i) {
        for (int64_t j = 0; j < K; ++j) {
          double bound = 0;
          for (int64_t t = 0; t < tokens; ++t) bound += std::fabs(double(X[t * K + i]) * X[t * K + j]);
          bound *= double(tokens) * 0x1p-52;
          EXPECT_LE(std::fabs(got[i * K + j] - want[i * K + j]), bound) << i << "," << j;
          max_err = std::max(max_err, std::fabs(got[i * K + j] - want[i * K + j]));
        }
      }
      const std::vector<float> a = stats.act_norms();
      for (int64_t k = 0; k < K; ++k) {
        EXPECT_EQ(a[k], static_cast<float>(std::sqrt(want[k * K + k]))) << k;
        EXPECT_GT(a[k], 0.0f);
      }
    }
  }
}

TEST(InputStats, WithoutHessianKeepsOnlyNorms) {
  InputStats stats(4, false);
  const std::vector<float> X{1, 2, 0, -3, 2, 0, 0, 4};
  stats.add(X.data(), 2);
  EXPECT_FALSE(stats.has_hessian());
  EXPECT_TRUE(stats.hessian().empty());
  const std::vector<float> a = stats.act_norms();
  EXPECT_EQ(a, (std::vector<float>{std::sqrt(5.0f), 2.0f, 0.0f, 5.0f}));
}

}  // namespace
}  // namespace nmkit
