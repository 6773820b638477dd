// The quantized linear reference against an independent float64/int64 evaluation, and the key
// SlideSparse property: quantized slid weights times quantized lifted activations equal quantized
// original weights times quantized original activations, bit for bit (docs/design.md sections 5 and 6).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "nmkit/quant.h"
#include "nmkit/quant_linear.h"
#include "nmkit/slide.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// A keep:group-compliant weight of small integers, one +-absmax element per row so that inv is exact.
std::vector<float> integer_weight(int64_t rows, int64_t K, Pattern p, float absmax, uint64_t seed) {
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
        w[static_cast<size_t>(r * K + begin + pos[static_cast<size_t>(c)])] =
            static_cast<float>(static_cast<int>(rng() % 33) - 16);
      }
    }
    // The row's absmax: its first kept position becomes +-absmax (or column 0 if the row is empty).
    int64_t k = 0;
    while (k < K && w[static_cast<size_t>(r * K + k)] == 0.0f) ++k;
    w[static_cast<size_t>(r * K + (k < K ? k : 0))] = (rng() % 2 ? absmax : -absmax);
  }
  return w;
}

std::vector<float> integer_activations(int64_t M, int64_t K, float absmax, uint64_t seed) {
  auto x = test::random_small_ints(static_cast<size_t>(M * K), seed, -16, 16);
  for (int64_t m = 0; m < M; ++m) x[static_cast<size_t>(m * K + (m * 7) % K)] = absmax;
  return x;
}

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.nbytes())) << what;
}

TEST(QuantLinear, ReferenceMatchesIndependentSum) {
  const uint64_t seed = 31;
  SCOPED_TRACE(test::seed_trace(seed));
  const int64_t M = 3, rows = 5, K = 100;
  Tensor x = test::random_tensor(DType::F32, {M, K}, seed);
  Tensor w = test::random_tensor(DType::BF16, {rows, K}, seed + 1);
  Tensor bias = test::random_tensor(DType::F32, {rows}, seed + 2);
  for (QuantType type : {QuantType::Int8, QuantType::E4M3}) {
    auto qx = quantize_tokens(x.view(), type, "x");
    auto qw = quantize_weights(w.view(), type, "w");
    ASSERT_TRUE(qx.ok() && qw.ok());
    const TensorView bias_view = bias.view();
    auto y = ref_quant_linear(*qx, *qw, &bias_view);
    ASSERT_TRUE(y.ok()) << y.error().message();
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t r = 0; r < rows; ++r) {
        // Products and their sum are exact in float64 here (INT8: |sum| < 2^24; E4M3: 8-bit
        // significands, K = 100 terms within a 2^40 range), so the f32 rounding of the sum is
        // the only difference from the reference's f32 accumulation for E4M3: bound it.
        double sum = 0;
        for (int64_t k = 0; k < K; ++k) {
          const uint8_t a = qx->codes.as<uint8_t>()[m * K + k], b = qw->codes.as<uint8_t>()[r * K + k];
          sum += type == QuantType::Int8 ? double(int8_t(a)) * double(int8_t(b))
                                         : double(e4m3_to_f32(a)) * double(e4m3_to_f32(b));
        }
        const float sx = qx->scales.as<float>()[m], sw = qw->scales.as<float>()[r];
        const float got = y->as<float>()[m * rows + r];
        if (type == QuantType::Int8) {
          EXPECT_EQ(got, (sx * sw) * static_cast<float>(sum) + bias.as<float>()[r]);
        } else {
          // f32 accumulation of 100 terms: relative error at most 100 * 2^-24 of sum |products|;
          // c = 2 covers the final multiply and bias add.
          double abs_sum = 0;
          for (int64_t k = 0; k < K; ++k) {
            abs_sum += std::fabs(double(e4m3_to_f32(qx->codes.as<uint8_t>()[m * K + k])) *
                                 e4m3_to_f32(qw->codes.as<uint8_t>()[r * K + k]));
          }
          const double want = double(sx * sw) * sum + bias.as<float>()[r];
          const double tol = 2 * 102 * 0x1p-24 * (double(sx * sw) * abs_sum + std::fabs(bias.as<float>()[r]));
          EXPECT_NEAR(got, want, tol);
        }
      }
    }
  }
}

