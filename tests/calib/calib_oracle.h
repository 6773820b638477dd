// Independent float64 re-statements of docs/design.md section 12 for the calib tests: naive X^T X,
// a Gauss-Jordan inverse and a textbook Cholesky (no LAPACK), and SparseGPT without blocks (every
// update applied to all later columns at once), with selection by sorting (not src/prune).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "nmkit/pattern.h"

namespace nmkit::test {

inline std::vector<double> naive_hessian(const std::vector<float>& X, int64_t tokens, int64_t K) {
  std::vector<double> h(K * K, 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < K; ++i) {
      for (int64_t j = 0; j < K; ++j) h[i * K + j] += double(X[t * K + i]) * double(X[t * K + j]);
    }
  }
  return h;
}

// Inverse by Gauss-Jordan with partial pivoting.
inline std::vector<double> naive_inverse(std::vector<double> a, int64_t K) {
  std::vector<double> inv(K * K, 0.0);
  for (int64_t i = 0; i < K; ++i) inv[i * K + i] = 1;
  for (int64_t c = 0; c < K; ++c) {
    int64_t p = c;
    for (int64_t r = c + 1; r < K; ++r) {
      if (std::fabs(a[r * K + c]) > std::fabs(a[p * K + c])) p = r;
    }
    for (int64_t j = 0; j < K; ++j) {
      std::swap(a[c * K + j], a[p * K + j]);
      std::swap(inv[c * K + j], inv[p * K + j]);
    }
    const double d = a[c * K + c];
    for (int64_t j = 0; j < K; ++j) {
      a[c * K + j] /= d;
      inv[c * K + j] /= d;
    }
    for (int64_t r = 0; r < K; ++r) {
      if (r == c) continue;
      const double f = a[r * K + c];
      for (int64_t j = 0; j < K; ++j) {
        a[r * K + j] -= f * a[c * K + j];
        inv[r * K + j] -= f * inv[c * K + j];
      }
    }
  }
  return inv;
}

// Upper U with A = U^T U.
inline std::vector<double> naive_upper_cholesky(const std::vector<double>& a, int64_t K) {
  std::vector<double> u(K * K, 0.0);
  for (int64_t i = 0; i < K; ++i) {
    double s = a[i * K + i];
    for (int64_t k = 0; k < i; ++k) s -= u[k * K + i] * u[k * K + i];
    u[i * K + i] = std::sqrt(s);
    for (int64_t j = i + 1; j < K; ++j) {
      double t = a[i * K + j];
      for (int64_t k = 0; k < i; ++k) t -= u[k * K + i] * u[k * K + j];
      u[i * K + j] = t / u[i * K + i];
    }
  }
  return u;
}

// Indices of the `keep` best of n elements: score descending, then |w| descending, then index.
inline std::vector<int> oracle_keep(const float* score, const float* absw, int n, int keep) {
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) {
    if (score[a] != score[b]) return score[a] > score[b];
    if (absw[a] != absw[b]) return absw[a] > absw[b];
    return a < b;
  });
  idx.resize(std::min(keep, n));
  return idx;
}

struct OracleResult {
  std::vector<double> W;      // [rows, K], pruned entries 0
  std::vector<uint8_t> kept;  // [rows, K]
};

// Unblocked SparseGPT in float64 (design section 12), with the damping fraction given.
inline OracleResult oracle_sparsegpt(const std::vector<float>& w, int64_t rows, int64_t K,
                                     std::vector<double> H, Pattern p, double damping) {
  OracleResult out;
  out.W.assign(w.begin(), w.end());
  out.kept.assign(rows * K, 0);
  double mean = 0;
  for (int64_t k = 0; k < K; ++k) {
    if (H[k * K + k] == 0) {
      H[k * K + k] = 1;
      for (int64_t r = 0; r < rows; ++r) out.W[r * K + k] = 0;
    }
    mean += H[k * K + k] / double(K);
  }
  for (int64_t k = 0; k < K; ++k) H[k * K + k] += damping * mean;
  const std::vector<double> U = naive_upper_cholesky(naive_inverse(H, K), K);
  for (int64_t r = 0; r < rows; ++r) {
    double* row = out.W.data() + r * K;
    for (int64_t k = 0; k < K; ++k) {
      if (k % p.group == 0) {
        const int n = int(std::min<int64_t>(p.group, K - k));
        std::vector<float> score(n), absw(n);
        for (int j = 0; j < n; ++j) {
          absw[j] = std::fabs(float(row[k + j]));
          score[j] = absw[j] * float(1.0 / U[(k + j) * K + k + j]);
        }
        for (int j : oracle_keep(score.data(), absw.data(), n, p.keep)) out.kept[r * K + k + j] = 1;
      }
      if (out.kept[r * K + k]) continue;
      const double e = row[k] / U[k * K + k];
      for (int64_t j = k; j < K; ++j) row[j] -= e * U[k * K + j];
      row[k] = 0;
    }
  }
  return out;
}

}  // namespace nmkit::test
