// One OpenBLAS thread for the small Hessian factorizations (inverse_cholesky.cc below K = 4096,
// admm.cc): they are many short level-3 calls, each a thread hand-off, which on a loaded machine
// cost more wall time than the second thread saves (docs/data.md, "OpenBLAS's kernels on an
// unknown CPU").
#pragma once

#include <cblas.h>  // OpenBLAS's: openblas_set_num_threads

namespace nmkit::calib_detail {

class SingleBlasThread {
 public:
  SingleBlasThread() : threads_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~SingleBlasThread() { openblas_set_num_threads(threads_); }
  SingleBlasThread(const SingleBlasThread&) = delete;
  SingleBlasThread& operator=(const SingleBlasThread&) = delete;

 private:
  int threads_;
};

}  // namespace nmkit::calib_detail
