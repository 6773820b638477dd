// SparseGPT's factor (docs/design.md section 12, "the factor"): U is upper with a positive diagonal
// and U^T U is the inverse of the damped Hessian, checked column by column against the Hessian
// itself (A U^T U e_j = e_j), on sizes below and above the threaded-factorization size, with dead
// inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "nmkit/calib.h"

namespace nmkit {
namespace {

// H = B B^T + diag(d) with B [K, rank] random and a few inputs dead (row and column zero): symmetric
// positive semi-definite, correlated, cheap to build at K = 4099.
std::vector<double> low_rank_hessian(int64_t K, int rank, const std::vector<int64_t>& dead, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> B(static_cast<size_t>(K * rank));
  for (double& v : B) v = normal(rng);
  for (int64_t k : dead) {
    for (int r = 0; r < rank; ++r) B[static_cast<size_t>(k * rank + r)] = 0;
  }
  std::vector<double> H(static_cast<size_t>(K * K), 0.0);
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < K; ++j) {
      double sum = 0;
      for (int r = 0; r < rank; ++r) sum += B[static_cast<size_t>(i * rank + r)] * B[static_cast<size_t>(j * rank + r)];
      H[static_cast<size_t>(i * K + j)] = sum;
    }
    const bool is_dead = std::find(dead.begin(), dead.end(), i) != dead.end();
    if (!is_dead) H[static_cast<size_t>(i * K + i)] += 0.5 + static_cast<double>(i % 7);
  }
  return H;
}

TEST(InverseCholesky, UTransposeUInvertsTheDampedHessian) {
  const double damping = 0.01;
  for (int64_t K : {int64_t{1}, int64_t{5}, int64_t{130}, int64_t{4099}}) {
    const std::vector<int64_t> dead = K > 4 ? std::vector<int64_t>{1, K - 2} : std::vector<int64_t>{};
    const std::vector<double> H = low_rank_hessian(K, 12, dead, static_cast<uint32_t>(K));
    auto got = inverse_cholesky(H.data(), K, damping, "blk.0.ffn_down");
    ASSERT_TRUE(got.ok()) << got.error().message();
    EXPECT_EQ(got->dead, dead) << K;
    EXPECT_DOUBLE_EQ(got->damping, damping);
    const std::vector<double>& U = got->U;
    ASSERT_EQ(U.size(), static_cast<size_t>(K * K));
    // The damped Hessian as design section 12 builds it: dead inputs get H[k,k] = 1.
    std::vector<double> A = H;
    double diag = 0;
    for (int64_t k : dead) A[static_cast<size_t>(k * K + k)] = 1;
    for (int64_t k = 0; k < K; ++k) diag += A[static_cast<size_t>(k * K + k)];
    for (int64_t k = 0; k < K; ++k) A[static_cast<size_t>(k * K + k)] += damping * diag / static_cast<double>(K);
    for (int64_t i = 0; i < K; ++i) {
      ASSERT_GT(U[static_cast<size_t>(i * K + i)], 0) << "K " << K << " diagonal " << i;
      for (int64_t j = 0; j < i; ++j) ASSERT_EQ(U[static_cast<size_t>(i * K + j)], 0) << "K " << K << " lower " << i << "," << j;
    }
    for (int64_t col : {int64_t{0}, K / 2, K - 1, K / 3}) {
      // v = U^T (U e_col), then A v must be e_col.
      std::vector<double> u_col(static_cast<size_t>(K)), v(static_cast<size_t>(K), 0.0);
      for (int64_t i = 0; i < K; ++i) u_col[static_cast<size_t>(i)] = U[static_cast<size_t>(i * K + col)];
      for (int64_t i = 0; i < K; ++i) {
        for (int64_t j = 0; j <= i; ++j) v[static_cast<size_t>(i)] += U[static_cast<size_t>(j * K + i)] * u_col[static_cast<size_t>(j)];
      }
      for (int64_t i = 0; i < K; ++i) {
        double sum = 0;
        for (int64_t j = 0; j < K; ++j) sum += A[static_cast<size_t>(i * K + j)] * v[static_cast<size_t>(j)];
        ASSERT_NEAR(sum, i == col ? 1.0 : 0.0, 1e-9) << "K " << K << " column " << col << " row " << i;
      }
    }
  }
}

}  // namespace
}  // namespace nmkit
