// SparseGPT and Wanda of one layer (docs/design.md section 12): the identities the design requires,
// agreement with an unblocked float64 oracle, the output-error property, and the bad-input rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "nmkit/calib.h"
#include "nmkit/prune.h"
#include "tests/calib/calib_data.h"
#include "tests/calib/calib_oracle.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

std::vector<Pattern> patterns() {
  return {Pattern{2, 4}, Pattern{6, 8}, Pattern{4, 8}, Pattern{1, 4}, Pattern{3, 7}, Pattern{5, 16},
          Pattern{30, 64}};
}

std::vector<double> scaled_identity(int64_t K, double c) {
  std::vector<double> h(K * K, 0.0);
  for (int64_t k = 0; k < K; ++k) h[k * K + k] = c;
  return h;
}

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.nbytes(), b.nbytes()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << what;
}

// Every group (tail included) keeps at most `keep` non-zeros.
void expect_compliant(const Tensor& t, Pattern p) {
  const std::vector<float> v = t.to_f32();
  const int64_t rows = t.rows(), K = t.cols();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < K; g += p.group) {
      int nz = 0;
      for (int64_t k = g; k < std::min(K, g + p.group); ++k) nz += v[r * K + k] != 0;
      ASSERT_LE(nz, p.keep) << "row " << r << " group at " << g;
    }
  }
}

// H = cI: U is diagonal, so no weight moves and the score orders like |w|: the magnitude mask with
// the kept weights unchanged, bit for bit, in every dtype, with ties (small integers) and tails.
TEST(SparseGpt, ScaledIdentityHessianGivesTheMagnitudeMask) {
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (Pattern p : patterns()) {
      for (int64_t K : {1, 17, 100, 300}) {
        for (bool ties : {false, true}) {
          const uint64_t seed = 100 + K + p.group * 7 + (ties ? 1 : 0);
          SCOPED_TRACE(test::seed_trace(seed) + " " + p.str() + " K=" + std::to_string(K) + " " +
                       std::string(dtype_name(dtype)) + (ties ? " ties" : ""));
          const int64_t rows = 9;
          const Tensor w = ties ? Tensor::from_f32(test::random_small_ints(rows * K, seed), {rows, K}, dtype)
                                : test::random_tensor(dtype, {rows, K}, seed);
          const std::vector<double> H = scaled_identity(K, 3.5);
          auto got = sparsegpt_prune(w.view(), H.data(), p, {}, "blk.0.attn_q");
          ASSERT_TRUE(got.ok()) << got.error().message();
          auto want = prune(w.view(), p, PruneMethod::Magnitude);
          ASSERT_TRUE(want.ok());
          expect_same_bits(got->pruned, want->pruned, "pruned");
          EXPECT_EQ(got->sums.pruned_count, want->sums.pruned_count);
          EXPECT_DOUBLE_EQ(got->sums.abs_kept, want->sums.abs_kept);
          EXPECT_DOUBLE_EQ(got->damping, 0.01);
        }
      }
    }
  }
}

// A diagonal H without damping: 1 / U[k,k] = sqrt(H[k,k]), so the mask is Wanda's with
// a[k] = sqrt(H[k,k]), and again no weight moves.
TEST(SparseGpt, DiagonalHessianWithoutDampingGivesTheWandaMask) {
  for (Pattern p : patterns()) {
    for (int64_t K : {3, 64, 129, 300}) {
      const uint64_t seed = 500 + K * 3 + p.group;
      SCOPED_TRACE(test::seed_trace(seed) + " " + p.str() + " K=" + std::to_string(K));
      const int64_t rows = 11;
      const Tensor w = test::random_tensor(DType::F32, {rows, K}, seed);
      const std::vector<float> d = test::random_floats(K, seed + 1, 0.01f, 50.0f);
      std::vector<double> H(K * K, 0.0);
      std::vector<float> a(K);
      for (int64_t k = 0; k < K; ++k) {
        H[k * K + k] = d[k];
        a[k] = static_cast<float>(std::sqrt(double(d[k])));
      }
      SparseGptOptions options;
      options.damping = 0;
      auto got = sparsegpt_prune(w.view(), H.data(), p, options, "blk.0.ffn_up");
      ASSERT_TRUE(got.ok()) << got.error().message();
      auto want = wanda_prune(w.view(), a, p);
      ASSERT_TRUE(want.ok());
      expect_same_bits(got->pruned, want->pruned, "pruned");
      // Not vacuous: the Wanda mask differs from the magnitude mask on these inputs.
      auto magnitude = prune(w.view(), p, PruneMethod::Magnitude);
      ASSERT_TRUE(magnitude.ok());
      if (K >= 64) {
        EXPECT_NE(std::memcmp(magnitude->pruned.data(), want->pruned.data(), want->pruned.nbytes()), 0);
      }
    }
  }
}

