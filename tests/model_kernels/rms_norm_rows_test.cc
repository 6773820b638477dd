// rms_norm_rows (src/model/model_kernels.h) against the one-row loop of docs/design.md 11.2 written
// here: each row's sum of squares in double and in index order, so the interleaved rows must give
// every row's result bit for bit, on the ISA tier the suite runs (NMKIT_ISA).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "model/model_kernels.h"

namespace nmkit::model {
namespace {

std::vector<float> one_row_reference(const std::vector<float>& x, const std::vector<float>& weight, int64_t n,
                                     int64_t d, float eps) {
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < n; ++r) {
    const float* row = x.data() + r * d;
    double sum = 0;
    for (int64_t i = 0; i < d; ++i) sum += static_cast<double>(row[i]) * static_cast<double>(row[i]);
    const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(d) + eps));
    for (int64_t i = 0; i < d; ++i) y[static_cast<size_t>(r * d + i)] = row[i] * scale * weight[static_cast<size_t>(i)];
  }
  return y;
}

TEST(RmsNormRows, EveryRowMatchesTheOneRowLoopBitForBit) {
  std::mt19937 rng(5);
  // Values over many binades. A reordered double sum would almost never change a float result, so
  // what this catches is rows mixed up in the interleaving, a wrong scale, weight or row tail.
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (int64_t n : {1, 7, 8, 9, 17, 24}) {
    for (int64_t d : {1, 5, 64, 577}) {
      std::vector<float> x(static_cast<size_t>(n * d)), weight(static_cast<size_t>(d));
      for (float& v : x) v = std::ldexp(mantissa(rng), exponent(rng));
      for (float& v : weight) v = mantissa(rng);
      const float eps = 1e-5f;
      std::vector<float> y(x.size(), NAN);
      rms_norm_rows(x.data(), weight.data(), n, d, eps, y.data());
      const std::vector<float> want = one_row_reference(x, weight, n, d, eps);
      ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float))) << "n " << n << " d " << d;
    }
  }
}

}  // namespace
}  // namespace nmkit::model
