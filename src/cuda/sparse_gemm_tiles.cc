// Which INT8 tiles were built (NMKIT_CUDA_EXTRA_TILES, src/cuda/CMakeLists.txt) and the call of one.
#include "cuda/sparse_gemm.h"

namespace nmkit::cuda {

std::vector<SparseTile> int8_tiles_built() {
#if NMKIT_CUDA_EXTRA_TILES
  return {SparseTile::k128x128, SparseTile::k128x256, SparseTile::k256x128};
#else
  return {SparseTile::k128x128};
#endif
}

cudaError_t sparse_gemm_int8(const SparseGemmArgs& args, SparseTile tile, cudaStream_t stream) {
  switch (tile) {
    case SparseTile::k128x128: return sparse_gemm_int8_128x128(args, stream);
#if NMKIT_CUDA_EXTRA_TILES
    case SparseTile::k128x256: return sparse_gemm_int8_128x256(args, stream);
    case SparseTile::k256x128: return sparse_gemm_int8_256x128(args, stream);
#endif
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace nmkit::cuda