// The blocked implementation (lazy GEMM updates, LAPACK factor) against the unblocked float64
// oracle on a full Hessian. Both compute the same updates in float64 in a different order;
// the oracle's Gauss-Jordan inverse and LAPACK's dpotri differ by about cond(H) * eps64 ~ 1e-12
// relative here (cond ~ 1e3 with 1% damping), so weights agree to 1e-9 of the largest weight.
// The masks agree exactly: a float32 score would have to sit within 1e-12 of a rounding boundary.
TEST(SparseGpt, BlockedUpdatesEqualTheUnblockedOracle) {
  struct Case { Pattern p; int64_t K; int block; };
  const std::vector<Case> cases{{{2, 4}, 64, 128},  {{6, 8}, 300, 128}, {{3, 7}, 100, 128},
                                {{3, 7}, 100, 14},  {{4, 8}, 257, 16},  {{1, 4}, 130, 4},
                                {{30, 64}, 200, 128}, {{2, 4}, 33, 1}};
  for (const Case& c : cases) {
    const uint64_t seed = 900 + c.K + c.block;
    SCOPED_TRACE(test::seed_trace(seed) + " " + c.p.str() + " K=" + std::to_string(c.K) +
                 " block=" + std::to_string(c.block));
    const int64_t rows = 13, tokens = 400;
    const std::vector<float> X = test::correlated_inputs(tokens, c.K, 8, seed);
    const std::vector<double> H = test::naive_hessian(X, tokens, c.K);
    const Tensor w = test::random_tensor(DType::F32, {rows, c.K}, seed + 1);
    SparseGptOptions options;
    options.block_size = c.block;
    auto got = sparsegpt_prune(w.view(), H.data(), c.p, options, "layer");
    ASSERT_TRUE(got.ok()) << got.error().message();
    const test::OracleResult want =
        test::oracle_sparsegpt(w.to_f32(), rows, c.K, H, c.p, options.damping);
    const std::vector<float> g = got->pruned.to_f32();
    double max_w = 0;
    for (double v : want.W) max_w = std::max(max_w, std::fabs(v));
    ASSERT_GT(max_w, 0.0);
    int64_t moved = 0;
    const std::vector<float> w0 = w.to_f32();
    for (int64_t i = 0; i < rows * c.K; ++i) {
      ASSERT_EQ(g[i] != 0, want.kept[i] != 0 && want.W[i] != 0) << "element " << i;
      // float32 output: half an ulp of the value plus the float64 disagreement above.
      EXPECT_NEAR(g[i], want.W[i], std::fabs(want.W[i]) * 0x1p-24 + 1e-9 * max_w) << "element " << i;
      moved += (g[i] != 0 && g[i] != w0[i]);
    }
    EXPECT_GT(moved, 0);  // kept weights were updated: not the plain magnitude result
    expect_compliant(got->pruned, c.p);
  }
}

double direct_output_error(const std::vector<float>& X, int64_t tokens, const Tensor& w,
                           const Tensor& wp) {
  const std::vector<float> a = w.to_f32(), b = wp.to_f32();
  const int64_t rows = w.rows(), K = w.cols();
  double num = 0, den = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double y = 0, yp = 0;
      for (int64_t k = 0; k < K; ++k) {
        y += double(X[t * K + k]) * a[r * K + k];
        yp += double(X[t * K + k]) * b[r * K + k];
      }
      num += (y - yp) * (y - yp);
      den += y * y;
    }
  }
  return std::sqrt(num / den);
}

