// Per-token INT8 / E4M3 quantization of activations fused with SlideSparse's lifting, on the GPU
// (docs/design.md sections 5, 6 and 14): one read of X, one write of the codes and the scales.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/quant_lift_rows.h"

namespace nmkit::cuda {

// Rows [0, M) of x (f32, or bf16 as uint16 when `bf16`; row m at x + m * x_stride elements) into
// codes (row m at codes + m * codes_stride bytes, shape.cols of them, 4-byte aligned) and scales[M].
// A row holding a NaN or infinity gets no codes and lowers *bad_row (device memory, read as an
// unsigned 64-bit word; the caller sets it to M or above first) to its index. Asynchronous on
// `stream`.
cudaError_t quantize_lift(const void* x, bool bf16, int64_t M, int64_t x_stride, const LiftRows& shape,
                          uint8_t* codes, int64_t codes_stride, float* scales, int64_t* bad_row,
                          cudaStream_t stream);

}  // namespace nmkit::cuda
