// ADMM N:M mask search of one layer (docs/design.md 12.1): the identities the design requires (all-ones
// mask, H = I, frozen mask), agreement with the scalar reference (src/ref/admm_ref.cc), and the
// bad-input rules.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "nmkit/calib.h"
#include "nmkit/prune.h"
#include "ref/admm_ref.h"
#include "tests/calib/calib_oracle.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

// H = X^T X of `tokens` random inputs whose features are correlated (each is a random mix of a
// few shared factors plus its own noise), as a layer's inputs are: a diagonal-dominant H would make
// every method pick the Wanda mask.
std::vector<double> correlated_hessian(int64_t K, int64_t tokens, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const int64_t factors = std::max<int64_t>(2, K / 3);
  std::vector<double> mix(static_cast<size_t>(factors * K));
  for (double& m : mix) m = normal(rng);
  std::vector<float> X(static_cast<size_t>(tokens * K));
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> f(static_cast<size_t>(factors));
    for (double& v : f) v = normal(rng);
    for (int64_t k = 0; k < K; ++k) {
      double v = 0.3 * normal(rng);
      for (int64_t j = 0; j < factors; ++j) v += f[j] * mix[j * K + k];
      X[t * K + k] = static_cast<float>(v);
    }
  }
  return test::naive_hessian(X, tokens, K);
}

// H + damping * mean(diag H) * I, as every method damps it (no dead inputs in these tests).
std::vector<double> damped(std::vector<double> h, int64_t K, double damping) {
  double mean = 0;
  for (int64_t k = 0; k < K; ++k) mean += h[k * K + k] / static_cast<double>(K);
  for (int64_t k = 0; k < K; ++k) h[k * K + k] += damping * mean;
  return h;
}

// (w - v) Hd (w - v)^T of one row.
double row_objective(const float* w, const float* v, const std::vector<double>& hd, int64_t K) {
  double s = 0;
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < K; ++j) s += (double(w[i]) - v[i]) * hd[i * K + j] * (double(w[j]) - v[j]);
  }
  return s;
}

// The least-squares optimum of one row on the support `kept`: v_S solves Hd[S,S] v_S = Hd[S,:] w,
// by the oracle's Gauss-Jordan inverse. Returns the row (0 off the support).
std::vector<double> least_squares_row(const float* w, const uint8_t* kept, const std::vector<double>& hd,
                                      int64_t K) {
  std::vector<int64_t> s;
  for (int64_t k = 0; k < K; ++k) {
    if (kept[k]) s.push_back(k);
  }
  const auto n = static_cast<int64_t>(s.size());
  std::vector<double> a(static_cast<size_t>(n * n)), rhs(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) a[i * n + j] = hd[s[i] * K + s[j]];
    for (int64_t k = 0; k < K; ++k) rhs[i] += hd[s[i] * K + k] * double(w[k]);
  }
  const std::vector<double> inv = test::naive_inverse(a, n);
  std::vector<double> v(static_cast<size_t>(K), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) v[s[i]] += inv[i * n + j] * rhs[j];
  }
  return v;
}

// The kept-weight mask of a pruned tensor (non-zero = kept; the tests' weights are never 0).
std::vector<uint8_t> mask_of(const Tensor& t) {
  const std::vector<float> v = t.to_f32();
  std::vector<uint8_t> m(v.size());
  for (size_t i = 0; i < v.size(); ++i) m[i] = v[i] != 0;
  return m;
}

// With every weight kept, Z = W + U = Wn, U = 0 and the W step adds rho * 0 * A^-1: the weight comes
// back as float(float(w * d) / d), within 2 roundings (2^-23 relative) of w.
TEST(Admm, AllOnesMaskLeavesTheWeightUnchanged) {
  for (int64_t K : {1, 16, 37}) {
    const uint64_t seed = 40 + K;
    SCOPED_TRACE(test::seed_trace(seed) + " K=" + std::to_string(K));
    const int64_t rows = 5;
    const Tensor w = test::random_tensor(DType::F32, {rows, K}, seed);
    const std::vector<double> H = correlated_hessian(K, 64, seed + 1);
    const std::vector<uint8_t> ones(static_cast<size_t>(rows * K), 1);
    AdmmOptions options;
    options.frozen_mask = &ones;
    options.iterations = 6;
    auto got = admm_prune(w.view(), H.data(), Pattern{2, 4}, options, "blk.0.attn_q");
    ASSERT_TRUE(got.ok()) << got.error().message();
    const std::vector<float> a = w.to_f32(), b = got->pruned.to_f32();
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NE(b[i], 0.0f) << i;
      EXPECT_LE(std::fabs(a[i] - b[i]), std::ldexp(std::fabs(a[i]), -23)) << i;
    }
    EXPECT_EQ(got->sums.pruned_count, 0);
  }
}

