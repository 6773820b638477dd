// swiglu (src/model/model_kernels.h) against its formula written here on the library's exp_inplace,
// bit for bit (the kernel's vector form must keep the operations and their order), and against
// float64 within exp_inplace's error; geglu against float64 GELU-tanh and its value alone; on the ISA
// tier the suite runs (NMKIT_ISA).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "model/model_kernels.h"

namespace nmkit::model {
namespace {

TEST(Swiglu, MatchesItsFormulaBitForBit) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> wide(-120.0f, 120.0f), narrow(-4.0f, 4.0f);
  for (int64_t n : {1, 15, 16, 17, 100, 1536}) {
    std::vector<float> gate(static_cast<size_t>(n)), up(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      // Mostly the range real activations take, some past exp's clamps (-87.3, 88.7) on either side.
      gate[static_cast<size_t>(i)] = i % 7 == 3 ? wide(rng) : narrow(rng);
      up[static_cast<size_t>(i)] = narrow(rng);
    }
    std::vector<float> out(static_cast<size_t>(n), NAN);
    swiglu(gate.data(), up.data(), n, out.data());
    std::vector<float> e(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) e[static_cast<size_t>(i)] = -gate[static_cast<size_t>(i)];
    exp_inplace(e.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      const float want = gate[k] / (1.0f + e[k]) * up[k];
      uint32_t a, b;
      std::memcpy(&a, &out[k], 4);
      std::memcpy(&b, &want, 4);
      ASSERT_EQ(a, b) << "n " << n << " i " << i << ": gate " << gate[k] << " up " << up[k] << " -> " << out[k]
                      << ", the formula " << want;
      const double exact = gate[k] / (1.0 + std::exp(-static_cast<double>(gate[k]))) * up[k];
      ASSERT_NEAR(out[k], exact, 1e-6 * (1.0 + std::fabs(exact))) << "n " << n << " i " << i;
    }
  }
}

// geglu: gelu_tanh(g) * u with gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) in
// float64, within 1e-6 relative plus the float32 rounding of the exponent's argument (its |2y| times
// a few u makes e^-2y off by as much relative, weighted by the sigmoid's slope at most 1/4); and each
// value equal bit for bit to the kernel's result on that value alone (vector lanes and the tail run
// the same operations, so a token's activation does not depend on its neighbours).
TEST(Geglu, MatchesGeluTanhAndItsValueAlone) {
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> wide(-60.0f, 60.0f), narrow(-5.0f, 5.0f);
  for (int64_t n : {1, 15, 16, 17, 100, 2048}) {
    std::vector<float> gate(static_cast<size_t>(n)), up(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      gate[static_cast<size_t>(i)] = i % 7 == 3 ? wide(rng) : narrow(rng);
      up[static_cast<size_t>(i)] = narrow(rng);
    }
    std::vector<float> out(static_cast<size_t>(n), NAN);
    geglu(gate.data(), up.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      const double g = gate[k], y = std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g);
      const double exact = 0.5 * g * (1.0 + std::tanh(y)) * up[k];
      const double tol = 1e-6 * (1.0 + std::fabs(exact)) + 8 * 0x1p-24 * std::fabs(2 * y) * 0.25 * std::fabs(g * up[k]);
      ASSERT_NEAR(out[k], exact, tol) << "n " << n << " i " << i << ": gate " << g << " up " << up[k];
      float alone = NAN;
      geglu(&gate[k], &up[k], 1, &alone);
      uint32_t a, b;
      std::memcpy(&a, &out[k], 4);
      std::memcpy(&b, &alone, 4);
      ASSERT_EQ(a, b) << "n " << n << " i " << i << ": " << out[k] << " in the call, " << alone << " alone";
    }
  }
}

}  // namespace
}  // namespace nmkit::model
