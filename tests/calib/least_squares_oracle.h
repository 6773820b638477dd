// Small least-squares problems for the mask-search tests (ADMM, swaps): correlated Hessians, the
// damped objective of a row, its least-squares optimum on a support, and the brute-force optimum over
// every mask of a pattern (docs/design.md 12.1, 12.2). Float64, no LAPACK.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "nmkit/pattern.h"
#include "tests/calib/calib_oracle.h"

namespace nmkit::test {

// H = X^T X of `tokens` random inputs whose features are correlated (each is a random mix of a
// few shared factors plus its own noise), as a layer's inputs are: a diagonal-dominant H would make
// every method pick the Wanda mask.
inline std::vector<double> correlated_hessian(int64_t K, int64_t tokens, uint64_t seed) {
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
  return naive_hessian(X, tokens, K);
}

// H + damping * mean(diag H) * I, as every method damps it (no dead inputs in these tests).
inline std::vector<double> damped(std::vector<double> h, int64_t K, double damping) {
  double mean = 0;
  for (int64_t k = 0; k < K; ++k) mean += h[k * K + k] / static_cast<double>(K);
  for (int64_t k = 0; k < K; ++k) h[k * K + k] += damping * mean;
  return h;
}

// (w - v) Hd (w - v)^T of one row.
inline double row_objective(const float* w, const float* v, const std::vector<double>& hd, int64_t K) {
  double s = 0;
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < K; ++j) s += (double(w[i]) - v[i]) * hd[i * K + j] * (double(w[j]) - v[j]);
  }
  return s;
}

// The least-squares optimum of one row on the support `kept`: v_S solves Hd[S,S] v_S = Hd[S,:] w,
// by the oracle's Gauss-Jordan inverse. Returns the row (0 off the support).
inline std::vector<double> least_squares_row(const float* w, const uint8_t* kept, const std::vector<double>& hd,
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
  const std::vector<double> inv = naive_inverse(a, n);
  std::vector<double> v(static_cast<size_t>(K), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) v[s[i]] += inv[i * n + j] * rhs[j];
  }
  return v;
}

// The best objective of one row over every mask of the pattern (each group keeps exactly
// min(keep, n) of its n), each mask at its least-squares optimum.
inline double brute_force_row(const float* w, const std::vector<double>& hd, int64_t K, Pattern p) {
  std::vector<std::vector<uint32_t>> choices;  // per group: every subset of min(keep, n) of n bits
  for (int64_t g = 0; g < K; g += p.group) {
    const int n = static_cast<int>(std::min<int64_t>(p.group, K - g));
    std::vector<uint32_t> subsets;
    for (uint32_t m = 0; m < (1u << n); ++m) {
      if (std::popcount(m) == std::min(p.keep, n)) subsets.push_back(m);
    }
    choices.push_back(std::move(subsets));
  }
  std::vector<size_t> at(choices.size(), 0);
  double best = std::numeric_limits<double>::infinity();
  std::vector<uint8_t> kept(static_cast<size_t>(K));
  std::vector<float> v(static_cast<size_t>(K));
  while (true) {
    for (size_t g = 0; g < choices.size(); ++g) {
      for (int64_t j = 0; j < p.group && static_cast<int64_t>(g) * p.group + j < K; ++j) {
        kept[g * p.group + j] = static_cast<uint8_t>((choices[g][at[g]] >> j) & 1u);
      }
    }
    const std::vector<double> ls = least_squares_row(w, kept.data(), hd, K);
    std::vector<float> ls32(ls.begin(), ls.end());
    best = std::min(best, row_objective(w, ls32.data(), hd, K));
    size_t g = 0;
    while (g < at.size() && ++at[g] == choices[g].size()) at[g++] = 0;
    if (g == at.size()) break;
  }
  return best;
}

}  // namespace nmkit::test
