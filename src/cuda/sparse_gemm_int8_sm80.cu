// INT8 2:4 GEMM (IMMA.SP, mma.sp m16n8k64 s8.s8.s32), 128 x 128 tiles: compiled for sm_80 (which
// sm_86/sm_89 run) and sm_90. Saturating adds as CUTLASS's INT8 examples: the sums of |q| <= 127
// codes stay far below 2^31 for any K nmkit takes (127^2 * K/2 < 2^31 up to K = 266k).
#include "cuda/sparse_gemm-inl.cuh"

namespace nmkit::cuda {

cudaError_t sparse_gemm_int8_128x128(const SparseGemmArgs& args, cudaStream_t stream) {
  return SparseGemmKernel<int8_t, int32_t, cutlass::arch::OpMultiplyAddSaturate, 128, 128>::run(args, stream);
}

}  // namespace nmkit::cuda
