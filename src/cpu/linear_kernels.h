// Slots of the sparse/dense linear kernels (filled per tier by src/cpu/linear_dispatch.cc) and the
// packed weight they read (its layout is documented in include/nmkit/linear.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <vector>

#include "core/page_bytes.h"
#include "nmkit/cpu.h"
#include "nmkit/dtype.h"
#include "nmkit/pattern.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/weight_format.h"

namespace nmkit::cpu {

// Rows per block of the packed dense and sparse24 layouts: enough rows in flight to hide memory
// latency, few enough that a block's accumulators for 4 tokens fit in 16 ZMM registers.
inline constexpr int kLinearRowBlock = 4;
// K chunk of the f32/bf16 layouts: 16 kept values of 2:4 fill one ZMM of f32.
inline constexpr int kLinearChunk = 32;
// K chunk of the int8 layouts: 64 kept int8 values of 2:4 fill one ZMM. INT8 weights pad K only to
// kLinearChunkInt8Tail, and the last chunk of a row block (dense, sparse24, and an INT8 tile) is that
// wide when K_x is an odd multiple of it (cpu/linear_common.h int8_chunk_width): SmolLM2's K = 576
// streams 576 bytes a row dense and 360 as sparse24, not 640 and 400.
inline constexpr int kLinearChunkInt8 = 128;
inline constexpr int kLinearChunkInt8Tail = 64;
// Tokens per ZMM lane group of the token-lane kernels (16 f32 lanes).
inline constexpr int kTokenLanes = 16;
// Zero bytes after a packed value array, so that a kernel may load one full vector at any value.
inline constexpr size_t kLinearSlack = 128;

// 64-byte aligned, zero-initialised bytes.
struct AlignedBytes {
  PageBytes data;  // large packs in huge pages (src/core/page_bytes.h)
  size_t size = 0;
  // The bytes a kernel may read: size plus a packed form's slack or padding rows (zeros()'s
  // argument). Past them, 64 more zero bytes to the next multiple of 64 (vector loads at an end).
  size_t allocated = 0;

