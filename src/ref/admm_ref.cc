// See admm_ref.h.
#include "ref/admm_ref.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace nmkit {
namespace {

// Lower L with A = L L^T.
std::vector<double> cholesky(const std::vector<double>& a, int64_t K) {
  std::vector<double> l(static_cast<size_t>(K * K), 0.0);
  for (int64_t j = 0; j < K; ++j) {
    double s = a[j * K + j];
    for (int64_t p = 0; p < j; ++p) s -= l[j * K + p] * l[j * K + p];
    l[j * K + j] = std::sqrt(s);
    for (int64_t i = j + 1; i < K; ++i) {
      double t = a[i * K + j];
      for (int64_t p = 0; p < j; ++p) t -= l[i * K + p] * l[j * K + p];
      l[i * K + j] = t / l[j * K + j];
    }
  }
  return l;
}

// y with L L^T y = b.
std::vector<double> solve(const std::vector<double>& l, int64_t K, std::vector<double> b) {
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t p = 0; p < i; ++p) b[i] -= l[i * K + p] * b[p];
    b[i] /= l[i * K + i];
  }
  for (int64_t i = K - 1; i >= 0; --i) {
    for (int64_t p = i + 1; p < K; ++p) b[i] -= l[p * K + i] * b[p];
    b[i] /= l[i * K + i];
  }
  return b;
}

// Indices of `idx` sorted best first: |x| as float32 descending, then |w| descending, then index.
void sort_best_first(std::vector<int64_t>& idx, const double* x, const float* w) {
  std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    const float xa = std::fabs(static_cast<float>(x[a])), xb = std::fabs(static_cast<float>(x[b]));
    if (xa != xb) return xa > xb;
    const float wa = std::fabs(w[a]), wb = std::fabs(w[b]);
    if (wa != wb) return wa > wb;
    return a < b;
  });
}

}  // namespace

AdmmRefResult ref_admm(const std::vector<float>& w, int64_t rows, int64_t K, const std::vector<double>& H,
                       Pattern pattern, const AdmmOptions& options) {
  // Hd: symmetric from the upper triangle, dead inputs, damping.
  std::vector<double> hd(static_cast<size_t>(K * K));
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < K; ++j) hd[i * K + j] = i <= j ? H[i * K + j] : H[j * K + i];
  }
  std::vector<bool> dead(static_cast<size_t>(K), false);
  double mean = 0;
  for (int64_t k = 0; k < K; ++k) {
    if (hd[k * K + k] == 0) {
      hd[k * K + k] = 1;
      dead[k] = true;
    }
    mean += hd[k * K + k];
  }
  mean /= static_cast<double>(std::max<int64_t>(K, 1));
  std::vector<double> d(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    hd[k * K + k] += options.damping * mean;
    d[k] = std::sqrt(hd[k * K + k]);
  }
  std::vector<double> hn(static_cast<size_t>(K * K));
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < K; ++j) hn[i * K + j] = hd[i * K + j] / (d[i] * d[j]);
  }
  // The penalty of iteration t: rho * growth^level, level = min(t / every, levels - 1).
  const int levels =
      options.rho_every <= 0 ? 1 : std::max(1, (options.iterations + options.rho_every - 1) / options.rho_every);
  auto rho_of = [&](int t) {
    const int level = options.rho_every <= 0 ? 0 : std::min(t / options.rho_every, levels - 1);
    return options.rho * std::pow(options.rho_growth, level);
  };
  const size_t n = static_cast<size_t>(rows * K);
  std::vector<double> wn(n), b(n, 0.0), W(n), U(n, 0.0), Z(n, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) wn[r * K + k] = dead[k] ? 0.0 : double(w[r * K + k]) * d[k];
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < K; ++j) {
      for (int64_t k = 0; k < K; ++k) b[r * K + j] += wn[r * K + k] * hn[k * K + j];
    }
  }
  W = wn;
  // The schedule: P pruned per row by the pattern, S = min(schedule, iterations).
  int64_t per_row = 0;
  for (int64_t g = 0; g < K; g += pattern.group) {
    const int64_t len = std::min<int64_t>(pattern.group, K - g);
    per_row += len - std::min<int64_t>(pattern.keep, len);
  }
  const int span = std::min(options.schedule, options.iterations);
  AdmmRefResult out;
  out.kept.assign(n, 0);
  for (int t = 0; t < options.iterations; ++t) {
    int64_t extras = 0;
    if (t + 1 < span) extras = std::llround(double(per_row) * std::pow(1.0 - double(t + 1) / span, 3));
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> x(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) x[k] = W[r * K + k] + U[r * K + k];
      uint8_t* kept = out.kept.data() + r * K;
      std::fill(kept, kept + K, 0);
      if (options.frozen_mask != nullptr) {
        for (int64_t k = 0; k < K; ++k) kept[k] = (*options.frozen_mask)[r * K + k];
      } else {
        std::vector<int64_t> rest;
        for (int64_t g = 0; g < K; g += pattern.group) {
          const int64_t len = std::min<int64_t>(pattern.group, K - g);
          std::vector<int64_t> idx(static_cast<size_t>(len));
          std::iota(idx.begin(), idx.end(), g);
          sort_best_first(idx, x.data(), w.data() + r * K);
          for (int64_t i = 0; i < len; ++i) {
            if (i < pattern.keep) {
              kept[idx[i]] = 1;
            } else {
              rest.push_back(idx[i]);
            }
          }
        }
        sort_best_first(rest, x.data(), w.data() + r * K);
        for (int64_t i = 0; i < std::min<int64_t>(extras, static_cast<int64_t>(rest.size())); ++i) kept[rest[i]] = 1;
      }
      for (int64_t k = 0; k < K; ++k) {
        Z[r * K + k] = kept[k] ? x[k] : 0.0;
        U[r * K + k] = x[k] - Z[r * K + k];
      }
    }
    if (t + 1 == options.iterations) break;
    const double rho = rho_of(t);
    if (t > 0 && rho != rho_of(t - 1)) {
      for (double& u : U) u *= rho_of(t - 1) / rho;  // the scaled dual Y / rho
    }
    std::vector<double> a = hn;
    for (int64_t k = 0; k < K; ++k) a[k * K + k] += rho;
    const std::vector<double> l = cholesky(a, K);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> rhs(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) rhs[k] = b[r * K + k] + rho * (Z[r * K + k] - U[r * K + k]);
      const std::vector<double> y = solve(l, K, rhs);
      std::copy(y.begin(), y.end(), W.begin() + r * K);
    }
  }
  out.values.assign(n, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) out.values[r * K + k] = Z[r * K + k] / d[k];
  }
  return out;
}

}  // namespace nmkit