// H = cI: Hn = I, so every element evolves alone; a kept one stays at its weight, a pruned one
// shrinks (rho >= 1), so the order inside every group is |w|'s: the magnitude mask, ties included.
TEST(Admm, IdentityHessianGivesTheMagnitudeMask) {
  for (Pattern p : {Pattern{2, 4}, Pattern{6, 8}, Pattern{4, 8}, Pattern{1, 4}, Pattern{3, 7}, Pattern{5, 16}}) {
    for (int64_t K : {1, 17, 100}) {
      for (bool ties : {false, true}) {
        const uint64_t seed = 200 + K + p.group * 7 + (ties ? 1 : 0);
        SCOPED_TRACE(test::seed_trace(seed) + " " + p.str() + " K=" + std::to_string(K) + (ties ? " ties" : ""));
        const int64_t rows = 9;
        std::vector<float> values = ties ? test::random_small_ints(rows * K, seed) : test::random_floats(rows * K, seed);
        for (float& v : values) v = v == 0 ? 0.5f : v;  // a kept 0 would read as pruned
        const Tensor w = Tensor::from_f32(values, {rows, K});
        std::vector<double> H(static_cast<size_t>(K * K), 0.0);
        for (int64_t k = 0; k < K; ++k) H[k * K + k] = 2.5;
        auto got = admm_prune(w.view(), H.data(), p, {}, "blk.0.ffn_down");
        ASSERT_TRUE(got.ok()) << got.error().message();
        auto want = prune(w.view(), p, PruneMethod::Magnitude);
        ASSERT_TRUE(want.ok());
        EXPECT_EQ(mask_of(got->pruned), mask_of(want->pruned));
        EXPECT_EQ(got->sums.pruned_count, want->sums.pruned_count);
      }
    }
  }
}

// With the support frozen the problem is convex, and ADMM converges to its least-squares solution.
// Float64 iterations; the tolerance 1e-6 of the largest weight is far above float64 rounding and far
// below the first iterations' distance (checked non-vacuous below).
TEST(Admm, FrozenMaskConvergesToTheLeastSquaresSolution) {
  for (int64_t K : {8, 24}) {
    const uint64_t seed = 300 + K;
    SCOPED_TRACE(test::seed_trace(seed) + " K=" + std::to_string(K));
    const int64_t rows = 4;
    const std::vector<float> wf = test::random_floats(rows * K, seed);
    const Tensor w = Tensor::from_f32(wf, {rows, K});
    const std::vector<double> H = correlated_hessian(K, 4 * K, seed + 1);
    std::mt19937_64 rng(seed + 2);
    std::vector<uint8_t> mask(static_cast<size_t>(rows * K));
    for (auto& m : mask) m = static_cast<uint8_t>(rng() % 3 != 0);
    AdmmOptions options;
    options.frozen_mask = &mask;
    options.double_precision = true;
    options.iterations = 2000;
    auto got = admm_prune(w.view(), H.data(), Pattern{2, 4}, options);
    options.iterations = 3;
    auto early = admm_prune(w.view(), H.data(), Pattern{2, 4}, options);
    ASSERT_TRUE(got.ok() && early.ok());
    const std::vector<double> hd = damped(H, K, options.damping);
    const std::vector<float> v = got->pruned.to_f32(), e = early->pruned.to_f32();
    double far = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<double> ls = least_squares_row(wf.data() + r * K, mask.data() + r * K, hd, K);
      for (int64_t k = 0; k < K; ++k) {
        EXPECT_NEAR(v[r * K + k], ls[k], 1e-6) << "row " << r << " column " << k;
        far = std::max(far, std::fabs(e[r * K + k] - ls[k]));
      }
    }
    EXPECT_GT(far, 1e-3);
  }
}

