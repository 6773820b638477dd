// Portable pieces of SparseLinear's call driver (src/linear/sparse_linear.cc): the dense tiles of the
// compute-bound regime and the kernel slot of a packed weight. The
// per-ISA kernels they feed are in src/cpu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu/linear_kernels.h"

namespace nmkit::cpu {

// Decompresses row block b of a sparse (or bf16) packed weight into `tile` in the dense block layout
// (f32 for f32/bf16 weights, int8 for int8): K_x/32 chunks of 4 rows (int8: chunks of 128, the last
// of 64 where K_x is an odd multiple of 64, cpu/linear_common.h int8_chunk_offset). Portable code:
// its cost is shared by all the tokens of a call.
void decompress_block(const PackedLinear& w, int64_t b, void* tile);
// Bytes of one tile of `w`.
size_t tile_bytes(const PackedLinear& w);

// The kernel slot a packed weight runs on (null when the tier lacks it).
LinearFn linear_kernel_for(const LinearKernels& kernels, WeightFormat kind, DType dtype);

}  // namespace nmkit::cpu
