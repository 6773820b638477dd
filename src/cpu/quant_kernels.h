// Slots of the quantization kernels (filled per tier by src/cpu/quant_dispatch.cc), the lifting
// tables they share, and the per-value rules every tier must reproduce (include/nmkit/quant.h).
//
// Tier translation units (src/cpu/avx2, src/cpu/avx512) are compiled with that tier's flags. An
// inline function or template they instantiate with external linkage could be merged by the linker
// with the baseline copy and then run on a machine without the tier, so they use only intrinsics,
// plain loops, libc calls, functions in an anonymous namespace and the out-of-line helpers below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "nmkit/dtype.h"
#include "nmkit/quant.h"

namespace nmkit::cpu {

// Lifting as a byte gather with a fixed pattern, for SIMD tiers that write `width` output codes at a
// time from a row of codes (docs/design.md section 5). Output vector g of a row reads the `width` bytes
// at codes + (g / count) * in_advance + base[g % count] and takes byte index[(g % count) * width + t]
// of them for output t. The pattern repeats every `count` vectors: count * width output columns
// are a whole number of output groups (4(N-1) columns) fed by in_advance input columns. Every index
// is < width (for N >= 3 a vector of outputs spans at most 3/4 of its width plus two inputs), so one
// load and one in-register byte shuffle produce a vector. Columns past K_prime_raw read codes past
// K_pad, which the caller keeps zero.
struct LiftPhases {
  int width = 0;
  int count = 0;
  int64_t in_advance = 0;
  const int64_t* base = nullptr;   // count
  const uint8_t* index = nullptr;  // count x width
};

struct LiftTable {
  int N = 0;
  int64_t in_group = 0;   // 2N
  int64_t out_group = 0;  // 4(N-1)
  LiftPhases v16;         // 16-byte vectors (AVX2 pshufb)
  LiftPhases v64;         // 64-byte vectors (AVX-512 VBMI vpermb)
};
// Built once per N (2 <= N <= 32) and kept for the process.
const LiftTable& lift_table(int N);

// Scratch a kernel needs per thread, for `cols` output columns. Layout: two codes regions (buffer i
// at quant_codes_offset(i)) of quant_codes_bytes() each: a row's K codes, then zeros that a gather or
// a 64-byte copy of cols codes may read past K; then two staging regions of cols + 64 bytes (a
// lifted row on its way to a streaming copy). Two of each let a kernel pipeline consecutive rows.
int64_t quant_codes_bytes(const LiftTable* table, int64_t K, int64_t cols);
int64_t quant_codes_offset(const LiftTable* table, int64_t K, int64_t cols, int buffer);
int64_t quant_staging_offset(const LiftTable* table, int64_t K, int64_t cols, int buffer);
int64_t quant_scratch_bytes(const LiftTable* table, int64_t K, int64_t cols);

// One call quantizes rows [begin, end) of src.
struct QuantRowsArgs {
  DType src_dtype = DType::F32;  // F32, F16 or BF16
  const std::byte* src = nullptr;
  int64_t src_stride = 0;        // bytes between rows
  int64_t K = 0;
  QuantType type = QuantType::Int8;
  const LiftTable* lift = nullptr;  // null: plain quantization, cols == K
  int64_t cols = 0;                 // codes per row: K, or K_prime when lifting
  std::byte* dst = nullptr;
  int64_t dst_stride = 0;           // bytes between rows of codes
  float* scales = nullptr;
  // Write the codes with non-temporal stores: for outputs far larger than the caches, where the
  // read-for-ownership of ordinary stores would add a read of every output line (the codes are
  // then not in cache for the next layer either way).
  bool stream = false;
};

// Quantizes rows [begin, end). scratch: quant_scratch_bytes() bytes owned by the calling thread.
// Returns the first row holding a NaN or infinity (its codes and those of later rows are
// unspecified), or -1 when every row was quantized.
using QuantRowsFn = int64_t (*)(const QuantRowsArgs& args, int64_t begin, int64_t end,
                                std::byte* scratch);

struct QuantKernels {
  QuantRowsFn quantize_rows = nullptr;
};

namespace scalar {
int64_t quantize_rows(const QuantRowsArgs& args, int64_t begin, int64_t end, std::byte* scratch);
}
namespace avx2 {
int64_t quantize_rows(const QuantRowsArgs& args, int64_t begin, int64_t end, std::byte* scratch);
}
namespace avx512 {
int64_t quantize_rows(const QuantRowsArgs& args, int64_t begin, int64_t end, std::byte* scratch);
}

// Baseline helpers (compiled without tier flags), safe to call from any tier.
// The magnitude whose |x| bits are `bits` (the row maximum of |x| bits: unsigned order of these
// bits is the order of magnitudes, so absmax needs no float compare).
float abs_bits_to_f32(DType dtype, uint32_t bits);
// |x| bits at or above this are an infinity or NaN: 0x7F800000 (f32), 0x7F80 (bf16), 0x7C00 (f16).
uint32_t nonfinite_abs_bits(DType dtype);
// One value by the rules of quant.h: x * inv, NaN -> 0, then INT8 clamp+round or E4M3 encoding.
uint8_t quantize_value(QuantType type, float product);
// A row of K values (converted exactly to f32) into K codes with the per-value rule: the path for
// rows whose inv is infinite (absmax below 2^-121), which SIMD loops do not handle.
void quantize_row_values(const QuantRowsArgs& args, const std::byte* src_row, float inv,
                         uint8_t* dst);
// Columns [0, cols) of a lifted row from its codes (scratch, zero past K), by the index map.
void gather_lifted_row(const QuantRowsArgs& args, const uint8_t* codes, uint8_t* dst);

}  // namespace nmkit::cpu
