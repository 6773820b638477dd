// Dense targets (docs/design.md 12.4): each linear of block b is fit to what the dense model's
// linear computes on the dense model's own inputs, not to what it computes on the inputs the
// pruned blocks 0..b-1 give, so that a block corrects the error the blocks before it left.
// Asymmetric calibration after GPTAQ (arXiv 2504.02692): with X_d the dense inputs and X_p the
// pruned ones, row t of both the same token, and the targets X_t = X_p + s (X_d - X_p),
//   W' = argmin ||X_p W'^T - X_t W^T||^2 + lambda ||W' - W||^2
//      = W ((1 - s) H + s C + lambda I)(H + lambda I)^-1,   C = X_d^T X_p, H = X_p^T X_p.
// Since W' solves the normal equations, for any Wp
//   ||X_p Wp^T - X_t W^T||^2 = ||X_p (Wp - W')^T||^2 + const,
// so the methods prune W' on H unchanged, and the refit fits the kept weights to W' on H. The
// full fit (s = 1) overshoots (GPTAQ's own code scales its correction by 0.25): docs/data.md.
#include <cblas.h>
#include <lapacke.h>

#include <cmath>
#include <string>

#include "calib/blas_kernels.h"
#include "calib/method_common.h"
#include "nmkit/calib.h"

namespace nmkit {

using calib_detail::num;

CrossStats::CrossStats(int64_t K) : K_(K) {
  calib_detail::select_blas_kernels();  // before dgemm
  cross_.assign(static_cast<size_t>(K * K), 0.0);
}

void CrossStats::add(const float* dense, const float* pruned, int64_t tokens) {
  const int64_t K = K_;
  tokens_ += tokens;
  if (K == 0 || tokens <= 0) return;
  const int64_t slab = std::min(calib_detail::slab_rows(K, 2), tokens);  // both streams
  if (dense_slab_.size() < static_cast<size_t>(slab * K)) {
    dense_slab_.resize(static_cast<size_t>(slab * K));
    pruned_slab_.resize(static_cast<size_t>(slab * K));
  }
  for (int64_t t0 = 0; t0 < tokens; t0 += slab) {
    const int64_t n = std::min(slab, tokens - t0);
    for (int64_t i = 0; i < n * K; ++i) {
      dense_slab_[static_cast<size_t>(i)] = dense[t0 * K + i];
      pruned_slab_[static_cast<size_t>(i)] = pruned[t0 * K + i];
    }
    // C += Xd^T Xp, both slabs [n, K] row-major.
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(K), static_cast<int>(K),
                static_cast<int>(n), 1.0, dense_slab_.data(), static_cast<int>(K), pruned_slab_.data(),
                static_cast<int>(K), 1.0, cross_.data(), static_cast<int>(K));
  }
}

std::vector<double> CrossStats::take() {
  std::vector<double> c = std::move(cross_);
  cross_.clear();
  dense_slab_ = {};
  pruned_slab_ = {};
  return c;
}

Result<Tensor> retarget_to_dense(const TensorView& w, const double* C, const double* H, int64_t K,
                                 double strength, double damping, std::string_view name) {
  calib_detail::select_blas_kernels();
  const std::string where = calib_detail::layer_prefix(name);
  if (w.shape.size() != 2 || w.cols() != K) {
    return Error(where + "dense targets need a 2-D weight of " + std::to_string(K) + " columns, got " +
                 shape_str(w.shape));
  }
  if (!(damping > 0) || !std::isfinite(damping)) {
    return Error(where + "dense targets need a positive damping, got " + num(damping));
  }
  if (!(strength >= 0 && strength <= 1)) {
    return Error(where + "dense targets need a strength from 0 to 1, got " + num(strength));
  }
  auto weight = calib_detail::finite_f32(w, name);
  if (!weight.ok()) return weight.error();
  auto checked = calib_detail::checked_hessian(H, K, damping, name);
  if (!checked.ok()) return checked.error();
  const int64_t rows = w.rows();
  const double lambda = damping * checked->mean_diag;
  std::vector<double> A = std::move(checked->h);
  // M = (1 - s) H + s C + lambda I; A = H + lambda I.
  std::vector<double> M(static_cast<size_t>(K * K));
  for (int64_t i = 0; i < K * K; ++i) {
    if (!std::isfinite(C[i])) {
      return Error(where + "dense targets: the cross statistics hold " + num(C[i]) + " at (" +
                   std::to_string(i / K) + ", " + std::to_string(i % K) + ")");
    }
    M[static_cast<size_t>(i)] = (1 - strength) * A[static_cast<size_t>(i)] + strength * C[i];
  }
  for (int64_t k = 0; k < K; ++k) {
    A[static_cast<size_t>(k * K + k)] += lambda;
    M[static_cast<size_t>(k * K + k)] += lambda;
  }
  // B = W M, [rows, K] row-major.
  const std::vector<double> W(weight->begin(), weight->end());
  std::vector<double> B(static_cast<size_t>(rows * K));
  if (rows > 0 && K > 0) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(K),
                static_cast<int>(K), 1.0, W.data(), static_cast<int>(K), M.data(), static_cast<int>(K), 0.0,
                B.data(), static_cast<int>(K));
    // W' A = B with A symmetric: A W'^T = B^T. Read column-major, the row-major B is B^T (K x rows),
    // and the solution left in its place is W'^T column-major, W' row-major.
    const auto k = static_cast<lapack_int>(K);
    lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', k, A.data(), k);
    if (info == 0) info = LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', k, static_cast<lapack_int>(rows), A.data(), k,
                                         B.data(), k);
    if (info != 0) {
      return Error(where + "dense targets: H + " + num(damping) + " x mean(diag H) is not positive definite "
                   "(LAPACK info " + std::to_string(info) + ")");
    }
  }
  std::vector<float> out(B.size());
  for (size_t i = 0; i < B.size(); ++i) {
    out[i] = static_cast<float>(B[i]);
    if (!std::isfinite(out[i])) {
      return Error(where + "dense targets: the retargeted weight at row " + std::to_string(i / K) + ", column " +
                   std::to_string(i % K) + " is " + num(B[i]));
    }
  }
  return Tensor::from_f32(std::move(out), {rows, K});
}

}  // namespace nmkit
