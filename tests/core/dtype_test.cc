#include <gtest/gtest.h>

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>
#include <limits>
#include <vector>

#include "nmkit/cpu.h"
#include "nmkit/dtype.h"

namespace nmkit {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float bits_to_test(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Independent f16 decode: sign * 2^(e-15) * (1 + m/1024), with subnormals 2^-14 * m/1024.
double f16_value(uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0x1f) return m ? NAN : s * INFINITY;
  if (e == 0) return s * std::ldexp(m / 1024.0, -14);
  return s * std::ldexp(1.0 + m / 1024.0, e - 15);
}

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i <= static_cast<int>(DType::Bool); ++i) {
    const auto d = static_cast<DType>(i);
    ASSERT_EQ(*dtype_from_name(dtype_name(d)), d);
  }
  const auto bad = dtype_from_name("F128");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), ErrorCode::InvalidArgument);
  EXPECT_EQ(bad.error().message(),
            "unknown dtype 'F128' (expected one of F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I64, I32, I16, I8, U64, "
            "U32, U16, U8, BOOL)");
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_TRUE(is_prunable(DType::BF16));
  EXPECT_FALSE(is_prunable(DType::I8));
}

TEST(DType, F16DecodeAllCodesMatchesFormula) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    const double expect = f16_value(static_cast<uint16_t>(h));
    if (std::isnan(expect)) {
      ASSERT_TRUE(std::isnan(f)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(f), expect) << h;
      ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;
    }
  }
}

// The bulk loop calls f16_to_f32, so it is checked against this file's own decoder (f16_value),
// not against the function it is built from.
TEST(DType, F16BulkConversionMatchesFormulaOnEveryCode) {
  std::vector<uint16_t> codes(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes[c] = static_cast<uint16_t>(c);
  std::vector<float> bulk(65536);
  convert_to_f32(DType::F16, codes.data(), bulk.data(), codes.size());
  for (uint32_t c = 0; c < 65536; ++c) {
    const double expect = f16_value(codes[c]);
    if (std::isnan(expect)) {
      ASSERT_TRUE(std::isnan(bulk[c])) << c;
      // A NaN keeps its sign and its 10 payload bits at the top of the f32 mantissa.
      ASSERT_EQ(bits(bulk[c]) >> 31, c >> 15) << c;
      ASSERT_EQ((bits(bulk[c]) >> 13) & 0x3ffu, c & 0x3ffu) << c;
    } else {
      ASSERT_EQ(static_cast<double>(bulk[c]), expect) << c;
      ASSERT_EQ(std::signbit(bulk[c]), (c & 0x8000) != 0) << c;
    }
  }
  convert_to_f32(DType::F16, nullptr, nullptr, 0);  // empty: must not touch the pointers
}

TEST(DType, F16EncodeRoundTripsEveryCode) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f)))) << h;
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << h;
  }
}

// f32 -> f16 rounding checked against the hardware's F16C conversion (round to nearest even) on
// random bit patterns, concentrated on the f16 range and its subnormal and overflow edges.
__attribute__((target("f16c"))) uint16_t hardware_f16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST(DType, F16EncodeMatchesF16c) {
  if (!cpu_features().f16c) GTEST_SKIP() << "no F16C";
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    // Exponents 2^-30 .. 2^17 cover zero, subnormal, normal and overflow results.
    const auto exponent = static_cast<uint32_t>(97 + rng() % 48);
    const auto u = static_cast<uint32_t>((rng() & 0x807fffffu) | (exponent << 23));
    float f;
    std::memcpy(&f, &u, 4);
    ASSERT_EQ(f32_to_f16(f), hardware_f16(f)) << std::hex << u;
  }
}