// The point of SparseGPT: on correlated inputs its output error is below magnitude's (and Wanda's)
// at every pattern. output_error() from H matches the direct computation from X.
TEST(SparseGpt, OutputErrorBelowMagnitudeOnCorrelatedInputs) {
  const int64_t rows = 48, K = 96, tokens = 1024;
  const uint64_t seed = 4242;
  SCOPED_TRACE(test::seed_trace(seed));
  const std::vector<float> X = test::correlated_inputs(tokens, K, 12, seed);
  InputStats stats(K, true);
  stats.add(X.data(), tokens);
  const std::vector<double> H = stats.hessian();
  const Tensor w = test::random_tensor(DType::F32, {rows, K}, seed + 1);
  for (Pattern p : {Pattern{6, 8}, Pattern{4, 8}, Pattern{2, 4}, Pattern{1, 4}, Pattern{3, 7}}) {
    SCOPED_TRACE(p.str());
    auto sgpt = sparsegpt_prune(w.view(), H.data(), p);
    auto wanda = wanda_prune(w.view(), stats.act_norms(), p);
    auto mag = prune(w.view(), p, PruneMethod::Magnitude);
    ASSERT_TRUE(sgpt.ok() && wanda.ok() && mag.ok());
    const double e_sgpt = *output_error(w.view(), sgpt->pruned.view(), H.data());
    const double e_wanda = *output_error(w.view(), wanda->pruned.view(), H.data());
    const double e_mag = *output_error(w.view(), mag->pruned.view(), H.data());
    // Trace form vs direct sums: both float64, relative difference ~1e-12.
    EXPECT_NEAR(e_mag, direct_output_error(X, tokens, w, mag->pruned), 1e-9);
    EXPECT_NEAR(e_sgpt, direct_output_error(X, tokens, w, sgpt->pruned), 1e-9);
    EXPECT_GT(e_mag, 0.0);
    EXPECT_LT(e_sgpt, e_mag);
    EXPECT_LT(e_sgpt, e_wanda);
    std::printf("%s output error: magnitude %.4f wanda %.4f sparsegpt %.4f\n", p.str().c_str(),
                e_mag, e_wanda, e_sgpt);
    expect_compliant(sgpt->pruned, p);
  }
}

// Inputs that are zero on every token: H[k,k] = 0 -> 1 and W[:,k] = 0, the rest proceeds.
TEST(SparseGpt, DeadInputsAreZeroedAndTheRestIsPruned) {
  const int64_t rows = 10, K = 40, tokens = 200;
  std::vector<float> X = test::correlated_inputs(tokens, K, 6, 77);
  for (int64_t t = 0; t < tokens; ++t) X[t * K + 3] = X[t * K + 17] = X[t * K + 39] = 0;
  const std::vector<double> H = test::naive_hessian(X, tokens, K);
  const Tensor w = test::random_tensor(DType::F32, {rows, K}, 78);
  auto got = sparsegpt_prune(w.view(), H.data(), Pattern{2, 4}, {}, "blk.1.attn_v");
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(got->dead_inputs, 3);
  const std::vector<float> g = got->pruned.to_f32();
  int64_t nonzero = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k : {3, 17, 39}) EXPECT_EQ(g[r * K + k], 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      EXPECT_TRUE(std::isfinite(g[r * K + k]));
      nonzero += g[r * K + k] != 0;
    }
  }
  EXPECT_EQ(nonzero, rows * K / 2 - 0);  // 2 of 4 kept everywhere; a dead input is pruned first
  const test::OracleResult want = test::oracle_sparsegpt(w.to_f32(), rows, K, H, Pattern{2, 4}, 0.01);
  for (int64_t i = 0; i < rows * K; ++i) EXPECT_NEAR(g[i], want.W[i], 1e-6) << i;
}

