// Rules (include/nmkit/cuda_linear.h): dense weights run cuBLASLt; 2:4 and slid weights run
// cuSPARSELt on Hopper where the library loads (its kernels use Hopper's wgmma; CUTLASS 2.x runs
// Ampere's mma.sp there) and CUTLASS's SparseGemm elsewhere. FP8 needs sm_89 (Ada) or later, and
// CUTLASS's FP8 kernel runs on Ada only (Hopper has no FP8 mma.sp: src/cuda/CMakeLists.txt).
#include "cuda/cuda_plan.h"

#include <string>

namespace nmkit::cuda {

Result<CudaBackend> choose_backend(WeightFormat format, QuantType type, CudaBackend requested, int sm,
                                   bool cusparselt_loads) {
  const std::string gpu = "sm_" + std::to_string(sm);
  if (type == QuantType::E4M3 && sm < 89) {
    return Error(ErrorCode::Unsupported, "E4M3 needs an Ada or Hopper GPU (sm_89 or later), this one is " + gpu);
  }
  if (format == WeightFormat::Dense) {
    if (requested != CudaBackend::Auto && requested != CudaBackend::CublasLt) {
      return Error(ErrorCode::InvalidArgument,
                   "a dense weight runs on cuBLASLt, not " + std::string(cuda_backend_name(requested)));
    }
    return CudaBackend::CublasLt;
  }
  switch (requested) {
    case CudaBackend::CublasLt:
      return Error(ErrorCode::InvalidArgument, "cuBLASLt runs dense weights only");
    case CudaBackend::CusparseLt:
      if (!cusparselt_loads) return Error(ErrorCode::NotFound, "cuSPARSELt does not load (set NMKIT_CUSPARSELT)");
      return CudaBackend::CusparseLt;
    case CudaBackend::Cutlass:
      if (type == QuantType::E4M3 && sm != 89) {
        return Error(ErrorCode::Unsupported, "CUTLASS's E4M3 kernel runs on sm_89 only, this GPU is " + gpu +
                                                 " (Hopper has no FP8 mma.sp; use cuSPARSELt)");
      }
      return CudaBackend::Cutlass;
    case CudaBackend::Auto:
      break;
  }
  if (sm >= 90 && cusparselt_loads) return CudaBackend::CusparseLt;
  if (type == QuantType::E4M3 && sm != 89) {
    return Error(ErrorCode::NotFound, "E4M3 on " + gpu + " runs on cuSPARSELt, which does not load (set NMKIT_CUSPARSELT)");
  }
  return CudaBackend::Cutlass;
}

}  // namespace nmkit::cuda
