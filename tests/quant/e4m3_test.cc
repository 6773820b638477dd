// The e4m3 codec against an independent definition: decoding from the OCP E4M3 formula with ldexp,
// encoding by exhaustive nearest search over the finite code values with ties to the even code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "nmkit/quant.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// OCP E4M3 ("e4m3fn"): value = (-1)^s * 2^(e-7) * (1 + m/8), subnormal (-1)^s * 2^-6 * m/8,
// S.1111.111 is NaN.
double oracle_decode(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -magnitude : magnitude;
}

// Nearest finite code magnitude (codes 0x00..0x7E), ties to the even code, then the sign of the
// input; NaN -> S.1111.111; infinities and anything beyond 448 saturate.
uint8_t oracle_encode(float value) {
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value)) return sign | 0x7F;
  const double a = std::fabs(static_cast<double>(value));
  if (std::isinf(a)) return sign | 0x7E;
  int best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7E; ++c) {
    const double d = std::fabs(a - oracle_decode(c));
    if (d < best_distance || (d == best_distance && (c & 1) == 0)) {
      best = c;
      best_distance = d;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

TEST(E4M3, AllCodesDecodeAndReencode) {
  for (int code = 0; code < 256; ++code) {
    const float value = e4m3_to_f32(static_cast<uint8_t>(code));
    const double expected = oracle_decode(code);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(value)) << code;
      EXPECT_EQ(f32_to_e4m3(value) & 0x7F, 0x7F) << code;
      continue;
    }
    EXPECT_EQ(static_cast<double>(value), expected) << "code " << code;
    EXPECT_EQ(std::signbit(value), (code & 0x80) != 0) << "code " << code;
    EXPECT_EQ(f32_to_e4m3(value), code) << "code " << code;
  }
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), 0.001953125f);
}

TEST(E4M3, EveryBf16Input) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float value = bf16_to_f32(static_cast<uint16_t>(bits));
    ASSERT_EQ(f32_to_e4m3(value), oracle_encode(value)) << "bf16 0x" << std::hex << bits << " = " << value;
  }
}

TEST(E4M3, MidpointsAndTheirNeighbours) {
  // Every rounding boundary between adjacent codes, and one float either side of it.
  for (int c = 0; c < 0x7E; ++c) {
    const double mid = (oracle_decode(c) + oracle_decode(c + 1)) / 2;
    const auto m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid);  // midpoints are exact in f32
    for (float v : {m, std::nextafter(m, 0.0f), std::nextafter(m, 1000.0f)}) {
      ASSERT_EQ(f32_to_e4m3(v), oracle_encode(v)) << v;
      ASSERT_EQ(f32_to_e4m3(-v), oracle_encode(-v)) << -v;
    }
  }
  for (float v : {448.0f, 449.0f, 463.99f, 464.0f, 464.01f, 480.0f, 1e30f,
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                  0.0f, -0.0f, 0.0009765625f, 0.0009765626f, 0.0009765624f}) {
    EXPECT_EQ(f32_to_e4m3(v), oracle_encode(v)) << v;
    EXPECT_EQ(f32_to_e4m3(-v), oracle_encode(-v)) << -v;
  }
}

TEST(E4M3, RandomFloats) {
  const uint64_t seed = 4242;
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> exponent(-14.0f, 10.0f);
  for (int n = 0; n < 20000; ++n) {
    const float v = std::exp2(exponent(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
    ASSERT_EQ(f32_to_e4m3(v), oracle_encode(v)) << v;
  }
}

}  // namespace
}  // namespace nmkit
