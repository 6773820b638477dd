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

SparseTileShape sparse_tile_shape(SparseTile tile) {
  switch (tile) {
    case SparseTile::k128x128: return {128, 128};
    case SparseTile::k128x256: return {128, 256};
    case SparseTile::k256x128: return {256, 128};
  }
  return {};
}

std::string sparse_tile_name(SparseTile tile) {
  const SparseTileShape s = sparse_tile_shape(tile);
  return std::to_string(s.rows) + "x" + std::to_string(s.tokens) + "x128";
}

SparseTile choose_sparse_tile(int64_t rows, int64_t tokens, int sms, const std::vector<SparseTile>& built) {
  // The tiles' cells covering the GEMM, and their count.
  auto cover = [&](SparseTile tile, int64_t& count) {
    const SparseTileShape s = sparse_tile_shape(tile);
    count = ((rows + s.rows - 1) / s.rows) * ((tokens + s.tokens - 1) / s.tokens);
    return count * s.rows * s.tokens;
  };
  int64_t count = 0;
  const int64_t base_cells = cover(SparseTile::k128x128, count);
  // Candidates from the largest, rows-major first (the order of the rule in cuda_plan.h).
  for (const SparseTile tile : {SparseTile::k256x128, SparseTile::k128x256}) {
    bool have = false;
    for (const SparseTile b : built) have = have || b == tile;
    if (!have) continue;
    const int64_t cells = cover(tile, count);
    if (count >= sms && 8 * cells <= 9 * base_cells) return tile;
  }
  return SparseTile::k128x128;
}

}  // namespace nmkit::cuda
