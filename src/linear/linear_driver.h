// Portable pieces of SparseLinear's call driver (src/linear/sparse_linear.cc): the dense rows of the
// compute-bound regime (tiles and panels) and the kernel slot of a packed weight. The per-ISA kernels
// they feed are in src/cpu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu/linear_kernels.h"

namespace nmkit::cpu {

// Writes the 4 rows of row block b of w dense, row r at dst + r * ld elements, each K_x wide (zero
// past the weight's K): f32 values (out F32) of an f32 or bf16 weight, bf16 bits (out BF16) of a bf16
// one, int8 codes (out I8) of an INT8 one. A slid weight's rows are its K_prime-wide 2:4 rows, which
// meet the lifted X (folding them back onto K is a scatter per value that cost more than the GEMM
// it fed). Rows past w.rows are written too (padding, never read into an output). Portable code
// around the tier's expansions; its cost is shared by all the tokens of a call.
void decompress_block(const PackedLinear& w, int64_t b, DType out, void* dst, int64_t ld);

// The kernel slot a packed weight runs on (null when the tier lacks it).
LinearFn linear_kernel_for(const LinearKernels& kernels, WeightFormat kind, DType dtype);

}  // namespace nmkit::cpu
