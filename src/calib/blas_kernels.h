// Which of OpenBLAS's kernels calibration runs on (docs/design.md 12, "BLAS kernels").
//
// A DYNAMIC_ARCH OpenBLAS picks its kernels by CPU model when it loads. One older than the CPU
// (Debian 12's 0.3.21 on an Intel Xeon of family 6 model 207) does not know the model and falls back to its
// Prescott (SSE3) kernels, whatever vector units the CPU has. select_blas_kernels() re-selects by the
// CPU's features in that case only.
#pragma once

#include <string>

namespace nmkit::calib_detail {

// Once per process, before a BLAS call: where OpenBLAS fell back to Prescott and the user set no
// OPENBLAS_CORETYPE, switch to SkylakeX's kernels on AVX-512 (F, BW, DQ, VL) or Haswell's on AVX2 +
// FMA. Anything else (another BLAS, a known CPU, a user's choice) is left as it is. Returns the
// kernels in use afterwards ("" where the BLAS cannot say).
std::string select_blas_kernels();

}  // namespace nmkit::calib_detail
