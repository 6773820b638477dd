// Repacking of weights into the kernels' layouts (SparseLinear, include/nmkit/linear.h).
//
// Layout (the packed weight; X is copied once per call into rows of K_x = K rounded up to the chunk
// width, zero-filled, so kernels never see a tail):
//   dense f32/bf16: rows in blocks of 4 (zero rows pad the last block), K in chunks of 32; for block
//     b and chunk c, (4, 32) values, one row after another. Shape (rows_pad/4, K_x/32, 4, 32).
//   sparse24 f32/bf16 (K_x a multiple of 64, so the bf16-activation kernel takes chunk pairs):
//     values (rows_pad/4, K_x/32, 4, 16): each row's 16 kept values of the chunk,
//     as in the sparse24 format; meta (rows_pad/4, K_x/32, 4) 32-bit words, each the 8 nibbles of one
//     row's chunk in sparse24 order (2-bit field s of the word = position of value s in its group).
//     Padding groups are (0, 1) with zero values.
//   nm f32/bf16: K in superchunks of S = lcm(group, 32) elements (K_x a multiple of S); values
//     (rows_pad/4, K_x/S, 4, S/group*keep) and masks (rows_pad/4, K_x/S, 4, S/8) bytes, each row's
//     slots and mask bits of the superchunk as in the nm format (groups past the weight are empty),
//     plus a slack of zeros after the values so a kernel may load a full vector at the last value.
//   int8 (dense, sparse24, slid): as the f32 layouts with int8 values and K chunks of 128 (sparse24:
//     64 values and 16 bytes of meta, i.e. four 32-bit words, per row and chunk), except that K_x is
//     K rounded up to 64 and, when that is an odd multiple of 64, a row block ends with a chunk of
//     64 K ((4, 64) dense codes; sparse24 (4, 32) values and (4, 2) meta words), so a row of 576
//     streams 576 bytes dense and 360 as sparse24, not 640 and 400; plus per-row
//     scales and per-row sums of the int8 values (for the unsigned-activation form of VNNI). A slid
//     weight is the sparse24 int8 layout over K_prime; X is lifted to K_prime while quantized.
//   Forms built from these by the first call that runs them: oneDNN's dense copy, a slid weight's
//   unslid one, and on AVX-512 the row-lane copy of a sparse24 INT8 or bf16 weight
//   (src/linear/linear_row_lanes.h: 16 rows x 4 bytes of kept values and their positions).
#pragma once

#include <memory>

#include "cpu/linear_kernels.h"
#include "nmkit/format.h"
#include "nmkit/quant.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit::cpu {

// f32 and bf16 weights keep their dtype; f16 is widened to f32 (exactly).
Result<std::unique_ptr<PackedLinear>> pack_dense(const TensorView& weight);
Result<std::unique_ptr<PackedLinear>> pack_sparse24(const Sparse24& weight);
Result<std::unique_ptr<PackedLinear>> pack_nm(const NMPacked& weight);

// INT8 (codes in [-127, 127] with per-row scales): K chunks of 128 (K padded to 64: the last chunk
// may be 64 wide), per-row scales and code sums.
// K above 65536 is an Error: the kernels' int32 sums of (code + 128) * code could overflow.
Result<std::unique_ptr<PackedLinear>> pack_dense_int8(const Quantized& weight);
Result<std::unique_ptr<PackedLinear>> pack_sparse24_int8(const QuantizedSparse24& weight);

// Fills streamed_bytes from the packed arrays (values without slack, meta, int8 scales and sums).
void count_streamed_bytes(PackedLinear& packed);

}  // namespace nmkit::cpu
