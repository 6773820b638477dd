// One OpenBLAS thread for the Hessian factorizations (inverse_cholesky.cc, admm.cc): they are small
// (K = 1536: 0.25 s of CPU) and made of many short level-3 calls, each a thread synchronization; on
// this shared 2-core VM under load the 2-thread version took 11.1 s of wall time for 0.25 s of CPU,
// the 1-thread one 2.7 s (measured 2026-11-23, load average ~20).
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
