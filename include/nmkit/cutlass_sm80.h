// The 2:4 layout that CUTLASS 2.x's SM80/SM89 sparse GEMMs (mma.sp) read: nmkit's sparse24 values
// as they are and its metadata nibbles as ElementE words reordered for ldmatrix (docs/design.md
// sections 7 and 14). Host code only: it builds and runs without CUDA.
#pragma once

#include <cstdint>
#include <string_view>

#include "nmkit/format.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

// Layout: values (rows_pad, K_pad/2) in the weight dtype, row-major, never reordered: row r's kept
// values in increasing K, as sparse24's. meta holds one ElementE word per (row, word column),
// reordered into CUTLASS's ColumnMajorInterleaved<2>: word
// (r, c) of the sparse24 metadata read as little-endian words (uint16 for 16-bit values: 4 groups,
// 16 K; uint32 for 8-bit values: 8 groups, 32 K) lies at word offset
//   2*rows_pad*(c>>1) + 4*(r'>>1) + 2*(c&1) + (r'&1),  r' = (r/G)*G + (r%8)*I + (r%G)/8,
// (G, I) = (32, 4) for uint16 words and (16, 2) for uint32 words. The meta tensor is U8
// [rows_pad, meta_row_bytes()] holding those words in that order (its rows are not weight rows).
// Padding: K_pad is K rounded up to an even number of word columns (32 for 16-bit values, 64 for
// 8-bit), rows_pad is rows rounded up to G; padding groups are nibble 0x4 (positions 0 and 1) with
// zero values, padding rows are all padding groups.
struct CutlassSm80 {
  int64_t rows = 0;  // logical, of the dense weight
  int64_t K = 0;
  Tensor values;  // F16, BF16, I8 or F8_E4M3, [rows_pad, K_pad/2]
  Tensor meta;    // U8, [rows_pad, meta_row_bytes()], words in CUTLASS's order
  DType dtype() const { return values.dtype(); }
  // 16 for 16-bit values (ElementE uint16), 32 for 8-bit ones (uint32).
  int meta_bits() const { return dtype_size(dtype()) == 2 ? 16 : 32; }
  int64_t k_align() const { return 2 * meta_bits(); }  // two word columns of K
  int64_t row_align() const { return meta_bits() == 16 ? 32 : 16; }
  int64_t K_pad() const { return (K + k_align() - 1) / k_align() * k_align(); }
  int64_t rows_pad() const { return (rows + row_align() - 1) / row_align() * row_align(); }
  int64_t meta_row_bytes() const { return K_pad() / 8; }  // 4 bits per group of 4 K
  size_t memory_bytes() const { return values.nbytes() + meta.nbytes(); }
};

// The sizes of the layout of a [rows, K] weight of `dtype` (values and meta left empty): what a
// checkpoint's parts must be before any byte is read.
CutlassSm80 cutlass_sm80_geometry(DType dtype, int64_t rows, int64_t K);

// Word offset of metadata word (r, c) in a ColumnMajorInterleaved<2> tensor of rows_pad rows, for
// ElementE words of meta_bits (16 or 32) bits: the formula above.
int64_t cutlass_sm80_meta_offset(int64_t r, int64_t c, int64_t rows_pad, int meta_bits);

// From sparse24 (values F16, BF16, I8 or F8_E4M3: the 2:4 weight or its quantized codes). An Error
// names `name` for F32 values (mma.sp runs f32 as tf32 1:2, another metadata) or invalid nibbles.
Result<CutlassSm80> to_cutlass_sm80(const Sparse24& packed, std::string_view name = "");
// The exact inverse: sparse24 of the logical rows and K. Errors as validate().
Result<Sparse24> from_cutlass_sm80(const CutlassSm80& packed, std::string_view name = "");
// Structural checks of a layout read from a file: dtypes, shapes against rows and K, every nibble
// valid, padding groups 0x4 with zero values. The Error names `name` and the first bad place.
Status validate(const CutlassSm80& packed, std::string_view name);

}  // namespace nmkit
