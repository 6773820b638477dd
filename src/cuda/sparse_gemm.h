// The CUTLASS 2.x sparse GEMMs of the GPU path (docs/design.md section 14), behind a plain C++ call:
// one translation unit per kernel (sparse_gemm_int8_sm80.cu, sparse_gemm_e4m3_sm89.cu), so nvcc
// compiles them in parallel and nothing else sees CUTLASS's templates.
//
// D[rows, tokens] = W (2:4, cutlass_sm80 layout) x X^T, then the epilogue of section 6:
//   y[t, r] = float(acc[r, t]) * (scale_x[t] * scale_w[r]) + bias[r]
// written as Y [tokens, rows] f32 row-major (D column-major). Without a bias the last add is of -0.0f,
// which leaves every value as it is, so the result equals the CPU's bit for bit whether or not a bias
// is set (INT8: the int32 sums are exact; E4M3: the tensor cores sum in their own order).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace nmkit::cuda {

struct SparseGemmArgs {
  int64_t rows = 0;    // a multiple of 16 (the metadata interleave, include/nmkit/cutlass_sm80.h)
  int64_t tokens = 0;  // a multiple of 16 (B's 16-byte accesses; can_implement refuses others)
  int64_t K = 0;       // a multiple of 128 (the threadblock's K): the padded width of X and W
  const void* values = nullptr;  // [rows, K/2] int8 or e4m3 codes
  const void* meta = nullptr;    // [rows, K/8] bytes of uint32 words in CUTLASS's order
  const void* x = nullptr;       // [tokens, K] codes of the same type, zero past the real K
  const float* scale_w = nullptr;  // [rows]
  const float* scale_x = nullptr;  // [tokens]
  const float* bias = nullptr;     // [rows] or null
  float* y = nullptr;              // [tokens, rows]
};

// cudaErrorInvalidValue when CUTLASS cannot run the shapes or alignments (checked by the caller
// first), else the launch's error. Asynchronous on `stream`.
cudaError_t sparse_gemm_int8_sm80(const SparseGemmArgs& args, cudaStream_t stream);
cudaError_t sparse_gemm_e4m3_sm89(const SparseGemmArgs& args, cudaStream_t stream);

}  // namespace nmkit::cuda
