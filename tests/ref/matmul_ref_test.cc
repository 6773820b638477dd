// The reference linear layers: Y = X * W^T with one float64 accumulator per output over exactly
// the executed products in increasing k, rounded once to f32; and the theoretical speedups.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "nmkit/format.h"
#include "nmkit/prune.h"
#include "nmkit/reference.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// The definition written out independently: every k of the dense (decompressed) weight.
std::vector<float> plain_matmul(const Tensor& w, const Tensor& x) {
  const std::vector<float> wf = w.to_f32(), xf = x.to_f32();
  const int64_t rows = w.rows(), K = w.cols(), M = x.rows();
  std::vector<float> y(M * rows);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double{wf[r * K + k]} * double{xf[m * K + k]};
      y[m * rows + r] = static_cast<float>(acc);
    }
  }
  return y;
}

void expect_nonzero(const std::vector<float>& y) {
  bool any = false;
  for (float v : y) any = any || v != 0.0f;
  EXPECT_TRUE(any) << "an all-zero output cannot tell a written buffer from an unwritten one";
}

// For finite X, adding the zero products of pruned positions to a float64 sum changes nothing, so
// the sparse references equal the plain loop over the dense-masked weight bit for bit.
TEST(RefMatmul, DenseAndSparseMatchThePlainLoopBitForBit) {
  uint64_t seed = 4242;
  const std::vector<Pattern> patterns{{2, 4}, {4, 8}, {6, 8}, {1, 4}, {3, 7}, {1, 2}, {15, 16}};
  const DType dtypes[3] = {DType::F32, DType::F16, DType::BF16};
  int i = 0;
  for (const Pattern& p : patterns) {
    for (int64_t K : {int64_t{1}, int64_t{3}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{100}, int64_t{1000}}) {
      for (int64_t M : {int64_t{1}, int64_t{3}, int64_t{17}}) {
        ++seed;
        ++i;
        SCOPED_TRACE(test::seed_trace(seed));
        const int64_t rows = 1 + (i * 7) % 19;
        const DType wd = dtypes[i % 3], xd = dtypes[(i / 3) % 3];
        SCOPED_TRACE(p.str() + " K=" + std::to_string(K) + " M=" + std::to_string(M) + " rows=" +
                     std::to_string(rows) + " w " + std::string(dtype_name(wd)) + " x " +
                     std::string(dtype_name(xd)));
        const Tensor w = test::random_tensor(wd, {rows, K}, seed, -2.0f, 2.0f);
        const Tensor x = test::random_tensor(xd, {M, K}, seed + 1, -2.0f, 2.0f);
        auto pruned = prune(w.view(), p, PruneMethod::Magnitude);
        ASSERT_TRUE(pruned.ok());
        const Tensor& wm = pruned->pruned;
        const std::vector<float> expected = plain_matmul(wm, x);
        expect_nonzero(expected);

        auto dense = ref_dense_matmul(wm.view(), x.view());
        ASSERT_TRUE(dense.ok()) << dense.error().message();
        EXPECT_EQ(dense->y.shape(), (Shape{M, rows}));
        EXPECT_EQ(dense->y.dtype(), DType::F32);
        EXPECT_EQ(dense->y.to_f32(), expected);
        EXPECT_EQ(dense->theoretical_speedup, 1.0);

        auto nm = compress_nm(wm.view(), p);
        ASSERT_TRUE(nm.ok());
        auto ynm = ref_sparse_matmul(*nm, x.view());
        ASSERT_TRUE(ynm.ok()) << ynm.error().message();
        EXPECT_EQ(ynm->y.to_f32(), expected);
        const double groups = static_cast<double>((K + p.group - 1) / p.group);
        EXPECT_DOUBLE_EQ(ynm->theoretical_speedup, static_cast<double>(K) / (groups * p.keep));

        if (!find_violation(wm.view(), Pattern{2, 4})) {
          auto s = compress_sparse24(wm.view());
          ASSERT_TRUE(s.ok());
          auto y24 = ref_sparse_matmul(*s, x.view());
          ASSERT_TRUE(y24.ok()) << y24.error().message();
          EXPECT_EQ(y24->y.to_f32(), expected);
          const double k_pad = static_cast<double>((K + 3) / 4 * 4);
          EXPECT_DOUBLE_EQ(y24->theoretical_speedup, static_cast<double>(K) / (k_pad / 2));
        }
      }
    }
  }
}

