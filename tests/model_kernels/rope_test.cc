// rope_rotate (src/model/model_kernels.h) in modes NORM and NEOX against the pairs written here
// (NORM turns (2i, 2i+1), NEOX (i, i + d/2); ggml's rope types), to the rounding of a*c - b*s (two
// products and a difference: within 2 ulp of |a c| + |b s|, where tiers with FMA fuse one product);
// values between heads untouched; and rope_angles with a scale and per-pair factors against float64.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "model/model_kernels.h"

namespace nmkit::model {
namespace {

TEST(Rope, TurnsTheModesPairs) {
  std::mt19937 rng(25);
  std::uniform_real_distribution<float> value(-3.0f, 3.0f), angle(-3.2f, 3.2f);
  for (const bool neox : {false, true}) {
    for (int64_t hd : {2, 16, 24, 64, 256}) {
      const int64_t heads = 3, stride = hd + 4;  // heads apart by more than hd: the gap must stay untouched
      std::vector<float> x(static_cast<size_t>(heads * stride)), cos_sin(static_cast<size_t>(hd));
      for (float& v : x) v = value(rng);
      for (int64_t i = 0; i < hd / 2; ++i) {
        const float a = angle(rng);
        cos_sin[static_cast<size_t>(2 * i)] = std::cos(a);
        cos_sin[static_cast<size_t>(2 * i + 1)] = std::sin(a);
      }
      std::vector<float> want = x;
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < hd / 2; ++i) {
          const size_t first = static_cast<size_t>(h * stride + (neox ? i : 2 * i));
          const size_t second = first + static_cast<size_t>(neox ? hd / 2 : 1);
          const float c = cos_sin[static_cast<size_t>(2 * i)], s = cos_sin[static_cast<size_t>(2 * i + 1)];
          want[first] = x[first] * c - x[second] * s;
          want[second] = x[first] * s + x[second] * c;
        }
      }
      const std::vector<float> before = x;
      rope_rotate(x.data(), heads, stride, hd, cos_sin.data(), neox);
      for (size_t k = 0; k < x.size(); ++k) {
        const bool gap = static_cast<int64_t>(k) % stride >= hd;
        const float bound = gap ? 0.0f : 2 * 0x1p-23f * 2 * 3.0f;  // |a c| + |b s| <= 2 * 3
        ASSERT_NEAR(x[k], want[k], bound) << (neox ? "NEOX" : "NORM") << " head size " << hd << " value " << k;
        if (!gap) {
          ASSERT_NE(x[k], before[k]) << "value " << k << " not turned";
        }
      }
    }
  }
}

TEST(Rope, AnglesScaleAndFactors) {
  const int64_t hd = 64;
  std::vector<float> factors(static_cast<size_t>(hd / 2)), cos_sin(static_cast<size_t>(hd));
  for (int64_t i = 0; i < hd / 2; ++i) factors[static_cast<size_t>(i)] = 1.0f + 0.25f * static_cast<float>(i);
  for (const bool with_factors : {false, true}) {
    for (int64_t p : {0, 1, 7, 1000}) {
      rope_angles(p, hd, 500000.0f, 0.125f, with_factors ? factors.data() : nullptr, cos_sin.data());
      for (int64_t i = 0; i < hd / 2; ++i) {
        double theta = static_cast<double>(p) * 0.125 * std::pow(500000.0, -2.0 * static_cast<double>(i) / hd);
        if (with_factors) theta /= factors[static_cast<size_t>(i)];
        ASSERT_NEAR(cos_sin[static_cast<size_t>(2 * i)], std::cos(theta), 1e-7) << "p " << p << " pair " << i;
        ASSERT_NEAR(cos_sin[static_cast<size_t>(2 * i + 1)], std::sin(theta), 1e-7) << "p " << p << " pair " << i;
      }
    }
  }
}

}  // namespace
}  // namespace nmkit::model
