// docs/design.md 12, "BLAS kernels": calibration's BLAS runs kernels of this CPU's vector width, not
// the Prescott fallback of an OpenBLAS that does not know the CPU (8x slower dgemm on an Intel Xeon, family 6 model 207), and
// the switch leaves the results right and the environment as it was.
#include <cblas.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "calib/blas_kernels.h"

namespace nmkit {
namespace {

bool has_avx512_for_openblas() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

TEST(BlasKernels, NotThePrescottFallbackOnAVX2OrWider) {
  const bool user_choice = std::getenv("OPENBLAS_CORETYPE") != nullptr;
  const std::string kernels = calib_detail::select_blas_kernels();
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE") != nullptr, user_choice) << "the environment changed";
  if (user_choice) GTEST_SKIP() << "OPENBLAS_CORETYPE is set: the user's choice is kept (" << kernels << ")";
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2 + FMA";
  EXPECT_NE(kernels, "Prescott");
  EXPECT_NE(kernels, "");
  // Once chosen, a second call changes nothing.
  EXPECT_EQ(calib_detail::select_blas_kernels(), kernels);
  if (has_avx512_for_openblas()) {
    // OpenBLAS may know the CPU itself (then any AVX-512 kernels it picked stand); it must not run
    // 2-lane kernels on a CPU with 8-lane ones.
    EXPECT_NE(kernels, "Haswell") << "AVX-512 CPU on AVX2 kernels";
  }
}

// The kernels chosen compute what a plain loop computes (awkward sizes: edge tiles of every kernel).
TEST(BlasKernels, DgemmAfterTheSwitchMatchesALoop) {
  calib_detail::select_blas_kernels();
  const int M = 37, N = 53, K = 71;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> a(M * K), b(K * N), c(M * N, 0.5);
  for (double& v : a) v = u(rng);
  for (double& v : b) v = u(rng);
  std::vector<double> expected(c);
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double sum = 0;
      for (int k = 0; k < K; ++k) sum += a[i * K + k] * b[k * N + j];
      expected[i * N + j] += -2.0 * sum;
    }
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, -2.0, a.data(), K, b.data(), N, 1.0, c.data(), N);
  for (int i = 0; i < M * N; ++i) EXPECT_NEAR(c[i], expected[i], 1e-12) << "element " << i;
}

}  // namespace
}  // namespace nmkit
