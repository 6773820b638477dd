// Dense targets (docs/design.md 12.4): the cross statistics against a float64 sum written here, and
// the retargeted weight checked by the optimality condition of its objective computed from the raw
// inputs (not from C and H): (W' X_p^T - W X_t^T) X_p + lambda (W' - W) = 0 with the targets' inputs
// X_t = X_p + s (X_d - X_p). Using C^T for C, or H for C, fails it, since the two streams differ
// asymmetrically.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "nmkit/calib.h"
#include "tests/util/random.h"

namespace nmkit {
namespace {

using test::random_floats;

TensorView f32_view(const std::vector<float>& v, Shape shape) {
  return TensorView{DType::F32, std::move(shape), reinterpret_cast<const std::byte*>(v.data())};
}

struct Streams {
  int64_t T = 0, K = 0;
  std::vector<float> dense, pruned;  // [T, K] row-major
};

// The pruned stream is the dense one plus a perturbation that mixes channels (as a pruned block's
// error does), so C = X_d^T X_p is far from symmetric.
Streams random_streams(int64_t T, int64_t K, uint64_t seed) {
  Streams s{T, K, random_floats(static_cast<size_t>(T * K), seed), {}};
  const std::vector<float> mix = random_floats(static_cast<size_t>(K * K), seed + 1, -0.3f, 0.3f);
  s.pruned = s.dense;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < K; ++i) {
      double v = 0;
      for (int64_t j = 0; j < K; ++j) v += double(s.dense[t * K + j]) * mix[j * K + i];
      s.pruned[t * K + i] += static_cast<float>(v);
    }
  }
  return s;
}

// sum over tokens of a_i b_j, float64.
std::vector<double> naive_cross(const std::vector<float>& a, const std::vector<float>& b, int64_t T, int64_t K) {
  std::vector<double> c(static_cast<size_t>(K * K), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < K; ++i) {
      for (int64_t j = 0; j < K; ++j) c[i * K + j] += double(a[t * K + i]) * double(b[t * K + j]);
    }
  }
  return c;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

TEST(DenseTargets, CrossStatisticsAreTheSumOfDenseTimesPrunedRows) {
  for (const int64_t K : {1, 7, 37}) {
    SCOPED_TRACE(K);
    const Streams s = random_streams(300, K, 10 + static_cast<uint64_t>(K));
    CrossStats stats(K);
    stats.add(s.dense.data(), s.pruned.data(), 100);  // in two parts, as the chunks of a pass
    stats.add(s.dense.data() + 100 * K, s.pruned.data() + 100 * K, 200);
    EXPECT_EQ(stats.tokens(), 300);
    const std::vector<double> got = stats.take(), want = naive_cross(s.dense, s.pruned, 300, K);
    ASSERT_EQ(got.size(), want.size());
    const double scale = max_abs(want);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12 * scale * 300) << i;
  }
}

// The gradient of ||X_p W'^T - X_t W^T||^2 / 2 + lambda ||W' - W||^2 / 2, from the raw rows.
std::vector<double> gradient(const Streams& s, const std::vector<float>& w, const std::vector<float>& wt,
                             int64_t rows, double lambda, double strength) {
  const int64_t T = s.T, K = s.K;
  std::vector<double> g(static_cast<size_t>(rows * K), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < T; ++t) {
      double residual = 0;  // (X_p w'_r - X_t w_r)_t
      for (int64_t k = 0; k < K; ++k) {
        const double p = s.pruned[t * K + k], target = p + strength * (double(s.dense[t * K + k]) - p);
        residual += p * wt[r * K + k] - target * w[r * K + k];
      }
      for (int64_t k = 0; k < K; ++k) g[r * K + k] += residual * s.pruned[t * K + k];
    }
    for (int64_t k = 0; k < K; ++k) g[r * K + k] += lambda * (double(wt[r * K + k]) - w[r * K + k]);
  }
  return g;
}

