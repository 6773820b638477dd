// Least-squares refit of the kept weights (reconstruct_kept): the mask stays, the damped output error
// never rises, and enough CG steps reach each row's exact solution
// v_S = w_S + Hd_SS^-1 Hd_SP w_P (solved here with a Gauss-Jordan inverse per row).
#include <gtest/gtest.h>

#include <cmath>

#include "nmkit/calib.h"
#include "nmkit/prune.h"
#include "tests/calib/calib_data.h"
#include "tests/calib/calib_oracle.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

TEST(Reconstruct, ReachesThePerRowLeastSquaresSolution) {
  const int64_t rows = 6, K = 40, tokens = 300;
  const uint64_t seed = 321;
  SCOPED_TRACE(test::seed_trace(seed));
  const std::vector<float> X = test::correlated_inputs(tokens, K, 8, seed);
  const std::vector<double> H = test::naive_hessian(X, tokens, K);
  const Tensor w = test::random_tensor(DType::F32, {rows, K}, seed + 1);
  auto mag = prune(w.view(), Pattern{2, 4}, PruneMethod::Magnitude);
  ASSERT_TRUE(mag.ok());
  Tensor pruned = std::move(mag->pruned);
  const std::vector<float> start = pruned.to_f32();
  const double damping = 0.01;
  // K = 40 unknowns at most per row: CG is exact after K steps in exact arithmetic; 200 leave margin.
  auto r = reconstruct_kept(w.view(), pruned, H.data(), 200, damping, "t");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_LT(r->objective_after, r->objective_before);
  const std::vector<float> got = pruned.to_f32();
  std::vector<double> Hd = H;
  double mean = 0;
  for (int64_t k = 0; k < K; ++k) mean += H[k * K + k] / double(K);
  for (int64_t k = 0; k < K; ++k) Hd[k * K + k] += damping * mean;
  const std::vector<float> wf = w.to_f32();
  for (int64_t row = 0; row < rows; ++row) {
    std::vector<int64_t> S, P;
    for (int64_t k = 0; k < K; ++k) (start[row * K + k] != 0 ? S : P).push_back(k);
    const auto s = static_cast<int64_t>(S.size());
    std::vector<double> Hss(s * s), rhs(s, 0.0);
    for (int64_t i = 0; i < s; ++i) {
      for (int64_t j = 0; j < s; ++j) Hss[i * s + j] = Hd[S[i] * K + S[j]];
      for (int64_t p : P) rhs[i] += Hd[S[i] * K + p] * wf[row * K + p];
    }
    const std::vector<double> inv = test::naive_inverse(Hss, s);
    for (int64_t i = 0; i < s; ++i) {
      double v = wf[row * K + S[i]];
      for (int64_t j = 0; j < s; ++j) v += inv[i * s + j] * rhs[j];
      // float32 output of a well-converged CG: 1e-4 relative to the row's scale.
      EXPECT_NEAR(got[row * K + S[i]], v, 1e-4 * (1 + std::fabs(v))) << row << "," << S[i];
    }
    for (int64_t p : P) EXPECT_EQ(got[row * K + p], 0.0f);
  }
}

TEST(Reconstruct, FewStepsNeverRaiseTheErrorAndKeepTheMask) {
  const int64_t rows = 20, K = 96, tokens = 500;
  const std::vector<float> X = test::correlated_inputs(tokens, K, 12, 55);
  InputStats stats(K, true);
  stats.add(X.data(), tokens);
  const std::vector<double> H = stats.hessian();
  for (DType dtype : {DType::F32, DType::BF16}) {
    const Tensor w = test::random_tensor(dtype, {rows, K}, 56);
    auto sgpt = sparsegpt_prune(w.view(), H.data(), Pattern{6, 8});
    ASSERT_TRUE(sgpt.ok());
    Tensor pruned = std::move(sgpt->pruned);
    const std::vector<float> before = pruned.to_f32();
    const double e0 = *output_error(w.view(), pruned.view(), H.data());
    auto r = reconstruct_kept(w.view(), pruned, H.data(), 5);
    ASSERT_TRUE(r.ok());
    EXPECT_LE(r->objective_after, r->objective_before);
    const double e1 = *output_error(w.view(), pruned.view(), H.data());
    std::printf("%s 6:8 sparsegpt output error %.5f, refit 5 steps %.5f\n",
                std::string(dtype_name(dtype)).c_str(), e0, e1);
    if (dtype == DType::F32) {
      EXPECT_LT(e1, e0);
    }
    const std::vector<float> after = pruned.to_f32();
    for (size_t i = 0; i < after.size(); ++i) {
      if (before[i] == 0) {
        EXPECT_EQ(after[i], 0.0f) << i;
      }
    }
  }
}

}  // namespace
}  // namespace nmkit