  static AlignedBytes zeros(size_t bytes);
  // The sizes of zeros(bytes) with no memory: a layout to check stored records against.
  static AlignedBytes reserved(size_t bytes);
  // `bytes` bytes at p, not owned: records read in place from a file's mapping, kept alive by the
  // packed weight's owner. p must hold stored_bytes(bytes), 64-byte aligned.
  static AlignedBytes borrowed(const std::byte* p, size_t bytes);
  // What a file stores of a buffer allocated as zeros(bytes): every byte a kernel may read.
  static size_t stored_bytes(size_t bytes) { return (bytes + 63) / 64 * 64 + 64; }
  template <class T> T* as() { return reinterpret_cast<T*>(data.get()); }
  template <class T> const T* as() const { return reinterpret_cast<const T*>(data.get()); }
};


// Where the rows of a dense weight lie: `rows` rows, row i's K values at data + i * ld elements. A
// dense weight is one part (its own copy) or several stacked parts (separate tensors read in place,
// e.g. q, k and v as one linear).
struct RowPart {
  const std::byte* data = nullptr;
  int64_t rows = 0;
  int64_t ld = 0;  // elements between rows (>= K)
};

struct PackedLinear {
  WeightFormat kind = WeightFormat::Dense;
  DType dtype = DType::F32;  // F32, BF16 or I8
  IsaTier tier = IsaTier::Scalar;
  int64_t rows = 0;
  int64_t K = 0;        // logical input features of the user's X
  int64_t K_x = 0;      // padded width of the activations the kernel reads (K or K_prime, rounded up)
  int64_t row_blocks = 0;
  Pattern pattern{2, 4};
  std::optional<SlideGeometry> slide;  // slid INT8: X is lifted to K_prime while quantized
  AlignedBytes values;  // dense: the rows when the layer owns them (parts point into it)
  AlignedBytes meta;    // sparse24: u32 words; nm: masks
  // Dense: the rows, in `values` or in memory the layer does not own (kept alive by `owner`).
  std::vector<RowPart> parts;
  std::shared_ptr<const void> owner;
  // nm: K is cut into superchunks of lcm(group, 32) elements, each a whole number of groups; per row
  // block and superchunk, the 4 rows' values (value_stride each) then, in `meta`, their masks
  // (mask_stride bytes each), so that a block streams from two sequential arrays.
  int64_t superchunk = 0;
  int64_t value_stride = 0;  // nm: values per row and superchunk (superchunk / group * keep)
  int64_t mask_stride = 0;   // nm: mask bytes per row and superchunk (superchunk / 8)
  // int8: per-row weight scale and sum of the row's int8 values; null otherwise.
  AlignedBytes row_scale;  // f32 [rows]
  AlignedBytes row_sum;    // i32 [rows]
  AlignedBytes bias;       // f32 [rows] or empty
  bool has_bias = false;
  bool bf16_x = false;  // X is rounded to bf16 before the kernel (LinearOptions::bf16_activations)
  // Slid f32/bf16 (an nm keep:2N weight with keep = 2N-2, run as 2:4 over K_prime): source column of
  // each of the K_prime activation columns, -1 for padding; X is lifted through it on every call (an
  // INT8 slid weight's X is lifted while it is quantized).
  std::vector<int32_t> lift_source;
  size_t streamed_bytes = 0;
};

// One kernel call: rows blocks [block_begin, block_end) (nm: rows [block_begin*4, block_end*4)
// clipped to rows) for all M tokens.
struct LinearCall {
  const PackedLinear* w = nullptr;
  const void* x = nullptr;      // (M, K_x): f32, or int8 codes for the int8 kernels
  const float* x_scale = nullptr;  // int8: per-token scales [M]
  const uint16_t* x_bf16 = nullptr;  // bf16 bits of x (M, K_x), for the bf16-activation kernels
  int64_t M = 0;
  float* y = nullptr;           // (M, ldy)
  int64_t ldy = 0;
  int64_t block_begin = 0;
  int64_t block_end = 0;
  // Dense kernels only: when set, the weights of the (single) row block come from this decompressed
  // tile instead of w's rows: its 4 rows of w->K_x values one after another (f32 for the f32 kernel,
  // int8 for the int8 kernel), zero past the weight's K; w still supplies rows, K_x (X's row stride),
  // bias and the int8 row scales and sums.
  const void* tile = nullptr;
  // Token-lane kernels only: X transposed into slabs of kTokenLanes tokens, (ceil(M/16), K_x, 16)
  // f32 with zero lanes past M, built once per call by the tier's
  // to_token_lanes (cpu/activation_kernels.h).
  const float* xt = nullptr;
};

using LinearFn = void (*)(const LinearCall& call);
// Reads [p, p + bytes) with the tier's widest loads, as decode kernels stream weights, and returns a
// value that depends on every byte (so the reads stay): in one sequential pass (row_bytes 0: the
// sparse and nm records), or in rows of row_bytes bytes read 4 at a time in lockstep (dense rows);
// bytes is a multiple of 256 (and of 4 * row_bytes). The read-bandwidth probe of the benchmarks
// (bench/bandwidth.h) runs it: a probe with narrower loads or fewer streams than the kernels read
// less than decode streams (docs/design.md 14).
using ReadStreamFn = uint64_t (*)(const std::byte* p, size_t bytes, size_t row_bytes);
// Writes the 4 rows of row block b of a packed weight, dense, into dst (row r at dst + r * ld
// elements, every element of the first K_x written; f32 for f32/bf16 weights, int8 codes for INT8).
using TileFn = void (*)(const PackedLinear& w, int64_t b, float* dst, int64_t ld);
using TileI8Fn = void (*)(const PackedLinear& w, int64_t b, int8_t* dst, int64_t ld);

struct LinearKernels {
  LinearFn dense_f32 = nullptr;
  LinearFn dense_bf16 = nullptr;
  LinearFn sparse24_f32 = nullptr;
  LinearFn sparse24_bf16 = nullptr;
  LinearFn nm_f32 = nullptr;
  LinearFn nm_bf16 = nullptr;
  LinearFn dense_i8 = nullptr;
  LinearFn sparse24_i8 = nullptr;
  // sparse24 bf16 weights times bf16 activations (call.x_bf16), null where the tier has no bf16 dot.
  LinearFn sparse24_bf16x = nullptr;
  // sparse24 f32/bf16 weights on token lanes (call.xt): each kept value is broadcast and multiplies
  // the 16 tokens' activations at its K, so only the kept products are executed; null where the tier
  // has none. The plan (src/linear/linear_plan.cc) says from how many tokens.
  LinearFn sparse24_f32_lanes = nullptr;
  LinearFn sparse24_bf16_lanes = nullptr;
  // nm kernels that expand each row block's K slabs once for all the call's tokens (AVX-512,
  // src/cpu/avx512/linear_nm_slabs.h), or null; bf16x: bf16 weights times bf16 activations
  // (call.x_bf16) with vdpbf16ps.
  LinearFn nm_f32_slabs = nullptr;
  LinearFn nm_bf16_slabs = nullptr;
  LinearFn nm_bf16x_slabs = nullptr;
  // nm bf16 weights times bf16 activations for a few tokens (vpexpandw and vdpbf16ps, 32 K per
  // step; src/cpu/avx512/linear_nm_bf16x_avx512.cc), or null.
  LinearFn nm_bf16x = nullptr;
  // nm rows expanded into a dense tile with the tier's expansion (null: the portable decompress_block).
  TileFn nm_tile_f32 = nullptr;
  TileFn nm_tile_bf16 = nullptr;
  // INT8 nm weights (any keep:group up to 16; 64 K per mask word, codes placed by vpexpandb on
  // AVX-512 and by a shuffle table on AVX2).
  LinearFn nm_i8 = nullptr;
  // INT8 sparse24 and nm rows expanded into dense int8 rows (null: the portable decompression).
  TileI8Fn sparse24_i8_tile = nullptr;
  TileI8Fn nm_i8_tile = nullptr;
  ReadStreamFn read_stream = nullptr;
};

// Per tier: declared here, defined in src/cpu/<tier>/linear_*.cc (one file per weight family).
namespace scalar {
void fill_linear(LinearKernels& slots);
uint64_t read_stream(const std::byte* p, size_t bytes, size_t row_bytes);
}  // namespace scalar
namespace avx2 {
void fill_linear(LinearKernels& slots);     // dense and sparse24, f32 and bf16
void fill_linear_nm(LinearKernels& slots);  // nm, f32 and bf16
void fill_linear_int8(LinearKernels& slots);  // dense, sparse24 and nm, int8
uint64_t read_stream(const std::byte* p, size_t bytes, size_t row_bytes);
}  // namespace avx2
namespace avx512 {
void fill_linear(LinearKernels& slots);
void fill_linear_nm(LinearKernels& slots);  // picks the VPOPCNTDQ form when the CPU has it
void fill_linear_nm_table(LinearKernels& slots);    // lane ranks from a table (any AVX-512 tier CPU)
void fill_linear_nm_vpopcnt(LinearKernels& slots);  // lane ranks from vpopcntd (needs VPOPCNTDQ)
void fill_linear_nm_bf16x(LinearKernels& slots);    // nm bf16 x bf16 for a few tokens (vpexpandw)
void fill_linear_int8(LinearKernels& slots);
void fill_linear_token_lanes(LinearKernels& slots);  // sparse24 f32/bf16 on token lanes
uint64_t read_stream(const std::byte* p, size_t bytes, size_t row_bytes);
}  // namespace avx512

}  // namespace nmkit::cpu