// Cholesky failure raises the damping tenfold, at most twice, then errors naming the layer.
TEST(SparseGpt, CholeskyFailureRaisesDampingThenErrors) {
  const Tensor w = Tensor::from_f32({1.0f, -2.0f, 0.5f, 3.0f}, {2, 2});
  struct Case { double off; double damping; };
  // H = [[1, off], [off, 1]] has eigenvalues 1 +- off; mean diagonal 1, so damping d fixes it
  // when d > off - 1.
  for (const Case& c : {Case{0.5, 0.01}, Case{1.05, 0.1}, Case{1.5, 1.0}}) {
    const std::vector<double> H{1, c.off, c.off, 1};
    auto got = sparsegpt_prune(w.view(), H.data(), Pattern{1, 2}, {}, "blk.2.ffn_down");
    ASSERT_TRUE(got.ok()) << got.error().message();
    EXPECT_DOUBLE_EQ(got->damping, c.damping) << c.off;
  }
  const std::vector<double> H{1, 3, 3, 1};
  auto bad = sparsegpt_prune(w.view(), H.data(), Pattern{1, 2}, {}, "blk.2.ffn_down");
  ASSERT_FALSE(bad.ok());
  const std::string& msg = bad.error().message();
  EXPECT_NE(msg.find("blk.2.ffn_down"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Cholesky"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0.01, 0.1 and 1"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(SparseGpt, NonFiniteHessianOrWeightIsAnErrorNamingLayerAndValue) {
  const int64_t K = 8;
  const Tensor w = test::random_tensor(DType::F32, {3, K}, 5);
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    std::vector<double> H = scaled_identity(K, 2.0);
    H[2 * K + 5] = H[5 * K + 2] = bad;
    auto got = sparsegpt_prune(w.view(), H.data(), Pattern{2, 4}, {}, "blk.7.attn_k");
    ASSERT_FALSE(got.ok());
    const std::string& msg = got.error().message();
    EXPECT_NE(msg.find("blk.7.attn_k"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[2, 5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::isnan(bad) ? "nan" : "inf"), std::string::npos) << msg;
  }
  std::vector<float> v = w.to_f32();
  v[K + 6] = std::numeric_limits<float>::quiet_NaN();
  const Tensor nan_w = Tensor::from_f32(v, {3, K});
  const std::vector<double> H = scaled_identity(K, 2.0);
  auto got = sparsegpt_prune(nan_w.view(), H.data(), Pattern{2, 4}, {}, "blk.7.attn_k");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message().find("row 1, column 6 is nan"), std::string::npos)
      << got.error().message();
}

TEST(SparseGpt, RejectsMismatchedShapes) {
  const Tensor w = test::random_tensor(DType::F32, {3, 8}, 5);
  auto factor = inverse_cholesky(scaled_identity(4, 1.0).data(), 4, 0.01, "x");
  ASSERT_TRUE(factor.ok());
  auto got = sparsegpt_prune_with(w.view(), *factor, Pattern{2, 4}, {}, "blk.0.attn_o");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.error().message().find("blk.0.attn_o"), std::string::npos);
  const Tensor w1 = test::random_tensor(DType::F32, {8}, 5);
  EXPECT_FALSE(sparsegpt_prune(w1.view(), scaled_identity(8, 1.0).data(), Pattern{2, 4}).ok());
}

// Odd groups and K not divisible by the group: 3:7 with K = 100 (a tail of 2 real elements keeps
// both), exactly min(keep, n) kept per group when no weight is zero.
TEST(SparseGpt, OddGroupsAndTailsKeepMinOfKeepAndTail) {
  for (Pattern p : {Pattern{3, 7}, Pattern{1, 3}, Pattern{5, 9}, Pattern{2, 4}}) {
    const int64_t rows = 7, K = 100, tokens = 300;
    const std::vector<float> X = test::correlated_inputs(tokens, K, 10, 31 + p.group);
    const std::vector<double> H = test::naive_hessian(X, tokens, K);
    const Tensor w = test::random_tensor(DType::BF16, {rows, K}, 32 + p.group);
    auto got = sparsegpt_prune(w.view(), H.data(), p, {}, "t");
    ASSERT_TRUE(got.ok()) << got.error().message();
    EXPECT_EQ(got->pruned.dtype(), DType::BF16);
    expect_compliant(got->pruned, p);
    int64_t kept_want = 0;
    for (int64_t g = 0; g < K; g += p.group) kept_want += std::min<int64_t>(p.keep, std::min<int64_t>(p.group, K - g));
    EXPECT_EQ(got->sums.total_count - got->sums.pruned_count, rows * kept_want) << p.str();
  }
}

}  // namespace
}  // namespace nmkit
