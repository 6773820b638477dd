// The CUTLASS 2.x sparse GEMMs of the GPU path (docs/design.md section 14), behind a plain C++ call:
// one translation unit per kernel (sparse_gemm_int8_sm80*.cu, sparse_gemm_e4m3_sm89.cu), so nvcc
// compiles them in parallel and nothing else sees CUTLASS's templates.
//
//   acc[rows, tokens] = W (2:4, cutlass_sm80 layout) x X^T, row-major (ld = tokens)
//
// int32 sums for INT8, f32 for E4M3; the scales follow in epilogue.cu, as for the library GEMMs.
// The kernels are CUTLASS's plain SparseGemm with its LinearCombination epilogue (D = accumulators):
// the configuration of CUTLASS's own sparse examples and tests. (A fused-scale epilogue visitor
// tree storing Y column-major gave wrong results on an H100: SparseGemmWithVisitor feeds its
// visitors the fragments of a 128-bit-per-access thread map, which a column-major store cannot use;
// docs/design.md 14.)
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "cuda/sparse_tile.h"

namespace nmkit::cuda {

struct SparseGemmArgs {
  int64_t rows = 0;    // a multiple of 16 (the metadata interleave, include/nmkit/cutlass_sm80.h)
  int64_t tokens = 0;  // a multiple of 16 (B's 16-byte accesses; can_implement refuses others)
  int64_t K = 0;       // a multiple of 128 (the threadblock's K): the padded width of X and W
  const void* values = nullptr;  // [rows, K/2] int8 or e4m3 codes
  const void* meta = nullptr;    // [rows, K/8] bytes of uint32 words in CUTLASS's order
  const void* x = nullptr;       // [tokens, K] codes of the same type, zero past the real K
  void* acc = nullptr;           // [rows, tokens] int32 (INT8) or f32 (E4M3)
};

// Where the kernels leave the accumulators: D [rows, tokens] row-major, ld = tokens (the layout of
// CUTLASS's sparse examples; src/cuda/device_layout.cc derives the epilogue's AccLayout from this,
// and sparse_gemm-inl.cuh asserts the kernels' LayoutC against it).
inline constexpr bool kSparseGemmAccRowsMajor = true;

// The INT8 tiles this library was built with.
std::vector<SparseTile> int8_tiles_built();

// cudaErrorInvalidValue when CUTLASS cannot run the shapes or alignments (or `tile` was not
// built), else the launch's error. Asynchronous on `stream`.
cudaError_t sparse_gemm_int8(const SparseGemmArgs& args, SparseTile tile, cudaStream_t stream);
cudaError_t sparse_gemm_e4m3_sm89(const SparseGemmArgs& args, cudaStream_t stream);

// One per built INT8 tile (sparse_gemm_int8_sm80*.cu); sparse_gemm_int8 picks among them.
cudaError_t sparse_gemm_int8_128x128(const SparseGemmArgs& args, cudaStream_t stream);
cudaError_t sparse_gemm_int8_128x256(const SparseGemmArgs& args, cudaStream_t stream);
cudaError_t sparse_gemm_int8_256x128(const SparseGemmArgs& args, cudaStream_t stream);

}  // namespace nmkit::cuda
