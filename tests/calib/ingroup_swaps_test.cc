// In-group swaps (swap_in_groups, docs/design.md 12.3), checked against objectives computed here from
// scratch: the damped objective never rises and matches the report, every group keeps its count of
// non-zeros, no single swap is left that would lower a row's objective (each trial's best value found
// by fitting the quadratic through three evaluations), and with H = cI any mask becomes magnitude's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "nmkit/calib.h"
#include "nmkit/prune.h"
#include "tests/calib/calib_data.h"
#include "tests/calib/calib_oracle.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

std::vector<double> damped(const std::vector<double>& H, int64_t K, double damping) {
  std::vector<double> Hd = H;
  double mean = 0;
  for (int64_t k = 0; k < K; ++k) mean += H[k * K + k] / double(K);
  for (int64_t k = 0; k < K; ++k) Hd[k * K + k] += damping * mean;
  return Hd;
}

// (w - v) Hd (w - v)^T of one row.
double row_objective(const std::vector<double>& Hd, int64_t K, const float* w, const std::vector<double>& v) {
  double f = 0;
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < K; ++j) f += (w[i] - v[i]) * Hd[i * K + j] * (w[j] - v[j]);
  }
  return f;
}

double objective(const std::vector<double>& Hd, int64_t rows, int64_t K, const std::vector<float>& w,
                 const std::vector<float>& v) {
  double f = 0;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> row(v.begin() + r * K, v.begin() + (r + 1) * K);
    f += row_objective(Hd, K, w.data() + r * K, row);
  }
  return f;
}

std::vector<int> group_counts(const std::vector<float>& v, int64_t rows, int64_t K, int group) {
  std::vector<int> counts;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t s = 0; s < K; s += group) {
      int c = 0;
      for (int64_t k = s; k < std::min<int64_t>(K, s + group); ++k) c += v[r * K + k] != 0;
      counts.push_back(c);
    }
  }
  return counts;
}

struct Case {
  Pattern pattern;
  int64_t K;
};

TEST(InGroupSwaps, LowerTheObjectiveKeepCountsAndLeaveNoSwapThatPays) {
  // 3:7 on K = 45 leaves a tail group of 3.
  for (const Case c : {Case{Pattern{2, 4}, 40}, Case{Pattern{6, 8}, 48}, Case{Pattern{3, 7}, 45}}) {
    const int64_t rows = 9, K = c.K, tokens = 400;
    const uint64_t seed = 77 + static_cast<uint64_t>(K);
    SCOPED_TRACE(test::seed_trace(seed) + " pattern " + c.pattern.str());
    const std::vector<double> H = test::naive_hessian(test::correlated_inputs(tokens, K, 6, seed), tokens, K);
    const Tensor w = test::random_tensor(DType::F32, {rows, K}, seed + 1);
    auto mag = prune(w.view(), c.pattern, PruneMethod::Magnitude);
    ASSERT_TRUE(mag.ok()) << mag.error().message();
    Tensor pruned = std::move(mag->pruned);
    const std::vector<float> wf = w.to_f32(), start = pruned.to_f32();
    const double damping = 0.01;
    const std::vector<double> Hd = damped(H, K, damping);

    SwapOptions options;
    options.damping = damping;
    options.max_passes = 100;
    auto r = swap_in_groups(w.view(), pruned, H.data(), c.pattern, options, "t");
    ASSERT_TRUE(r.ok()) << r.error().message();
    const std::vector<float> got = pruned.to_f32();
    const double before = objective(Hd, rows, K, wf, start), after = objective(Hd, rows, K, wf, got);
    EXPECT_NEAR(r->objective_before, before, 1e-9 * before);
    EXPECT_NEAR(r->objective_after, after, 1e-9 * before);
    EXPECT_GT(r->swaps, 0);
    EXPECT_LT(after, before * 0.99);  // magnitude's mask ignores H: swaps must find better ones
    EXPECT_FALSE(r->reverted);
    EXPECT_LT(r->passes, options.max_passes);
    EXPECT_EQ(group_counts(got, rows, K, c.pattern.group), group_counts(start, rows, K, c.pattern.group));
    int64_t pruned_count = 0;
    for (float v : got) pruned_count += v == 0;
    EXPECT_EQ(r->sums.pruned_count, pruned_count);

    // No single swap left that lowers its row's objective: f(a) of the trial is quadratic in the
    // newly kept value a, so three evaluations give its minimum.
    for (int64_t row = 0; row < rows; ++row) {
      std::vector<double> v(got.begin() + row * K, got.begin() + (row + 1) * K);
      const float* wr = wf.data() + row * K;
      const double f = row_objective(Hd, K, wr, v);
      for (int64_t s = 0; s < K; s += c.pattern.group) {
        const int64_t t = std::min<int64_t>(K, s + c.pattern.group);
        for (int64_t i = s; i < t; ++i) {
          if (v[i] != 0) continue;
          for (int64_t j = s; j < t; ++j) {
            if (v[j] == 0) continue;
            std::vector<double> trial = v;
            trial[j] = 0;
            auto at = [&](double a) {
              trial[i] = a;
              return row_objective(Hd, K, wr, trial);
            };
            const double f0 = at(0), fp = at(1), fm = at(-1);
            const double alpha = (fp + fm - 2 * f0) / 2, beta = (fp - fm) / 2;
            const double best = f0 - beta * beta / (4 * alpha);
            EXPECT_GE(best, f - 1e-6 * f) << "row " << row << " swap " << i << " <-> " << j;
          }
        }
      }
    }
  }
}

