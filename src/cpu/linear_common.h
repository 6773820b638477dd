// Small helpers shared by every tier's linear kernels. They are in an anonymous namespace: an inline
// function with external linkage compiled in an AVX-512 translation unit could be the copy the linker
// keeps for every caller, and then run on a machine without AVX-512.
#pragma once

#include <cstdint>

#include "cpu/linear_kernels.h"

namespace nmkit::cpu {
namespace {

// Position (0..31) in its 32-wide chunk of kept value j (0..15) of a packed sparse24 meta word: value
// j is in group j/2, and its 2-bit position in the group is field j of the word.
inline int sparse24_position(uint32_t word, int j) {
  return 4 * (j >> 1) + static_cast<int>((word >> (2 * j)) & 3u);
}

// The packed records of a row block stream sequentially, but the sparse kernels spend many
// operations on each 64 bytes, so the hardware prefetcher alone leaves memory idle while they
// compute: each step fetches the bytes it will read 4 KiB ahead (docs/data.md "Prefetching the
// sparse kernels": 2:4 at one token 1.0-1.16x dense without it, 1.4-1.7x with).
inline void prefetch_ahead(const void* step, int64_t step_bytes) {
  const auto* ahead = static_cast<const char*>(step) + 4096;
  for (int64_t off = 0; off < step_bytes; off += 64) __builtin_prefetch(ahead + off, 0, 3);
}

// Row `row` of a dense weight (cpu/linear_kernels.h RowPart). Rows past the weight's last (the
// padding of its last row block) read the last row: their products are computed and never stored.
template <class T>
inline const T* dense_row(const PackedLinear& w, int64_t row) {
  if (row >= w.rows) row = w.rows - 1;
  const int64_t size = w.dtype == DType::F32 ? 4 : w.dtype == DType::BF16 ? 2 : 1;
  for (const RowPart& part : w.parts) {
    if (row < part.rows) return reinterpret_cast<const T*>(part.data + row * part.ld * size);
    row -= part.rows;
  }
  return nullptr;
}

// The 4 rows of row block b that a dense kernel reads: call.tile's when set, else the weight's.
template <class T>
inline void block_rows(const LinearCall& call, int64_t b, const T* (&rows)[kLinearRowBlock]) {
  for (int r = 0; r < kLinearRowBlock; ++r) {
    rows[r] = call.tile != nullptr ? static_cast<const T*>(call.tile) + r * call.w->K_x
                                   : dense_row<T>(*call.w, b * kLinearRowBlock + r);
  }
}
// Values of a row a dense kernel multiplies: an f32/bf16 weight's K (a kernel masks the last
// chunk), K_x for INT8 rows and tiles (zero-padded to it).
inline int64_t dense_width(const LinearCall& call) {
  return call.tile == nullptr && call.w->dtype != DType::I8 ? call.w->K : call.w->K_x;
}

// nm: index of the record of row r of block b in superchunk c (values at record * value_stride,
// mask at record * mask_stride bytes).
inline int64_t nm_record(const PackedLinear& w, int64_t b, int64_t c, int r) {
  return (b * (w.K_x / w.superchunk) + c) * kLinearRowBlock + r;
}

// The sparse24 INT8 layout (include/nmkit/linear.h): chunk c of a row block holds kLinearChunkInt8 K
// of each of its rows, row after row, except a last chunk of kLinearChunkInt8Tail K when K_x is an
// odd multiple of that. Width of chunk c, where row r of it starts within its block (counted in K),
// and the number of chunks (also the 128-K steps of a dense INT8 row, the last one maybe 64 wide).
inline int64_t int8_chunk_width(int64_t K_x, int64_t c) {
  const int64_t left = K_x - c * kLinearChunkInt8;
  return left < kLinearChunkInt8 ? left : kLinearChunkInt8;
}
inline int64_t int8_chunk_offset(int64_t K_x, int64_t c, int64_t r) {
  return c * kLinearRowBlock * kLinearChunkInt8 + r * int8_chunk_width(K_x, c);
}
inline int64_t int8_chunks(int64_t K_x) { return (K_x + kLinearChunkInt8 - 1) / kLinearChunkInt8; }

// sparse24 INT8 records follow the same chunks: a record keeps half of its chunk's K as values and
// a quarter of a byte per K as meta (a 2-bit field per value), so row r of chunk c of block b has
// its values at sparse24_int8_k(w, b, c, r) / 2 and its meta at that / 8 bytes.
inline int64_t sparse24_int8_k(const PackedLinear& w, int64_t b, int64_t c, int64_t r) {
  return b * kLinearRowBlock * w.K_x + int8_chunk_offset(w.K_x, c, r);
}

// End of the rows of a call's blocks (the last block may be partial).
inline int64_t row_limit(const LinearCall& call) {
  const int64_t end = call.block_end * kLinearRowBlock;
  return end < call.w->rows ? end : call.w->rows;
}

// The INT8 epilogue: must equal nmkit::int8_epilogue (src/ref/linear_ref.h) bit for bit, which the
// tests check: f32(acc) times the f32 product of the scales, no fused multiply-add.
inline float int8_output(const LinearCall& call, int64_t m, int64_t row, int32_t acc) {
  const float scale = call.x_scale[m] * call.w->row_scale.as<float>()[row];
  return scale * static_cast<float>(acc);
}

// Writes one f32 output, adding the bias (exact f32 sum, as the reference does).
inline void store_output(const LinearCall& call, int64_t m, int64_t row, float sum) {
  const PackedLinear& w = *call.w;
  if (w.has_bias) sum += w.bias.as<float>()[row];
  call.y[m * call.ldy + row] = sum;
}

}  // namespace
}  // namespace nmkit::cpu