TEST(DenseTargets, RetargetedWeightMeetsItsNormalEquations) {
  constexpr int64_t T = 400, K = 23, rows = 5;
  const Streams s = random_streams(T, K, 31);
  const std::vector<float> w = random_floats(static_cast<size_t>(rows * K), 32);
  CrossStats cross(K);
  cross.add(s.dense.data(), s.pruned.data(), T);
  InputStats stats(K, true);
  stats.add(s.pruned.data(), T);
  const std::vector<double> C = cross.take(), H = stats.hessian();
  double mean_diag = 0;
  for (int64_t k = 0; k < K; ++k) mean_diag += H[k * K + k] / K;
  for (const double strength : {1.0, 0.25}) {
    for (const double damping : {1e-6, 0.01, 1.0}) {
      SCOPED_TRACE(testing::Message() << "strength " << strength << ", damping " << damping);
      auto wt = retarget_to_dense(f32_view(w, {rows, K}), C.data(), H.data(), K, strength, damping);
      ASSERT_TRUE(wt.ok()) << wt.error().message();
      ASSERT_EQ(wt->shape(), (Shape{rows, K}));
      const std::vector<float> got = wt->to_f32();
      // The condition's terms are of the size of W X_t^T X_p; the float32 result rounds W' at 1e-7.
      const std::vector<double> g = gradient(s, w, got, rows, damping * mean_diag, strength);
      const double scale = max_abs(gradient(s, w, std::vector<float>(w.size(), 0.0f), rows, 0.0, strength));
      EXPECT_LT(max_abs(g), 1e-5 * scale);
      double moved = 0;
      for (size_t i = 0; i < w.size(); ++i) moved = std::max(moved, std::fabs(double(got[i]) - w[i]));
      EXPECT_GT(moved, 1e-3);  // the streams differ: the fit moves W
    }
  }
  auto none = retarget_to_dense(f32_view(w, {rows, K}), C.data(), H.data(), K, 0.0, 0.01);
  ASSERT_TRUE(none.ok());
  const std::vector<float> kept = none->to_f32();
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(kept[i], w[i], 1e-6) << i;  // strength 0: W
}

TEST(DenseTargets, EqualStreamsLeaveTheWeight) {
  constexpr int64_t T = 200, K = 16, rows = 3;
  const std::vector<float> x = random_floats(static_cast<size_t>(T * K), 41);
  const std::vector<float> w = random_floats(static_cast<size_t>(rows * K), 42);
  CrossStats cross(K);
  cross.add(x.data(), x.data(), T);
  InputStats stats(K, true);
  stats.add(x.data(), T);
  const std::vector<double> C = cross.take(), H = stats.hessian();
  auto wt = retarget_to_dense(f32_view(w, {rows, K}), C.data(), H.data(), K, 1.0, 0.01);
  ASSERT_TRUE(wt.ok()) << wt.error().message();
  const std::vector<float> got = wt->to_f32();
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(got[i], w[i], 1e-6) << i;
}

TEST(DenseTargets, BadInputsNameTheLayerAndValue) {
  constexpr int64_t K = 4;
  const std::vector<float> w(2 * K, 1.0f);
  std::vector<double> H(K * K, 0.0), C(K * K, 0.0);
  for (int64_t k = 0; k < K; ++k) H[k * K + k] = C[k * K + k] = 2.0;
  const TensorView view = f32_view(w, {2, K});
  C[1 * K + 2] = std::numeric_limits<double>::quiet_NaN();
  auto r = retarget_to_dense(view, C.data(), H.data(), K, 1.0, 0.01, "blk.3.ffn_up.weight");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("blk.3.ffn_up.weight"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("nan at (1, 2)"), std::string::npos) << r.error().message();
  C[1 * K + 2] = 0;
  r = retarget_to_dense(view, C.data(), H.data(), K, 1.0, 0.0, "blk.3.ffn_up.weight");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("positive damping"), std::string::npos) << r.error().message();
  r = retarget_to_dense(view, C.data(), H.data(), K, 1.5, 0.01, "blk.3.ffn_up.weight");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("strength from 0 to 1, got 1.5"), std::string::npos) << r.error().message();
  r = retarget_to_dense(view, C.data(), H.data(), K + 1, 1.0, 0.01, "blk.3.ffn_up.weight");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("5 columns"), std::string::npos) << r.error().message();
  const std::vector<float> bad{1, 2, std::numeric_limits<float>::infinity(), 4, 5, 6, 7, 8};
  r = retarget_to_dense(f32_view(bad, {2, K}), C.data(), H.data(), K, 1.0, 0.01, "blk.3.ffn_up.weight");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("inf"), std::string::npos) << r.error().message();
}

}  // namespace
}  // namespace nmkit
