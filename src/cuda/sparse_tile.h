// Plain C++17 with no nmkit header: the kernels' translation units include it.
#pragma once

#include <cstdint>
#include <string>

namespace nmkit::cuda {

// Threadblock tiles of CUTLASS's INT8 sparse GEMM (sparse_gemm.h), rows x tokens x 128 K,
// 64 x 64 warps, 3 stages. 128x128 is always built; the others only with NMKIT_CUDA_EXTRA_TILES
// (src/cuda/CMakeLists.txt), which scripts/gpu_check.sh turns on to measure them.
enum class SparseTile : uint8_t { k128x128, k128x256, k256x128 };
struct SparseTileShape {
  int rows = 0, tokens = 0;  // of D = W x X^T: rows of W, tokens of X
};
SparseTileShape sparse_tile_shape(SparseTile tile);
std::string sparse_tile_name(SparseTile tile);  // "128x128x128"

}  // namespace nmkit::cuda
