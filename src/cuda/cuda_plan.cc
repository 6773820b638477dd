// Rules (include/nmkit/cuda_linear.h): dense weights run cuBLASLt; 2:4 and slid weights run
// cuSPARSELt on Hopper where the library loads (its kernels use Hopper's wgmma; CUTLASS 2.x runs
// Ampere's mma.sp there) and CUTLASS's SparseGemm elsewhere. FP8 needs sm_89 (Ada) or later.
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
      return CudaBackend::Cutlass;
    case CudaBackend::Auto:
      break;
  }
  return sm >= 90 && cusparselt_loads ? CudaBackend::CusparseLt : CudaBackend::Cutlass;
}

}  // namespace nmkit::cuda
