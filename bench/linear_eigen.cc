// Eigen's CSR product, built with OpenMP when available so that its row loop runs on every thread
// like the other kernels (Eigen parallelises row-major sparse x dense products under OpenMP).
#include "linear_baselines.h"

#if NMKIT_HAVE_EIGEN
#include <Eigen/Core>
#include <Eigen/SparseCore>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace nmkit::bench {

#if NMKIT_HAVE_EIGEN
bool have_eigen() { return true; }

struct EigenCsrLinear::Impl {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::SparseMatrix<float, Eigen::RowMajor, int> w;
  int64_t rows = 0, K = 0;
  RowMajor xt, yt;  // X^T (K x M) and Y^T (rows x M), row-major
};

EigenCsrLinear::EigenCsrLinear(const float* w, int64_t rows, int64_t K) : impl_(std::make_unique<Impl>()) {
  impl_->rows = rows;
  impl_->K = K;
  std::vector<Eigen::Triplet<float, int>> entries;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      if (w[r * K + k] != 0.0f) entries.emplace_back(static_cast<int>(r), static_cast<int>(k), w[r * K + k]);
    }
  }
  impl_->w.resize(static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(K));
  impl_->w.setFromTriplets(entries.begin(), entries.end());
  impl_->w.makeCompressed();
}

EigenCsrLinear::~EigenCsrLinear() = default;

void EigenCsrLinear::run(const float* x, int64_t M, float* y) const {
  const auto K = static_cast<Eigen::Index>(impl_->K), rows = static_cast<Eigen::Index>(impl_->rows);
  if (M == 1) {  // y = W x: a sparse matrix-vector product
    Eigen::Map<const Eigen::VectorXf> xv(x, K);
    Eigen::Map<Eigen::VectorXf> yv(y, rows);
    yv.noalias() = impl_->w * xv;
    return;
  }
  // Y^T = W X^T with X^T row-major, so that each non-zero of W scales one contiguous row of M
  // activations (W is streamed once); the two transpositions are part of the timed call.
  using RowMajor = Impl::RowMajor;
  const auto Mi = static_cast<Eigen::Index>(M);
  Eigen::Map<const RowMajor> xm(x, Mi, K);
  impl_->xt = xm.transpose();
  impl_->yt.resize(rows, Mi);
  impl_->yt.noalias() = impl_->w * impl_->xt;
  Eigen::Map<RowMajor> ym(y, Mi, rows);
  ym = impl_->yt.transpose();
}

size_t EigenCsrLinear::weight_bytes() const {
  return static_cast<size_t>(impl_->w.nonZeros()) * (4 + 4) + static_cast<size_t>(impl_->rows + 1) * 4;
}

int EigenCsrLinear::threads() const {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
#else
bool have_eigen() { return false; }
struct EigenCsrLinear::Impl {};
EigenCsrLinear::EigenCsrLinear(const float*, int64_t, int64_t) {}
EigenCsrLinear::~EigenCsrLinear() = default;
void EigenCsrLinear::run(const float*, int64_t, float*) const {}
size_t EigenCsrLinear::weight_bytes() const { return 0; }
int EigenCsrLinear::threads() const { return 1; }
#endif

}  // namespace nmkit::bench