// The key property on every slidable pattern, INT8 and E4M3, dense and sparse24 operands.
TEST(QuantLinear, SlidEqualsOriginalBitForBit) {
  const uint64_t seed = 2026;
  SCOPED_TRACE(test::seed_trace(seed));
  uint64_t s = seed;
  for (Pattern p : {Pattern{2, 4}, Pattern{4, 6}, Pattern{6, 8}, Pattern{8, 10}, Pattern{3, 8}, Pattern{14, 16}}) {
    for (int64_t K : {1, 7, 100, 1000, 4097}) {
      for (QuantType type : {QuantType::Int8, QuantType::E4M3}) {
        SCOPED_TRACE(p.str() + " K=" + std::to_string(K) + " " + std::string(quant_type_name(type)));
        // absmax = qmax makes inv = 1: codes are the integers themselves (|v| <= 16 is exact in
        // e4m3), so every E4M3 sum is an integer below 2^24 and exact in any order.
        const float qmax = quant_max(type);
        const int64_t M = 3, rows = 4;
        const auto wv = integer_weight(rows, K, p, qmax, ++s);
        const auto xv = integer_activations(M, K, qmax, ++s);
        Tensor w = Tensor::from_f32(wv, {rows, K}, DType::BF16);
        Tensor x = Tensor::from_f32(xv, {M, K}, DType::BF16);
        auto g = SlideGeometry::make(p, K, 32);
        ASSERT_TRUE(g.ok());

        auto qx = quantize_tokens(x.view(), type, "x");
        auto qw = quantize_weights(w.view(), type, "w");
        ASSERT_TRUE(qx.ok() && qw.ok());
        auto y = ref_quant_linear(*qx, *qw);
        ASSERT_TRUE(y.ok()) << y.error().message();
        // Not trivially zero.
        bool nonzero = false;
        for (int64_t i = 0; i < M * rows; ++i) nonzero |= y->as<float>()[i] != 0.0f;
        ASSERT_TRUE(nonzero);

        auto slid = slide(w.view(), *g, "w");
        ASSERT_TRUE(slid.ok()) << slid.error().message();
        auto qx_lift = quantize_lift(x.view(), *g, type, "x");
        auto qw_slid = quantize_weights(slid->view(), type, "w'");
        ASSERT_TRUE(qx_lift.ok() && qw_slid.ok());
        auto y_slid = ref_quant_linear(*qx_lift, *qw_slid);
        ASSERT_TRUE(y_slid.ok()) << y_slid.error().message();
        expect_same_bits(*y, *y_slid, "dense slid");

        // Slid then quantized == quantized then slid (per-channel absmax is unchanged by sliding).
        auto slid_codes = slide(qw->codes.view(), *g, "codes");
        ASSERT_TRUE(slid_codes.ok());
        expect_same_bits(*slid_codes, qw_slid->codes, "slide(quantize(W))");

        // The same through sparse24 operands: the original when it is 2:4, always the slid one.
        auto packed = slide_sparse24(w.view(), *g, "w");
        ASSERT_TRUE(packed.ok()) << packed.error().message();
        auto qw_packed = quantize_weights(*packed, type, "w'");
        ASSERT_TRUE(qw_packed.ok());
        auto y_packed = ref_quant_linear(*qx_lift, *qw_packed);
        ASSERT_TRUE(y_packed.ok()) << y_packed.error().message();
        expect_same_bits(*y, *y_packed, "sparse24 slid");
        if (p == Pattern{2, 4}) {
          auto original = compress_sparse24(w.view(), "w");
          ASSERT_TRUE(original.ok());
          auto qo = quantize_weights(*original, type, "w");
          ASSERT_TRUE(qo.ok());
          auto y_original = ref_quant_linear(*qx, *qo);
          ASSERT_TRUE(y_original.ok());
          expect_same_bits(*y, *y_original, "sparse24 original");
        }
      }
    }
  }
}

TEST(QuantLinear, Int8SlidEqualsOriginalOnAnyData) {
  // INT8 accumulates exactly in int32, so the property holds for arbitrary (non-integer) data.
  const uint64_t seed = 808;
  SCOPED_TRACE(test::seed_trace(seed));
  const int64_t M = 5, rows = 6, K = 1000;
  const Pattern p{6, 8};
  auto wv = test::random_floats(static_cast<size_t>(rows * K), seed);
  for (size_t i = 0; i < wv.size(); ++i) {
    if (i % 8 == 3 || i % 8 == 6) wv[i] = 0.0f;  // 6:8
  }
  Tensor w = Tensor::from_f32(wv, {rows, K}, DType::F32);
  Tensor x = test::random_tensor(DType::BF16, {M, K}, seed + 1, -5.0f, 5.0f);
  auto g = SlideGeometry::make(p, K, 32);
  ASSERT_TRUE(g.ok());
  auto y = ref_quant_linear(*quantize_tokens(x.view(), QuantType::Int8), *quantize_weights(w.view(), QuantType::Int8));
  auto slid = slide(w.view(), *g);
  ASSERT_TRUE(y.ok() && slid.ok());
  auto y_slid = ref_quant_linear(*quantize_lift(x.view(), *g, QuantType::Int8),
                                 *quantize_weights(slid->view(), QuantType::Int8));
  ASSERT_TRUE(y_slid.ok());
  expect_same_bits(*y, *y_slid, "int8 any data");
}

TEST(QuantLinear, MismatchesAreErrors) {
  Tensor x = Tensor::zeros(DType::F32, {2, 8});
  Tensor w = Tensor::zeros(DType::F32, {3, 12});
  auto qx = quantize_tokens(x.view(), QuantType::Int8);
  auto qw = quantize_weights(w.view(), QuantType::Int8);
  auto qe = quantize_weights(x.view(), QuantType::E4M3);
  ASSERT_TRUE(qx.ok() && qw.ok() && qe.ok());
  auto y = ref_quant_linear(*qx, *qw);
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.error().message().find("K = 8"), std::string::npos) << y.error().message();
  auto mixed = ref_quant_linear(*qx, *qe);
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().message().find("e4m3"), std::string::npos) << mixed.error().message();
}

}  // namespace
}  // namespace nmkit
