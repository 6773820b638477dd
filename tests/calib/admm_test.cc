// ADMM N:M mask search of one layer (docs/design.md 12.1): the identities the design requires (all-ones
// mask, H = I, frozen mask), tiny rows against the brute-force optimum over every mask, agreement
// with the scalar reference (src/ref/admm_ref.cc), and the bad-input rules.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "nmkit/calib.h"
#include "nmkit/prune.h"
#include "ref/admm_ref.h"
#include "tests/calib/calib_oracle.h"
#include "tests/calib/least_squares_oracle.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

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
    const std::vector<double> H = test::correlated_hessian(K, 64, seed + 1);
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

// H = cI: Hn = I, so every element evolves alone. With a constant rho >= 1 a kept element stays at
// its weight and a pruned one shrinks, so the order inside every group is |w|'s: the magnitude mask,
// ties included. The default schedule starts below rho = 1 (pruned elements then grow past their
// weight, which lets masks change) and keeps the pruned sum of squares, the objective under H = cI,
// within 2% of the magnitude mask's, the optimum.
TEST(Admm, IdentityHessianGivesTheMagnitudeMask) {
  for (Pattern p : {Pattern{2, 4}, Pattern{6, 8}, Pattern{4, 8}, Pattern{1, 4}, Pattern{3, 7}, Pattern{5, 16}}) {
    for (int64_t K : {1, 17, 100}) {
      for (bool ties : {false, true}) {
        const uint64_t seed = 200 + K + p.group * 7 + (ties ? 1 : 0);
        SCOPED_TRACE(test::seed_trace(seed) + " " + p.str() + " K=" + std::to_string(K) + (ties ? " ties" : ""));
        const int64_t rows = 9;
        std::vector<float> values =
            ties ? test::random_small_ints(rows * K, seed) : test::random_floats(rows * K, seed);
        for (float& v : values) v = v == 0 ? 0.5f : v;  // a kept 0 would read as pruned
        const Tensor w = Tensor::from_f32(values, {rows, K});
        std::vector<double> H(static_cast<size_t>(K * K), 0.0);
        for (int64_t k = 0; k < K; ++k) H[k * K + k] = 2.5;
        AdmmOptions constant;
        constant.rho = 1;
        constant.rho_growth = 1;
        auto got = admm_prune(w.view(), H.data(), p, constant, "blk.0.ffn_down");
        ASSERT_TRUE(got.ok()) << got.error().message();
        auto want = prune(w.view(), p, PruneMethod::Magnitude);
        ASSERT_TRUE(want.ok());
        EXPECT_EQ(mask_of(got->pruned), mask_of(want->pruned));
        EXPECT_EQ(got->sums.pruned_count, want->sums.pruned_count);
        auto scheduled = admm_prune(w.view(), H.data(), p, {}, "blk.0.ffn_down");
        ASSERT_TRUE(scheduled.ok());
        EXPECT_EQ(scheduled->sums.pruned_count, want->sums.pruned_count);
        EXPECT_LE(scheduled->sums.sq_pruned, want->sums.sq_pruned * 1.02 + 1e-12);
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
    const std::vector<double> H = test::correlated_hessian(K, 4 * K, seed + 1);
    std::mt19937_64 rng(seed + 2);
    std::vector<uint8_t> mask(static_cast<size_t>(rows * K));
    for (auto& m : mask) m = static_cast<uint8_t>(rng() % 3 != 0);
    AdmmOptions options;
    options.frozen_mask = &mask;
    options.double_precision = true;
    options.rho = 1;  // a constant penalty: convex ADMM converges for any rho > 0
    options.rho_growth = 1;
    options.iterations = 2000;
    auto got = admm_prune(w.view(), H.data(), Pattern{2, 4}, options);
    options.iterations = 3;
    auto early = admm_prune(w.view(), H.data(), Pattern{2, 4}, options);
    ASSERT_TRUE(got.ok() && early.ok());
    const std::vector<double> hd = test::damped(H, K, options.damping);
    const std::vector<float> v = got->pruned.to_f32(), e = early->pruned.to_f32();
    double far = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<double> ls = test::least_squares_row(wf.data() + r * K, mask.data() + r * K, hd, K);
      for (int64_t k = 0; k < K; ++k) {
        EXPECT_NEAR(v[r * K + k], ls[k], 1e-6) << "row " << r << " column " << k;
        far = std::max(far, std::fabs(e[r * K + k] - ls[k]));
      }
    }
    EXPECT_GT(far, 1e-3);
  }
}

// Tiny rows, every mask tried, each at its least-squares optimum; the refit is converged (4K CG
// steps on a K-variable problem). These Hessians are harder than a layer's (a few factors explain
// the inputs): SparseGPT + refit lands up to 3.2x above the optimum, ADMM + refit up to 1.48x (the
// bound, 1.6x, leaves room for another GEMM's rounding); ADMM is below SparseGPT + refit over the
// cases together, though not on every single case (docs/data.md, "ADMM").
TEST(Admm, TinyRowsComeNearTheBruteForceOptimum) {
  struct Case { Pattern p; int64_t K; };
  double admm_total = 0, sparsegpt_total = 0;
  for (Case c : {Case{{2, 4}, 8}, Case{{2, 4}, 12}, Case{{1, 4}, 12}, Case{{4, 8}, 8}, Case{{6, 8}, 16},
                 Case{{4, 8}, 16}, Case{{3, 7}, 10}}) {
    const uint64_t seed = 700 + c.K * 3 + c.p.keep;
    SCOPED_TRACE(test::seed_trace(seed) + " " + c.p.str() + " K=" + std::to_string(c.K));
    const int64_t rows = 12, K = c.K;
    const std::vector<float> wf = test::random_floats(rows * K, seed);
    const Tensor w = Tensor::from_f32(wf, {rows, K});
    const std::vector<double> H = test::correlated_hessian(K, 8 * K, seed + 1);
    const std::vector<double> hd = test::damped(H, K, 0.01);
    const int steps = static_cast<int>(4 * K);
    auto admm = admm_prune(w.view(), H.data(), c.p);
    ASSERT_TRUE(admm.ok()) << admm.error().message();
    ASSERT_TRUE(reconstruct_kept(w.view(), admm->pruned, H.data(), steps).ok());
    auto gpt = sparsegpt_prune(w.view(), H.data(), c.p);
    ASSERT_TRUE(gpt.ok());
    ASSERT_TRUE(reconstruct_kept(w.view(), gpt->pruned, H.data(), steps).ok());
    const std::vector<float> a = admm->pruned.to_f32(), g = gpt->pruned.to_f32();
    double best = 0, got = 0, sparsegpt = 0;
    for (int64_t r = 0; r < rows; ++r) {
      best += test::brute_force_row(wf.data() + r * K, hd, K, c.p);
      got += test::row_objective(wf.data() + r * K, a.data() + r * K, hd, K);
      sparsegpt += test::row_objective(wf.data() + r * K, g.data() + r * K, hd, K);
    }
    ASSERT_GT(best, 0);
    EXPECT_GE(got, best * (1 - 1e-9));  // the brute force is the optimum
    EXPECT_LE(got, best * 1.6) << "sparsegpt " << sparsegpt / best << "x";
    admm_total += got / best;
    sparsegpt_total += sparsegpt / best;
  }
  EXPECT_LT(admm_total, sparsegpt_total);
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
      std::vector<double> H = test::correlated_hessian(K, 2 * K + 4, seed + 1);
      if (K >= 17) {  // input 5 is zero on every token
        for (int64_t k = 0; k < K; ++k) H[5 * K + k] = H[k * K + 5] = 0;
      }
      AdmmOptions options;
      options.double_precision = true;
      options.iterations = 12;
      options.schedule = 8;
      options.rho = 0.3;
      options.rho_growth = 1.7;  // levels at iterations 0, 4 and 8: the dual's rescaling is compared too
      options.rho_every = 4;
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
  const std::vector<double> H = test::correlated_hessian(K, 4 * K, seed + 1);
  const std::vector<double> hd = test::damped(H, K, 0.01);
  double objective[2] = {};
  for (bool dp : {false, true}) {
    AdmmOptions options;
    options.double_precision = dp;
    auto got = admm_prune(w.view(), H.data(), Pattern{2, 4}, options);
    ASSERT_TRUE(got.ok());
    ASSERT_TRUE(reconstruct_kept(w.view(), got->pruned, H.data(), 40).ok());
    const std::vector<float> v = got->pruned.to_f32();
    for (int64_t r = 0; r < rows; ++r) objective[dp] += test::row_objective(wf.data() + r * K, v.data() + r * K, hd, K);
  }
  EXPECT_GT(objective[1], 0);
  EXPECT_NEAR(objective[0], objective[1], 0.01 * objective[1]);
}

TEST(Admm, BadInputsAreNamedErrors) {
  const int64_t rows = 3, K = 8;
  std::vector<float> wf = test::random_floats(rows * K, 9);
  const std::vector<double> H = test::correlated_hessian(K, 32, 10);
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
  EXPECT_NE(r.error().message().find("the ADMM factor is for 8 inputs and 4 penalty levels"), std::string::npos)
      << r.error().message();

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