TEST(DType, Bf16RoundTripsEveryCodeAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(bits(f), h << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), h);
    }
  }
  // Halfway cases go to the even neighbour; just above halfway rounds up.
  EXPECT_EQ(f32_to_bf16(bits_to_test(0x3f808000u)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(bits_to_test(0x3f818000u)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(bits_to_test(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

// Nearest-even bf16 of a finite or infinite f32, chosen by comparing distances in double (not bit
// arithmetic, so it shares nothing with the library's rounding): of the two bf16 values around v,
// the nearer, on a tie the one with an even last bit; past the largest finite bf16 the upper
// neighbour counts as 2^128 (IEEE overflow rounding). NaNs are checked separately.
uint16_t nearest_even_bf16(float v) {
  const uint32_t u = bits(v);
  const uint16_t down = static_cast<uint16_t>(u >> 16);  // truncated toward zero
  if ((u & 0xffffu) == 0) return down;
  const uint16_t up = static_cast<uint16_t>(down + 1);  // one step away from zero
  const double sign = (u >> 31) ? -1.0 : 1.0;
  auto value = [&](uint16_t h) {
    if ((h & 0x7fffu) == 0x7f80u) return sign * std::ldexp(1.0, 128);
    return static_cast<double>(bf16_to_f32(h));
  };
  const double d_down = std::fabs(static_cast<double>(v) - value(down));
  const double d_up = std::fabs(static_cast<double>(v) - value(up));
  if (d_down != d_up) return d_down < d_up ? down : up;
  return (down & 1u) == 0 ? down : up;
}

TEST(DType, Bf16BulkRoundingMatchesNearestEven) {
  // Every top half with low halves around the rounding boundary (ties, just below and above), so
  // every sign, exponent (zero, denormal, inf, NaN) and tie-to-even case meets the bulk path.
  const uint32_t lows[] = {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x4321u};
  std::vector<float> values;
  for (uint32_t h = 0; h < 65536; ++h) {
    for (uint32_t low : lows) values.push_back(bits_to_test(h << 16 | low));
  }
  std::vector<float> rounded = values;
  std::vector<uint16_t> out(values.size());
  round_to_bf16(rounded.data(), out.data(), rounded.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) {
      // A NaN stays a NaN, quiet, with its sign and top payload bits.
      const uint32_t u = bits(values[i]);
      ASSERT_EQ(out[i], static_cast<uint16_t>((u >> 16) | 0x40u)) << "input bits " << std::hex << u;
      ASSERT_EQ(bits(rounded[i]), uint32_t{out[i]} << 16) << "input bits " << std::hex << u;
      continue;
    }
    const uint16_t expected = nearest_even_bf16(values[i]);
    ASSERT_EQ(f32_to_bf16(values[i]), expected) << "element-wise, input bits " << std::hex << bits(values[i]);
    ASSERT_EQ(out[i], expected) << "input bits " << std::hex << bits(values[i]);
    ASSERT_EQ(bits(rounded[i]), uint32_t{expected} << 16) << "input bits " << std::hex << bits(values[i]);
  }
  std::vector<float> again = values;
  round_to_bf16(again.data(), nullptr, again.size());  // bits are optional
  EXPECT_EQ(std::memcmp(again.data(), rounded.data(), again.size() * 4), 0);
  // The bits alone, from values left as they are: the same bits.
  std::vector<uint16_t> only_bits(values.size(), 0xdeadu);
  const std::vector<float> kept = values;
  f32_to_bf16_bits(values.data(), only_bits.data(), values.size());
  EXPECT_EQ(only_bits, out);
  EXPECT_EQ(std::memcmp(kept.data(), values.data(), values.size() * 4), 0);
}

TEST(DType, FirstNonFiniteFindsTheFirstNanOrInfinity) {
  std::vector<float> x(37, 1.0f);
  x[3] = std::numeric_limits<float>::max();     // finite, largest exponent below all-ones
  x[5] = -std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(first_non_finite(x.data(), 0), -1);
  EXPECT_EQ(first_non_finite(x.data(), static_cast<int64_t>(x.size())), -1);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> y = x;
    y[30] = bad;
    y[17] = bad;
    EXPECT_EQ(first_non_finite(y.data(), static_cast<int64_t>(y.size())), 17) << bad;
    EXPECT_EQ(first_non_finite(y.data(), 17), -1) << bad;  // n bounds the search
  }
}

// The check on stored bits agrees with converting to f32 and asking std::isfinite: every F16 and
// BF16 code, and F32 specials plus random bit patterns, at an awkward position of an odd length.
TEST(DType, FirstNonFiniteStoredAgreesWithConvertingFirst) {
  const int64_t n = 37, at = 21;
  for (DType dtype : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    std::vector<uint16_t> codes(n, dtype == DType::F16 ? uint16_t{0x3C00} : uint16_t{0x3F80});  // 1.0
    for (uint32_t code = 0; code <= 0xFFFF; ++code) {
      codes[at] = static_cast<uint16_t>(code);
      float value = 0;
      convert_to_f32(dtype, &codes[at], &value, 1);
      const int64_t want = std::isfinite(value) ? -1 : at;
      ASSERT_EQ(first_non_finite_stored(dtype, codes.data(), n), want) << std::hex << code;
      ASSERT_EQ(first_non_finite_stored(dtype, codes.data(), at), -1);  // n bounds the search
    }
  }
  std::mt19937 rng(7);
  std::vector<uint32_t> words(n, 0x3F800000u);
  std::vector<uint32_t> probes{0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0x7F7FFFFFu, 0x00000001u};
  for (int i = 0; i < 20000; ++i) probes.push_back(static_cast<uint32_t>(rng()));
  for (uint32_t word : probes) {
    words[at] = word;
    float value;
    std::memcpy(&value, &word, 4);
    ASSERT_EQ(first_non_finite_stored(DType::F32, words.data(), n), std::isfinite(value) ? -1 : at) << std::hex << word;
  }
}

}  // namespace
}  // namespace nmkit
