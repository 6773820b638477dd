// FP8 E4M3 2:4 GEMM (mma.sp m16n8k64 f32.e4m3.e4m3.f32), for Ada (sm_89) only: Hopper has no FP8
// mma.sp (ptxas emulates it with f16 HMMA.SP and spills), FP8 runs cuSPARSELt there. f32
// accumulation in the tensor cores (OpMultiplyAdd, not the FastAccum variant, which drops low bits
// of the running sums).
#include "cuda/sparse_gemm-inl.cuh"

namespace nmkit::cuda {

cudaError_t sparse_gemm_e4m3_sm89(const SparseGemmArgs& args, cudaStream_t stream) {
  return SparseGemmKernel<cutlass::float_e4m3_t, float, cutlass::arch::OpMultiplyAdd, 128, 128>::run(args, stream);
}

}  // namespace nmkit::cuda
