// INT8 2:4 GEMM, 128 x 256 tiles (sparse_gemm_int8_sm80.cu; built with NMKIT_CUDA_EXTRA_TILES).
#include "cuda/sparse_gemm-inl.cuh"

namespace nmkit::cuda {

cudaError_t sparse_gemm_int8_128x256(const SparseGemmArgs& args, cudaStream_t stream) {
  return SparseGemmKernel<int8_t, int32_t, cutlass::arch::OpMultiplyAddSaturate, 128, 256>::run(args, stream);
}

}  // namespace nmkit::cuda