TEST(InGroupSwaps, IdentityHessianTurnsAnyMaskIntoMagnitudes) {
  const int64_t rows = 7, K = 48;
  const Pattern pattern{6, 8};
  const Tensor w = test::random_tensor(DType::F32, {rows, K}, 4242);
  const std::vector<float> wf = w.to_f32();
  // Keep the smallest `keep` of every group at their values: the worst mask for H = cI.
  std::vector<float> worst(wf.size(), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t s = 0; s < K; s += pattern.group) {
      std::vector<int64_t> idx;
      for (int64_t k = s; k < s + pattern.group; ++k) idx.push_back(r * K + k);
      std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return std::fabs(wf[a]) < std::fabs(wf[b]); });
      for (int q = 0; q < pattern.keep; ++q) worst[idx[q]] = wf[idx[q]];
    }
  }
  Tensor pruned = Tensor::from_f32(worst, {rows, K});
  std::vector<double> H(K * K, 0.0);
  for (int64_t k = 0; k < K; ++k) H[k * K + k] = 3.0;
  auto r = swap_in_groups(w.view(), pruned, H.data(), pattern, {}, "t");
  ASSERT_TRUE(r.ok()) << r.error().message();
  auto mag = prune(w.view(), pattern, PruneMethod::Magnitude);
  ASSERT_TRUE(mag.ok());
  const std::vector<float> got = pruned.to_f32(), want = mag->pruned.to_f32();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "element " << i;
  EXPECT_NEAR(r->objective_after, objective(damped(H, K, 0.01), rows, K, wf, got), 1e-9 * r->objective_before);
}

TEST(InGroupSwaps, Bf16KeepsItsDtypeAndNeverRises) {
  const int64_t rows = 16, K = 64, tokens = 300;
  const std::vector<double> H = test::naive_hessian(test::correlated_inputs(tokens, K, 5, 9), tokens, K);
  const Tensor w = test::random_tensor(DType::BF16, {rows, K}, 10);
  auto mag = prune(w.view(), Pattern{2, 4}, PruneMethod::Magnitude);
  ASSERT_TRUE(mag.ok());
  Tensor pruned = std::move(mag->pruned);
  auto r = swap_in_groups(w.view(), pruned, H.data(), Pattern{2, 4}, {}, "t");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(pruned.dtype(), DType::BF16);
  EXPECT_LE(r->objective_after, r->objective_before);
  EXPECT_GT(r->swaps, 0);
}

TEST(InGroupSwaps, BadInputIsOneErrorNamingTheLayer) {
  const Tensor w = test::random_tensor(DType::F32, {4, 8}, 1);
  Tensor other = test::random_tensor(DType::F32, {4, 12}, 2);
  std::vector<double> H(64, 0.0);
  for (int k = 0; k < 8; ++k) H[k * 8 + k] = 1;
  auto shape = swap_in_groups(w.view(), other, H.data(), Pattern{2, 4}, {}, "blk.0.ffn_up.weight");
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.error().message().find("blk.0.ffn_up.weight"), std::string::npos);
  Tensor pruned = test::random_tensor(DType::F32, {4, 8}, 3);
  H[3 * 8 + 5] = std::nan("");
  auto nan = swap_in_groups(w.view(), pruned, H.data(), Pattern{2, 4}, {}, "blk.1.attn_q.weight");
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.error().message().find("blk.1.attn_q.weight"), std::string::npos);
  EXPECT_NE(nan.error().message().find("[3, 5]"), std::string::npos) << nan.error().message();
}

}  // namespace
}  // namespace nmkit