// The float64 iteration against the scalar reference: the same masks, values to 1e-9 of the
// largest weight (the two compute the W step in a different order: A^-1 explicit against Cholesky
// solves, ~cond(A) * eps64 apart). Awkward sizes, tails and a dead input included.
TEST(Admm, DoublePrecisionMatchesTheScalarReference) {
  for (Pattern p : {Pattern{2, 4}, Pattern{6, 8}, Pattern{3, 7}}) {
    for (int64_t K : {1, 3, 17, 100}) {
      const uint64_t seed = 1100 + K + p.group;
      SCOPED_TRACE(test::seed_trace(seed) + " " + p.str() + " K=" + std::to_string(K));
      const int64_t rows = 7;
      const std::vector<float> wf = test::random_floats(rows * K, seed);
      const Tensor w = Tensor::from_f32(wf, {rows, K});
      std::vector<double> H = correlated_hessian(K, 2 * K + 4, seed + 1);
      if (K >= 17) {  // input 5 is zero on every token
        for (int64_t k = 0; k < K; ++k) H[5 * K + k] = H[k * K + 5] = 0;
      }
      AdmmOptions options;
      options.double_precision = true;
      options.iterations = 12;
      options.schedule = 8;
      options.rho = 0.7;
      auto got = admm_prune(w.view(), H.data(), p, options);
      ASSERT_TRUE(got.ok()) << got.error().message();
      const AdmmRefResult want = ref_admm(wf, rows, K, H, p, options);
      const std::vector<float> v = got->pruned.to_f32();
      int64_t kept = 0;
      for (size_t i = 0; i < v.size(); ++i) {
        ASSERT_EQ(v[i] != 0, want.kept[i] != 0) << "element " << i;
        EXPECT_NEAR(v[i], want.values[i], 1e-9 + 1e-6 * std::fabs(want.values[i])) << "element " << i;
        kept += want.kept[i];
      }
      EXPECT_GT(kept, 0);
      EXPECT_EQ(got->dead_inputs, K >= 17 ? 1 : 0);
    }
  }
}

// Float32 iterations find masks as good as float64's: the objectives after the refit agree to 1%.
TEST(Admm, SinglePrecisionFindsMasksAsGoodAsDouble) {
  const int64_t rows = 32, K = 64;
  const uint64_t seed = 1500;
  SCOPED_TRACE(test::seed_trace(seed));
  const std::vector<float> wf = test::random_floats(rows * K, seed);
  const Tensor w = Tensor::from_f32(wf, {rows, K});
  const std::vector<double> H = correlated_hessian(K, 4 * K, seed + 1);
  const std::vector<double> hd = damped(H, K, 0.01);
  double objective[2] = {};
  for (bool dp : {false, true}) {
    AdmmOptions options;
    options.double_precision = dp;
    auto got = admm_prune(w.view(), H.data(), Pattern{2, 4}, options);
    ASSERT_TRUE(got.ok());
    ASSERT_TRUE(reconstruct_kept(w.view(), got->pruned, H.data(), 40).ok());
    const std::vector<float> v = got->pruned.to_f32();
    for (int64_t r = 0; r < rows; ++r) objective[dp] += row_objective(wf.data() + r * K, v.data() + r * K, hd, K);
  }
  EXPECT_GT(objective[1], 0);
  EXPECT_NEAR(objective[0], objective[1], 0.01 * objective[1]);
}

TEST(Admm, BadInputsAreNamedErrors) {
  const int64_t rows = 3, K = 8;
  std::vector<float> wf = test::random_floats(rows * K, 9);
  const std::vector<double> H = correlated_hessian(K, 32, 10);
  wf[1 * K + 6] = std::numeric_limits<float>::quiet_NaN();
  const Tensor bad = Tensor::from_f32(wf, {rows, K});
  auto r = admm_prune(bad.view(), H.data(), Pattern{2, 4}, {}, "blk.3.ffn_up");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "layer 'blk.3.ffn_up': weight at row 1, column 6 is nan");

  const Tensor w = test::random_tensor(DType::F32, {rows, K}, 11);
  AdmmOptions options;
  options.rho = 0;
  r = admm_prune(w.view(), H.data(), Pattern{2, 4}, options, "blk.0.attn_v");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("rho must be finite and > 0, got 0"), std::string::npos) << r.error().message();

  auto factor = admm_factor(H.data(), K);
  ASSERT_TRUE(factor.ok());
  const Tensor wide = test::random_tensor(DType::F32, {rows, K + 1}, 12);
  r = admm_prune_with(wide.view(), *factor, Pattern{2, 4}, {}, "blk.0.attn_o");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("the ADMM factor is for 8 inputs"), std::string::npos) << r.error().message();

  const std::vector<uint8_t> short_mask(5, 1);
  options = {};
  options.frozen_mask = &short_mask;
  r = admm_prune_with(w.view(), *factor, Pattern{2, 4}, options);
  ASSERT_FALSE(r.ok());
  options = {};
  options.iterations = 0;
  r = admm_prune_with(w.view(), *factor, Pattern{2, 4}, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("iterations >= 1"), std::string::npos);
}

}  // namespace
}  // namespace nmkit
