// Input statistics of one linear layer over calibration tokens (docs/design.md section 12): per-feature
// sums of squares for Wanda and H = X^T X for SparseGPT, both in float64.
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "calib/blas_kernels.h"
#include "nmkit/calib.h"

namespace nmkit {
namespace {

// H is accumulated in its upper triangle; a reader gets both.
void fill_lower_triangle(std::vector<double>& h, int64_t K) {
  for (int64_t i = 0; i < K && !h.empty(); ++i) {
    for (int64_t j = 0; j < i; ++j) h[i * K + j] = h[j * K + i];
  }
}

}  // namespace

InputStats::InputStats(int64_t K, bool with_hessian) : K_(K), sum_sq_(K, 0.0) {
  if (with_hessian) {
    calib_detail::select_blas_kernels();  // before dsyrk
    hessian_.assign(static_cast<size_t>(K * K), 0.0);
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
  const int64_t slab = std::min(calib_detail::slab_rows(K, 1), tokens);
  if (slab_.size() < static_cast<size_t>(slab * K)) slab_.resize(static_cast<size_t>(slab * K));
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
  fill_lower_triangle(h, K_);
  return h;
}

std::vector<double> InputStats::take_hessian() {
  std::vector<double> h = std::move(hessian_);
  hessian_.clear();
  fill_lower_triangle(h, K_);
  slab_ = {};
  return h;
}

}  // namespace nmkit
