// The factor SparseGPT works with (docs/design.md section 12): U, the upper Cholesky factor of the
// inverse of the damped Hessian, H^-1 = U^T U, with dead inputs fixed first and the damping raised
// tenfold (at most twice) when a factorization fails.
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "calib/blas_kernels.h"
#include "calib/method_common.h"
#include "calib/single_blas_thread.h"
#include "nmkit/calib.h"

namespace nmkit {
namespace {

using calib_detail::layer_prefix;
using calib_detail::num;

// Below this size a factorization is many short level-3 calls and runs on one OpenBLAS thread
// (single_blas_thread.h); from it on, each call is long enough to pay for the threads' hand-offs.
constexpr int64_t kThreadedFactorSize = 4096;

// U from the damped Hessian A without forming A^-1 (design section 12, "the factor"): with J the
// reversal of the index order, J A J = L L^T (L lower) gives A^-1 = (J L^-1 J)^T (J L^-1 J), and
// J L^-1 J is upper with a positive diagonal, so it is U. J M J of a row-major K x K matrix is the
// buffer reversed. LAPACK is column-major: there dpotrf 'U' and dtrtri 'U' leave L^T and L^-T in the
// upper triangle, which reversed is (J L^-1 J)^T in column-major order, U in row-major order.
// Half the work of factoring A, inverting it (dpotri) and factoring again: K^3 / 3 + K^3 / 3
// floating-point multiply-adds against K^3 / 3 + 2 K^3 / 3 + K^3 / 3.
lapack_int factor_of_inverse(std::vector<double>& a, int64_t K) {
  std::optional<calib_detail::SingleBlasThread> single;
  if (K < kThreadedFactorSize) single.emplace();
  const auto n = static_cast<lapack_int>(K);
  std::reverse(a.begin(), a.end());
  lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'U', n, a.data(), n);
  if (info == 0) info = LAPACKE_dtrtri(LAPACK_COL_MAJOR, 'U', 'N', n, a.data(), n);
  std::reverse(a.begin(), a.end());
  return info;
}

}  // namespace

Result<InverseCholesky> inverse_cholesky(const double* H, int64_t K, double damping,
                                         std::string_view name) {
  calib_detail::select_blas_kernels();
  InverseCholesky out;
  lapack_int info = 0;
  double fraction = damping;
  double mean_diag = 0;
  for (int attempt = 0; attempt < 3; ++attempt, fraction *= 10) {
    // The checked copy of H is the buffer factored in place: an attempt that fails starts again
    // from H, so the peak holds H and one K x K buffer (8B's ffn_down: 1.6 GB each).
    auto checked = calib_detail::checked_hessian(H, K, damping, name);
    if (!checked.ok()) return checked.error();
    mean_diag = checked->mean_diag;
    out.dead = std::move(checked->dead);
    out.U = std::move(checked->h);
    for (int64_t k = 0; k < K; ++k) out.U[k * K + k] += fraction * mean_diag;
    info = K > 0 ? factor_of_inverse(out.U, K) : 0;
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
