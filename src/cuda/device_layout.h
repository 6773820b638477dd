// What each backend's GEMM reads and writes (docs/design.md 14): the padded sizes it runs, where
// its accumulators lie and the weight bytes uploaded for it. Host code shared by CudaSparseLinear
// (src/cuda/cuda_sparse_linear.cc) and the host test that runs these very arguments through
// CUTLASS's reference GEMM and the epilogue's element rule (tests/cuda/gemm_arguments_oracle_test.cu).
#pragma once

#include <cstdint>

#include "cuda/epilogue.h"
#include "nmkit/cuda_linear.h"
#include "nmkit/format.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit::cuda {

// X codes and weight rows are padded to whole threadblock tiles of CUTLASS's K (128): its sparse
// GEMM refuses other K, since metadata read past the end would be zero-filled and 0 is no valid
// nibble (cutlass/gemm/kernel/sparse_gemm.h, can_implement). One padding for every backend.
constexpr int64_t kAlignK = 128;

inline int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// The GEMM of a call of M tokens: D = W [rows_gemm, K_x] x X^T [K_x, tokens_gemm], zero codes in
// W's padding rows and columns and X's padding columns; X's rows from M on are scratch that the
// quantizer leaves unwritten (their sums land in padding columns of D, which the epilogue skips).
//   CUTLASS     rows to 16 (the metadata interleave of 8-bit operands), tokens to 16 (B's 16-byte
//               accesses; can_implement), D row-major [rows_gemm, tokens_gemm]
//   cuSPARSELt  rows and tokens to 32 (8-bit structured and dense matrices take multiples of 32:
//               cusparseLtStructuredDescriptorInit refuses rows = 16 with NOT_SUPPORTED), D
//               column-major, i.e. [tokens_gemm, rows_gemm]
//   cuBLASLt    no padding but K's, D column-major [M, rows]
struct GemmGeometry {
  int64_t rows_gemm = 0, tokens_gemm = 0, K_x = 0;
  AccLayout acc;
  int64_t acc_elements() const { return rows_gemm * tokens_gemm; }
};
int64_t gemm_rows(CudaBackend backend, int64_t rows);
GemmGeometry gemm_geometry(CudaBackend backend, int64_t rows, int64_t K_x, int64_t M);

// The weight as uploaded: CUTLASS reads values and meta (include/nmkit/cutlass_sm80.h, rows
// padded to 16 by the layout), the libraries the dense codes [gemm_rows, K_x].
struct StagedWeight {
  Tensor values, meta;  // CUTLASS
  Tensor dense;         // cuBLASLt, cuSPARSELt
};
// codes: the quantized weight [rows, K_in] (K_in <= K_x); sparse: the same codes as 2:4 (needed
// for CUTLASS; null for a dense weight).
Result<StagedWeight> stage_weight(CudaBackend backend, const Tensor& codes, const Sparse24* sparse, int64_t K_x);

}  // namespace nmkit::cuda
