// The scale epilogue of the library GEMMs that stop at the accumulators (cuBLASLt dense,
// cuSPARSELt): y[t, r] = float(acc[t, r]) * (scale_x[t] * scale_w[r]) (+ bias[r]), the rule of
// docs/design.md 6 with the operations in the CUTLASS epilogue's order (sparse_gemm.h), so every
// backend gives the same Y from the same sums.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace nmkit::cuda {

// acc and y [tokens, rows] row-major (acc int32 when `int_acc`, else f32); bias may be null.
cudaError_t scale_epilogue(const void* acc, bool int_acc, int64_t tokens, int64_t rows, const float* scale_x,
                           const float* scale_w, const float* bias, float* y, cudaStream_t stream);

}  // namespace nmkit::cuda
