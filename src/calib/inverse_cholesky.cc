// The factor SparseGPT works with (docs/design.md section 12): U, the upper Cholesky factor of the
// inverse of the damped Hessian, H^-1 = U^T U, with dead inputs fixed first and the damping raised
// tenfold (at most twice) when a factorization fails.
#include <cblas.h>  // OpenBLAS's: openblas_set_num_threads
#include <lapacke.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <string>

#include "nmkit/calib.h"

namespace nmkit {
namespace {

std::string layer(std::string_view name) {
  return name.empty() ? std::string() : "layer '" + std::string(name) + "': ";
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// LAPACK is column-major; a row-major upper triangle is the column-major lower triangle of the
// same buffer, so every call below passes 'L' and needs no transposed copy. In row-major terms:
// dpotrf 'L' leaves U with A = U^T U in the upper triangle; dpotri 'L' leaves the upper triangle of
// A^-1; a second dpotrf of A^-1 gives U with A^-1 = U^T U.
// One OpenBLAS thread for the factorizations: they are small (K = 1536: 0.25 s of CPU) and made of
// many short level-3 calls, each a thread synchronization; on this shared 2-core VM under load the
// 2-thread version took 11.1 s of wall time for 0.25 s of CPU, the 1-thread one 2.7 s (measured
// 2026-11-23, load average ~20).
class SingleBlasThread {
 public:
  SingleBlasThread() : threads_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~SingleBlasThread() { openblas_set_num_threads(threads_); }
  SingleBlasThread(const SingleBlasThread&) = delete;
  SingleBlasThread& operator=(const SingleBlasThread&) = delete;

 private:
  int threads_;
};

lapack_int factor_inverse(std::vector<double>& a, int64_t K) {
  const SingleBlasThread single;
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
  if (K < 0) return Error(layer(name) + "negative Hessian size " + std::to_string(K));
  if (!(damping >= 0) || !std::isfinite(damping)) {
    return Error(layer(name) + "damping must be a finite fraction >= 0, got " + num(damping));
  }
  InverseCholesky out;
  std::vector<double> base(static_cast<size_t>(K * K), 0.0);
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = i; j < K; ++j) {
      const double v = H[i * K + j];
      if (!std::isfinite(v)) {
        return Error(layer(name) + "Hessian at [" + std::to_string(i) + ", " + std::to_string(j) +
                     "] is " + num(v));
      }
      base[i * K + j] = v;
    }
  }
  double diag_sum = 0;
  for (int64_t k = 0; k < K; ++k) {
    double& d = base[k * K + k];
    if (d == 0) {  // an input that is zero on every calibration token
      d = 1;
      out.dead.push_back(k);
    }
    diag_sum += d;
  }
  const double mean_diag = K > 0 ? diag_sum / static_cast<double>(K) : 0.0;
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
  return Error(layer(name) + "Cholesky factorization of the damped Hessian failed at dampings " +
               num(damping) + ", " + num(damping * 10) + " and " + num(damping * 100) +
               " x mean diagonal " + num(mean_diag) + " (LAPACK info " + std::to_string(info) +
               "): the Hessian is not positive definite");
}

}  // namespace nmkit
