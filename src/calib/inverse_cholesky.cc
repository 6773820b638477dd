// The factor SparseGPT works with (docs/design.md section 12): U, the upper Cholesky factor of the
// inverse of the damped Hessian, H^-1 = U^T U, with dead inputs fixed first and the damping raised
// tenfold (at most twice) when a factorization fails.
#include <lapacke.h>

#include <cmath>
#include <string>

#include "calib/blas_kernels.h"
#include "calib/method_common.h"
#include "calib/single_blas_thread.h"
#include "nmkit/calib.h"

namespace nmkit {
namespace {

using calib_detail::layer_prefix;
using calib_detail::num;

// LAPACK is column-major; a row-major upper triangle is the column-major lower triangle of the
// same buffer, so every call below passes 'L' and needs no transposed copy. In row-major terms:
// dpotrf 'L' leaves U with A = U^T U in the upper triangle; dpotri 'L' leaves the upper triangle of
// A^-1; a second dpotrf of A^-1 gives U with A^-1 = U^T U.
lapack_int factor_inverse(std::vector<double>& a, int64_t K) {
  const calib_detail::SingleBlasThread single;
  const auto n = static_cast<lapack_int>(K);
  lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', n, a.data(), n);
  if (info != 0) return info;
  info = LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', n, a.data(), n);
  if (info != 0) return info;
  return LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', n, a.data(), n);
}

}  // namespace

Result<InverseCholesky> inverse_cholesky(const double* H, int64_t K, double damping,
                                         std::string_view name) {
  calib_detail::select_blas_kernels();
  auto checked = calib_detail::checked_hessian(H, K, damping, name);
  if (!checked.ok()) return checked.error();
  const std::vector<double>& base = checked->h;
  const double mean_diag = checked->mean_diag;
  InverseCholesky out;
  out.dead = checked->dead;
  lapack_int info = 0;
  double fraction = damping;
  for (int attempt = 0; attempt < 3; ++attempt, fraction *= 10) {
    out.U = base;
    for (int64_t k = 0; k < K; ++k) out.U[k * K + k] += fraction * mean_diag;
    info = K > 0 ? factor_inverse(out.U, K) : 0;
    if (info == 0) {
      for (int64_t i = 0; i < K; ++i) {
        for (int64_t j = 0; j < i; ++j) out.U[i * K + j] = 0;
      }
      out.damping = fraction;
      return out;
    }
  }
  return Error(layer_prefix(name) + "Cholesky factorization of the damped Hessian failed at dampings " +
               num(damping) + ", " + num(damping * 10) + " and " + num(damping * 100) +
               " x mean diagonal " + num(mean_diag) + " (LAPACK info " + std::to_string(info) +
               "): the Hessian is not positive definite");
}

}  // namespace nmkit
