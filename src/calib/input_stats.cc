// Input statistics of one linear layer over calibration tokens (docs/design.md section 12): per-feature
// sums of squares for Wanda and H = X^T X for SparseGPT, both in float64.
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "calib/blas_kernels.h"
#include "nmkit/calib.h"

namespace nmkit {
namespace {

// Rows of X converted per dsyrk call: ~2 MB of float64, large enough that dsyrk runs as a
// blocked rank-k update (measured: below ~64 rows it falls to rank-1-like speed).
int64_t slab_rows(int64_t K) { return std::max<int64_t>(64, (int64_t{1} << 18) / std::max<int64_t>(K, 1)); }

}  // namespace

InputStats::InputStats(int64_t K, bool with_hessian) : K_(K), sum_sq_(K, 0.0) {
  if (with_hessian) {
    calib_detail::select_blas_kernels();  // before dsyrk
    hessian_.assign(static_cast<size_t>(K * K), 0.0);
    slab_.resize(static_cast<size_t>(slab_rows(K) * K));
  }
}

void InputStats::add(const float* X, int64_t tokens, int64_t ld) {
  if (ld == 0) ld = K_;
  const int64_t K = K_;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* x = X + t * ld;
    double* s = sum_sq_.data();
    for (int64_t k = 0; k < K; ++k) {
      const double v = x[k];
      s[k] += v * v;
    }
  }
  tokens_ += tokens;
  if (hessian_.empty() || K == 0) return;
  const int64_t slab = slab_rows(K);
  for (int64_t t0 = 0; t0 < tokens; t0 += slab) {
    const int64_t n = std::min(slab, tokens - t0);
    for (int64_t t = 0; t < n; ++t) {
      const float* x = X + (t0 + t) * ld;
      double* d = slab_.data() + t * K;
      for (int64_t k = 0; k < K; ++k) d[k] = x[k];
    }
    // Upper triangle of H += slab^T slab (row-major slab [n, K]).
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(K), static_cast<int>(n), 1.0,
                slab_.data(), static_cast<int>(K), 1.0, hessian_.data(), static_cast<int>(K));
  }
}

std::vector<float> InputStats::act_norms() const {
  std::vector<float> a(static_cast<size_t>(K_));
  for (int64_t k = 0; k < K_; ++k) a[k] = static_cast<float>(std::sqrt(sum_sq_[k]));
  return a;
}

std::vector<double> InputStats::hessian() const {
  std::vector<double> h = hessian_;
  const int64_t K = K_;
  for (int64_t i = 0; i < K && !h.empty(); ++i) {
    for (int64_t j = 0; j < i; ++j) h[i * K + j] = h[j * K + i];
  }
  return h;
}

}  // namespace nmkit
