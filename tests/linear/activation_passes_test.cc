// The activation passes of the active tier (cpu/activation_kernels.h; ctest runs the suite once per
// NMKIT_ISA tier) against the per-value rules: f32_to_bf16 (include/nmkit/dtype.h) for the bf16 bits
// and the rounded values, std::isfinite on the input for the finite flag. Awkward sizes (docs/design.md
// section 8.5), the special values of the rule (ties, subnormals, a finite value that rounds to
// infinity, signalling and quiet NaNs of both signs), and a non-finite value at every position of
// short inputs, since the SIMD tiers judge their vector tails separately.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "nmkit/cpu.h"
#include "nmkit/dtype.h"
#include "src/cpu/kernel_table.h"

namespace nmkit {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Random bit patterns (every exponent, both signs) with one value in four drawn from the special
// cases; `finite_only` replaces NaN and infinity patterns with 1.0, `no_subnormals` subnormals with
// 2.0 (the AVX-512 bits pass runs vcvtne2ps2bf16 only on steps without one).
std::vector<float> awkward_values(size_t n, uint64_t seed, bool finite_only, bool no_subnormals = false) {
  static const uint32_t special[] = {
      0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00008000u, 0x00018000u,  // zeros, subnormals, ties
      0x3F808000u, 0x3F818000u, 0x3F807FFFu, 0xBF808001u,                             // ties to even, near ties
      0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F8000u,                                           // round to +-infinity
      0x7F800000u, 0xFF800000u, 0x7F800001u, 0xFFC00000u, 0x7FFFFFFFu, 0xFF80FFFFu};  // inf, NaNs
  std::mt19937_64 rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) {
    const uint64_t r = rng();
    uint32_t u = (r & 3) == 0 ? special[(r >> 2) % std::size(special)] : static_cast<uint32_t>(r >> 32);
    if (finite_only && (u & 0x7F800000u) == 0x7F800000u) u = 0x3F800000u;
    if (no_subnormals && (u & 0x7F800000u) == 0 && (u & 0x007FFFFFu) != 0) u = 0x40000000u;
    v = from_bits(u);
  }
  return x;
}

const cpu::ActivationKernels& passes() { return cpu::kernels_for(*active_tier()).activation; }

bool expected_finite(const std::vector<float>& x) {
  for (float v : x) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

constexpr size_t kSizes[] = {0, 1, 3, 15, 16, 17, 31, 33, 100, 1000, 4097};
constexpr float kSentinel = -12345.0f;
constexpr uint16_t kSentinelBits = 0xABCD;

TEST(ActivationPasses, Bf16BitsAndRoundedValuesFollowTheRule) {
  if (!active_tier().ok()) GTEST_SKIP() << "tier not supported here";
  for (size_t n : kSizes) {
    for (int mode = 0; mode < 3; ++mode) {
      const bool finite_only = mode == 1, no_subnormals = mode == 2;
      const uint64_t seed = 1000 + n * 3 + static_cast<uint64_t>(mode);
      const std::vector<float> x = awkward_values(n, seed, finite_only, no_subnormals);
      // One element past the end of each output: the passes must not write it.
      std::vector<float> rounded(n + 1, kSentinel);
      std::vector<uint16_t> bits(n + 1, kSentinelBits);
      const bool finite = passes().to_bf16(x.data(), n, rounded.data(), bits.data());
      EXPECT_EQ(finite, expected_finite(x)) << "n=" << n << " seed=" << seed;
      for (size_t i = 0; i < n; ++i) {
        const uint16_t want = f32_to_bf16(x[i]);
        ASSERT_EQ(bits[i], want) << "n=" << n << " seed=" << seed << " x bits 0x" << std::hex << to_bits(x[i]);
        ASSERT_EQ(to_bits(rounded[i]), static_cast<uint32_t>(want) << 16) << "n=" << n << " seed=" << seed;
      }
      EXPECT_EQ(rounded[n], kSentinel);
      EXPECT_EQ(bits[n], kSentinelBits);

      // Each output alone, and rounding in place, give the same values.
      std::vector<uint16_t> bits_only(n + 1, kSentinelBits);
      EXPECT_EQ(passes().to_bf16(x.data(), n, nullptr, bits_only.data()), finite);
      EXPECT_EQ(bits_only, bits) << "bits only, n=" << n;
      std::vector<float> rounded_only(n + 1, kSentinel);
      EXPECT_EQ(passes().to_bf16(x.data(), n, rounded_only.data(), nullptr), finite);
      std::vector<float> in_place = x;
      in_place.push_back(kSentinel);
      EXPECT_EQ(passes().to_bf16(in_place.data(), n, in_place.data(), nullptr), finite);
      for (size_t i = 0; i <= n; ++i) {
        ASSERT_EQ(to_bits(rounded_only[i]), to_bits(rounded[i])) << "rounded only, n=" << n << " i=" << i;
        ASSERT_EQ(to_bits(in_place[i]), to_bits(rounded[i])) << "in place, n=" << n << " i=" << i;
      }
      EXPECT_EQ(passes().to_bf16(x.data(), n, nullptr, nullptr), finite);
      EXPECT_EQ(passes().all_finite(x.data(), n), finite) << "all_finite n=" << n;
      // bf16 X is finite exactly when the f32 values it came from were (rounding to infinity aside).
      bool bits_finite = true;
      for (size_t i = 0; i < n; ++i) bits_finite = bits_finite && (bits[i] & 0x7F80u) != 0x7F80u;
      EXPECT_EQ(passes().all_finite_bf16(bits.data(), n), bits_finite) << "all_finite_bf16 n=" << n;
    }
  }
}

// A single NaN or infinity anywhere in a finite input, each pass, each output combination.
TEST(ActivationPasses, OneNonFiniteValueAtAnyPositionIsFound) {
  if (!active_tier().ok()) GTEST_SKIP() << "tier not supported here";
  for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{23}, size_t{64}, size_t{65}, size_t{130}}) {
    const std::vector<float> clean = awkward_values(n, 77 + n, true);
    ASSERT_TRUE(passes().all_finite(clean.data(), n)) << "n=" << n;
    for (size_t at = 0; at < n; ++at) {
      for (uint32_t bad : {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFF800001u}) {
        std::vector<float> x = clean;
        x[at] = from_bits(bad);
        std::vector<float> rounded(n);
        std::vector<uint16_t> bits(n);
        EXPECT_FALSE(passes().all_finite(x.data(), n)) << "n=" << n << " at=" << at;
        std::vector<uint16_t> clean_bits(n);
        passes().to_bf16(clean.data(), n, nullptr, clean_bits.data());
        for (auto& h : clean_bits) {
          if ((h & 0x7F80u) == 0x7F80u) h = 0x3F80;  // a finite value that rounded to infinity
        }
        clean_bits[at] = static_cast<uint16_t>(bad >> 16);
        EXPECT_FALSE(passes().all_finite_bf16(clean_bits.data(), n)) << "n=" << n << " at=" << at;
        if (at > 0) {
          EXPECT_TRUE(passes().all_finite_bf16(clean_bits.data(), at)) << "n=" << at;
        }
        EXPECT_FALSE(passes().to_bf16(x.data(), n, rounded.data(), bits.data())) << "n=" << n << " at=" << at;
        EXPECT_FALSE(passes().to_bf16(x.data(), n, nullptr, bits.data())) << "n=" << n << " at=" << at;
        EXPECT_FALSE(passes().to_bf16(x.data(), n, rounded.data(), nullptr)) << "n=" << n << " at=" << at;
        // The value past the end is not read: a NaN there leaves a clean prefix finite.
        if (at > 0) {
          EXPECT_TRUE(passes().to_bf16(x.data(), at, rounded.data(), bits.data())) << "n=" << at;
        }
      }
    }
  }
}

