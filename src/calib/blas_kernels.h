// Which of OpenBLAS's kernels calibration runs on (docs/design.md 12, "BLAS kernels"), and how many
// rows its statistics hand each BLAS call.
//
// A DYNAMIC_ARCH OpenBLAS picks its kernels by CPU model when it loads. One older than the CPU
// (Debian 12's 0.3.21 on an Intel Xeon of family 6 model 207) does not know the model and falls back to its
// Prescott (SSE3) kernels, whatever vector units the CPU has. select_blas_kernels() re-selects by the
// CPU's features in that case only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace nmkit::calib_detail {

// Once per process, before a BLAS call: where OpenBLAS fell back to Prescott and the user set no
// OPENBLAS_CORETYPE, switch to SkylakeX's kernels on AVX-512 (F, BW, DQ, VL) or Haswell's on AVX2 +
// FMA. Anything else (another BLAS, a known CPU, a user's choice) is left as it is. Returns the
// kernels in use afterwards ("" where the BLAS cannot say).
std::string select_blas_kernels();

// Rows of float32 inputs converted to float64 per rank-k update of a K x K statistic (dsyrk for H,
// dgemm for the dense targets' C): about 32 MB of float64 over the `streams` converted (at least 64
// rows), so that each call runs at the kernel's compute rate rather than at the rate the statistic
// streams through memory (read and written once a call: 537 MB at K = 8192).
inline int64_t slab_rows(int64_t K, int64_t streams) {
  return std::max<int64_t>(64, (int64_t{1} << 22) / (std::max<int64_t>(K, 1) * streams));
}

}  // namespace nmkit::calib_detail
