// exp_inplace (src/model/model_kernels.h) against float64 exp within its stated relative error on its
// domain, its behaviour past the clamps, and each value's result independent of where it sits in the array (full
// vectors and the padded tail run the same lanes), on the ISA tier the suite runs (NMKIT_ISA).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "model/model_kernels.h"

namespace nmkit::model {
namespace {

TEST(ExpInplace, WithinTwoTenMillionthsAndIndependentOfPosition) {
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> range(-87.0f, 88.0f);
  for (int64_t n : {1, 5, 16, 17, 31, 1000}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = range(rng);
    std::vector<float> y = x;
    exp_inplace(y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      const double exact = std::exp(static_cast<double>(x[k]));
      ASSERT_LE(std::fabs(y[k] - exact), 2e-7 * exact) << "x " << x[k] << " -> " << y[k] << ", exp " << exact;
      float alone = x[k];
      exp_inplace(&alone, 1);
      uint32_t a, b;
      std::memcpy(&a, &alone, 4);
      std::memcpy(&b, &y[k], 4);
      ASSERT_EQ(a, b) << "x " << x[k] << " at " << i << " of " << n << " differs from the same value alone";
    }
  }
  // Past the clamps: tiny but non-negative below -87.3; above 88 (outside the stated domain) huge or
  // infinite, never NaN.
  float low[3] = {-87.5f, -200.0f, -INFINITY}, high[2] = {89.0f, 1e30f};
  exp_inplace(low, 3);
  exp_inplace(high, 2);
  for (float v : low) EXPECT_TRUE(v >= 0.0f && v < 1.2e-38f) << v;
  for (float v : high) EXPECT_TRUE(v > 3e38f) << v;
}

}  // namespace
}  // namespace nmkit::model