// X on token lanes against its definition (cpu/activation_kernels.h), bit for bit: every token count
// around a slab edge, K around the 16-wide steps (with K_x padded past it as the packs pad it, and
// K = K_x), a row stride wider than K, and bytes past the last slab left alone.
TEST(ActivationPasses, TokenLanesHoldXTransposedWithZerosPastTokensAndK) {
  if (!active_tier().ok()) GTEST_SKIP() << "tier not supported here";
  constexpr int64_t kLanes = 16;
  for (int64_t tokens : {1, 3, 15, 16, 17, 33, 100}) {
    for (int64_t K : {1, 15, 16, 17, 31, 32, 100, 576}) {
      for (int64_t pad : {0, 1}) {
        const int64_t K_x = ((K + 15) / 16 + pad) * 16;  // 16-wide steps, one more with pad (packs pad to 32)
        const int64_t ldx = K + 3 * pad;                  // a strided X too
        const uint64_t seed = 5000 + static_cast<uint64_t>(tokens * 1000 + K * 2 + pad);
        // Random bit patterns: a NaN or a negative zero must be moved as it is, not computed with.
        const std::vector<float> x = awkward_values(static_cast<size_t>(tokens * ldx), seed, false);
        const int64_t slabs = (tokens + kLanes - 1) / kLanes;
        std::vector<float> xt(static_cast<size_t>(slabs * K_x * kLanes + 1), kSentinel);
        passes().to_token_lanes(x.data(), ldx, tokens, K, K_x, xt.data());
        for (int64_t s = 0; s < slabs; ++s) {
          for (int64_t k = 0; k < K_x; ++k) {
            for (int64_t t = 0; t < kLanes; ++t) {
              const int64_t m = s * kLanes + t;
              const float want = m < tokens && k < K ? x[static_cast<size_t>(m * ldx + k)] : 0.0f;
              ASSERT_EQ(to_bits(xt[static_cast<size_t>((s * K_x + k) * kLanes + t)]), to_bits(want))
                  << "tokens=" << tokens << " K=" << K << " K_x=" << K_x << " ldx=" << ldx << " token " << m << " k " << k
                  << " seed=" << seed;
            }
          }
        }
        EXPECT_EQ(xt.back(), kSentinel) << "tokens=" << tokens << " K=" << K;
      }
    }
  }
}

}  // namespace
}  // namespace nmkit
