#include "linear_baselines.h"

#if NMKIT_HAVE_OPENBLAS
#include <cblas.h>

#include "calib/blas_kernels.h"
#endif

namespace nmkit::bench {

#if NMKIT_HAVE_OPENBLAS
bool have_openblas() { return true; }
std::string openblas_core() { return openblas_get_corename(); }
// The baseline runs the kernels calibration runs (docs/design.md 12, "BLAS kernels"), not the
// Prescott fallback of an OpenBLAS older than the CPU.
void openblas_threads(int threads) {
  calib_detail::select_blas_kernels();
  openblas_set_num_threads(threads);
}
#else
bool have_openblas() { return false; }
std::string openblas_core() { return ""; }
void openblas_threads(int) {}
#endif

OpenBlasLinear::OpenBlasLinear(const float* w, int64_t rows, int64_t K)
    : w_(w, w + rows * K), rows_(rows), K_(K) {}

void OpenBlasLinear::run(const float* x, int64_t M, float* y) const {
#if NMKIT_HAVE_OPENBLAS
  const auto rows = static_cast<blasint>(rows_), K = static_cast<blasint>(K_);
  if (M == 1) {
    // y[rows] = W[rows, K] * x
    cblas_sgemv(CblasRowMajor, CblasNoTrans, rows, K, 1.0f, w_.data(), K, x, 1, 0.0f, y, 1);
  } else {
    // Y[M, rows] = X[M, K] * W^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(M), rows, K, 1.0f, x, K, w_.data(),
                K, 0.0f, y, rows);
  }
#else
  (void)x, (void)M, (void)y;
#endif
}

}  // namespace nmkit::bench
