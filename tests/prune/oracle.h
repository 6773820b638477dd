// An independent statement of docs/design.md section 2 for the prune tests: scores in float32 exactly as
// written, a full sort per group with the tie rules spelled out as float comparisons, and metrics
// summed plainly in float64. Shares no code with src/prune.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "nmkit/metrics.h"
#include "nmkit/pattern.h"
#include "nmkit/prune.h"
#include "nmkit/tensor.h"
#include "tests/util/random.h"

namespace nmkit::test {

// kept[r*K + k] for a [rows, K] weight given as f32 values (exact conversions of the tensor).
inline std::vector<uint8_t> oracle_kept(const std::vector<float>& w, int64_t rows, int64_t K,
                                        Pattern p, PruneMethod method,
                                        const std::vector<float>* grad = nullptr,
                                        const std::vector<float>* norms = nullptr) {
  std::vector<uint8_t> kept(w.size(), 0);
  std::vector<float> score(static_cast<size_t>(p.group));
  std::vector<int> idx;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < K; c0 += p.group) {
      const int t = static_cast<int>(std::min<int64_t>(p.group, K - c0));
      const float* wg = w.data() + r * K + c0;
      for (int j = 0; j < t; ++j) {
        const int64_t e = r * K + c0 + j;
        switch (method) {
          case PruneMethod::Magnitude: score[j] = std::fabs(wg[j]); break;
          case PruneMethod::Gradient: score[j] = std::fabs(wg[j] * (*grad)[e]); break;
          case PruneMethod::Wanda: score[j] = std::fabs(wg[j]) * (*norms)[c0 + j]; break;
        }
      }
      idx.resize(t);
      std::iota(idx.begin(), idx.end(), 0);
      std::sort(idx.begin(), idx.end(), [&](int a, int b) {
        if (score[a] != score[b]) return score[a] > score[b];
        if (std::fabs(wg[a]) != std::fabs(wg[b])) return std::fabs(wg[a]) > std::fabs(wg[b]);
        return a < b;
      });
      for (int j = 0; j < std::min(p.keep, t); ++j) kept[r * K + c0 + idx[j]] = 1;
    }
  }
  return kept;
}

// The dense-masked tensor: kept elements keep their bits, pruned ones are all-zero bits (+0).
inline Tensor oracle_masked(const TensorView& w, const std::vector<uint8_t>& kept) {
  Tensor out = Tensor::copy_of(w);
  const size_t es = dtype_size(w.dtype);
  for (size_t i = 0; i < kept.size(); ++i) {
    if (!kept[i]) std::memset(out.data() + i * es, 0, es);
  }
  return out;
}

// Metrics by their definitions (docs/design.md section 3), plain float64 loops.
inline PruneMetrics oracle_metrics(const std::vector<float>& w, const std::vector<uint8_t>& kept) {
  PruneMetrics m;
  m.total_count = static_cast<int64_t>(w.size());
  double err = 0, kept_abs = 0, pruned_abs = 0, diff_sq = 0, w_sq = 0, w_abs = 0;
  int64_t n_kept = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double v = w[i];
    const double pruned_v = kept[i] ? v : 0.0;
    err += std::fabs(v - pruned_v);
    diff_sq += (v - pruned_v) * (v - pruned_v);
    w_sq += v * v;
    w_abs += std::fabs(v);
    if (kept[i]) {
      kept_abs += std::fabs(v);
      ++n_kept;
    } else {
      pruned_abs += std::fabs(v);
    }
  }
  m.pruned_count = m.total_count - n_kept;
  if (m.total_count) {
    m.approximation_error = err / static_cast<double>(m.total_count);
    m.sparsity_percent = 100.0 * static_cast<double>(m.pruned_count) / static_cast<double>(m.total_count);
  }
  m.kept_magnitude_mean = n_kept ? kept_abs / static_cast<double>(n_kept) : 0.0;
  m.pruned_magnitude_mean = m.pruned_count ? pruned_abs / static_cast<double>(m.pruned_count) : 0.0;
  m.relative_error = w_sq > 0 ? std::sqrt(diff_sq / w_sq) : 0.0;
  m.retained_l1 = w_abs > 0 ? kept_abs / w_abs : 1.0;
  return m;
}

inline void expect_close(double actual, double expected, const char* what) {
  // Both sides sum the same float64 terms in different orders: each order is within
  // n * eps = 4097*100 * 2^-53 ~ 5e-11 of the exact sum, far inside 1e-9 relative.
  const double tol = 1e-9 * std::max(std::fabs(expected), 1e-300);
  EXPECT_NEAR(actual, expected, tol) << what;
}

inline void expect_metrics(const PruneMetrics& a, const PruneMetrics& e) {
  EXPECT_EQ(a.total_count, e.total_count);
  EXPECT_EQ(a.pruned_count, e.pruned_count);
  expect_close(a.approximation_error, e.approximation_error, "approximation_error");
  expect_close(a.kept_magnitude_mean, e.kept_magnitude_mean, "kept_magnitude_mean");
  expect_close(a.pruned_magnitude_mean, e.pruned_magnitude_mean, "pruned_magnitude_mean");
  expect_close(a.sparsity_percent, e.sparsity_percent, "sparsity_percent");
  expect_close(a.relative_error, e.relative_error, "relative_error");
  expect_close(a.retained_l1, e.retained_l1, "retained_l1");
}

// Index of the first differing element, or -1.
inline int64_t first_bit_difference(const Tensor& a, const Tensor& b) {
  const size_t es = dtype_size(a.dtype());
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(a.data() + i * es, b.data() + i * es, es) != 0) return i;
  }
  return -1;
}

}  // namespace nmkit::test
