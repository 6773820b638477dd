// INT8 2:4 GEMM, 256 x 128 tiles (sparse_gemm_int8_sm80.cu; built with NMKIT_CUDA_EXTRA_TILES).
#include "cuda/sparse_gemm-inl.cuh"

namespace nmkit::cuda {

cudaError_t sparse_gemm_int8_256x128(const SparseGemmArgs& args, cudaStream_t stream) {
  return SparseGemmKernel<int8_t, int32_t, cutlass::arch::OpMultiplyAddSaturate, 256, 128>::run(args, stream);
}

}  // namespace nmkit::cuda
