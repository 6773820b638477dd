// The scale epilogue of every GEMM backend (docs/design.md 6 and 14): the GEMMs stop at their
// accumulators, this kernel applies y[t, r] = float(acc(t, r)) * (scale_x[t] * scale_w[r]) (+ bias[r])
// in f32, one rounding per operation, the operations of ref_quant_linear; so every backend gives
// the same Y from the same sums, bit for bit for INT8. The accumulators lie as the backend's GEMM
// left them (AccLayout); Y is [tokens, rows] row-major. The element rule and the addressing are
// __host__ __device__ functions, run on the host by tests/cuda/cutlass_sm80_oracle_test.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "quant/quant_rules.h"  // NMKIT_HOST_DEVICE

namespace nmkit::cuda {

// Where accumulator (token t, row r) lies: rows-major acc[r * ld + t] (CUTLASS's D = W x X^T
// stored row-major), else tokens-major acc[t * ld + r] (cuBLASLt's and cuSPARSELt's D stored
// column-major). ld counts elements and covers the GEMM's padded tokens or rows.
struct AccLayout {
  bool rows_major = false;
  int64_t ld = 0;
};

NMKIT_HOST_DEVICE inline int64_t acc_offset(const AccLayout& layout, int64_t t, int64_t r) {
  return layout.rows_major ? r * layout.ld + t : t * layout.ld + r;
}

// One element of Y from its sum (the int32 sum converted to f32 for INT8, exactly).
NMKIT_HOST_DEVICE inline float scaled_output(float sum, float scale_x, float scale_w, const float* bias, int64_t r) {
  const float value = sum * (scale_x * scale_w);
  return bias != nullptr ? value + bias[r] : value;
}

// y [tokens, rows] from acc (int32 when `int_acc`, else f32) laid out as `layout`; bias may be null.
cudaError_t scale_epilogue(const void* acc, bool int_acc, const AccLayout& layout, int64_t tokens, int64_t rows,
                           const float* scale_x, const float* scale_w, const float* bias, float* y,
                           cudaStream_t stream);

}  // namespace nmkit::cuda