TEST(RefMatmul, SpeedupsOfCommonShapes) {
  const Tensor w = Tensor::zeros(DType::F32, {2, 4096});
  const Tensor x = Tensor::zeros(DType::F32, {1, 4096});
  EXPECT_DOUBLE_EQ(ref_sparse_matmul(*compress_sparse24(w.view()), x.view())->theoretical_speedup, 2.0);
  EXPECT_DOUBLE_EQ(ref_sparse_matmul(*compress_nm(w.view(), {6, 8}), x.view())->theoretical_speedup,
                   8.0 / 6.0);
  // K = 4097: the tail group executes its padded slots too.
  const Tensor w2 = Tensor::zeros(DType::F32, {1, 4097});
  const Tensor x2 = Tensor::zeros(DType::F32, {1, 4097});
  EXPECT_DOUBLE_EQ(ref_sparse_matmul(*compress_sparse24(w2.view()), x2.view())->theoretical_speedup,
                   4097.0 / 2050.0);
  EXPECT_DOUBLE_EQ(ref_sparse_matmul(*compress_nm(w2.view(), {4, 8}), x2.view())->theoretical_speedup,
                   4097.0 / (513.0 * 4.0));
  // K = 0: nothing executed either way.
  const Tensor w0 = Tensor::zeros(DType::F32, {3, 0});
  const Tensor x0 = Tensor::zeros(DType::F32, {2, 0});
  auto y0 = ref_sparse_matmul(*compress_nm(w0.view(), {2, 4}), x0.view());
  ASSERT_TRUE(y0.ok());
  EXPECT_EQ(y0->theoretical_speedup, 1.0);
  EXPECT_EQ(y0->y.to_f32(), std::vector<float>(6, 0.0f));
}

// Only the executed products count: an infinity of X at a pruned position poisons the dense
// product (inf * 0 = NaN) but not the sparse ones, which never read it.
TEST(RefMatmul, SparseExecutesOnlyStoredProducts) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor w = Tensor::from_f32({1, 0, 0, 2, 0, 3, 0, 0}, {1, 8});
  const Tensor x = Tensor::from_f32({1, 5, inf, 1, 1, 1, 1, 1}, {1, 8});
  auto dense = ref_dense_matmul(w.view(), x.view());
  ASSERT_TRUE(dense.ok());
  EXPECT_TRUE(std::isnan(dense->y.to_f32()[0]));
  // Stored: group 0 -> positions {0, 3}; group 1 -> {4, 5} (5 non-zero, 4 the lowest zero).
  auto y24 = ref_sparse_matmul(*compress_sparse24(w.view()), x.view());
  ASSERT_TRUE(y24.ok());
  EXPECT_EQ(y24->y.to_f32()[0], 1.0f + 2.0f + 3.0f);
  auto ynm = ref_sparse_matmul(*compress_nm(w.view(), {2, 4}), x.view());
  ASSERT_TRUE(ynm.ok());
  EXPECT_EQ(ynm->y.to_f32()[0], 6.0f);
}

// Accumulation is float64 with a single rounding: 2^30 + 1 - 2^30 in float32 would give 0.
TEST(RefMatmul, AccumulatesInDoubleAndRoundsOnce) {
  const Tensor w = Tensor::from_f32({1, 1, 1, 0}, {1, 4});
  const Tensor x = Tensor::from_f32({0x1p30f, 1.0f, -0x1p30f, 0.0f}, {1, 4});
  EXPECT_EQ(ref_dense_matmul(w.view(), x.view())->y.to_f32()[0], 1.0f);
  const Tensor w24 = Tensor::from_f32({1, 1, 0, 0, 1, 0, 0, 0}, {1, 8});
  const Tensor x24 = Tensor::from_f32({0x1p30f, 1.0f, 0, 0, -0x1p30f, 0, 0, 0}, {1, 8});
  EXPECT_EQ(ref_sparse_matmul(*compress_sparse24(w24.view()), x24.view())->y.to_f32()[0], 1.0f);
}

TEST(RefMatmul, ErrorsNameTheOperandAndShape) {
  const Tensor w = Tensor::zeros(DType::F32, {4, 8});
  const Tensor x_bad_k = Tensor::zeros(DType::F32, {2, 7});
  const Tensor x_1d = Tensor::zeros(DType::F32, {8});
  const Tensor x_int = Tensor::zeros(DType::I32, {2, 8});
  const auto message = [](const Result<MatmulResult>& r) {
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message();
  };
  const Sparse24 packed24 = std::move(compress_sparse24(w.view()).value());
  const NMPacked packed_nm = std::move(compress_nm(w.view(), {2, 4}).value());
  for (const std::string& msg :
       {message(ref_dense_matmul(w.view(), x_bad_k.view())),
        message(ref_sparse_matmul(packed24, x_bad_k.view())),
        message(ref_sparse_matmul(packed_nm, x_bad_k.view()))}) {
    EXPECT_NE(msg.find("x"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2, 7]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("8"), std::string::npos) << msg;
  }
  EXPECT_NE(message(ref_dense_matmul(w.view(), x_1d.view())).find("2-D"), std::string::npos);
  EXPECT_NE(message(ref_dense_matmul(w.view(), x_int.view())).find("I32"), std::string::npos);
  EXPECT_NE(message(ref_dense_matmul(x_int.view(), w.view())).find("weight"), std::string::npos);
  Sparse24 corrupt = std::move(compress_sparse24(w.view()).value());
  corrupt.meta.as<uint8_t>()[0] = 0x33;
  EXPECT_NE(message(ref_sparse_matmul(corrupt, w.view())).find("nibble"), std::string::npos);
  NMPacked corrupt_nm = std::move(compress_nm(w.view(), {2, 4}).value());
  corrupt_nm.mask.as<uint8_t>()[0] = 0xFF;
  EXPECT_NE(message(ref_sparse_matmul(corrupt_nm, w.view())).find("mask bits"), std::string::npos);
}

}  // namespace
}  // namespace nmkit
