// The row work of the CUDA quantize + lift kernel (quant_lift.cu), as __host__ __device__ functions
// over `lanes` workers (a block's threads on the GPU; one on the host): the maximum of |x| bits,
// then the row's scale (quant_rules::row_scale), then each 4-byte word of lifted codes. Compiled on
// the host by tests/cuda/quant_lift_host_test.cc and checked against the CPU quantizer byte for byte.
//
// A word of codes is a window of SlideSparse's lifting (docs/design.md 5): output columns 4t..4t+3
// read the four consecutive inputs from lifted_source(4t), because windows are 4 wide and start at
// even positions of a group; plain quantization is the same with in_group = out_group = 4.
#pragma once

#include <cstdint>

#include "quant/quant_rules.h"

// Device code keeps the group's codes in registers only if its loops unroll; the host compiler
// knows no such pragma.
#ifdef __CUDACC__
#define NMKIT_ROWS_UNROLL _Pragma("unroll")
#else
#define NMKIT_ROWS_UNROLL
#endif

namespace nmkit::cuda {

// The shape of one row's codes.
struct LiftRows {  // a row's inputs and codes fit in 32 bits
  int64_t K = 0;          // real inputs per row
  int64_t cols = 0;       // codes per row, a multiple of 4; zeros from `real` on
  int64_t real = 0;       // K'_raw (lifting) or K (plain): columns that may hold a code
  int64_t in_group = 4;   // 2N
  int64_t out_group = 4;  // 4(N-1)
  bool e4m3 = false;
};

// |x| bits as f32 bits: a bf16 value is the high half of its f32.
NMKIT_HOST_DEVICE inline uint32_t abs_f32_bits(float x) { return quant_rules::bits_of(x) & 0x7FFFFFFFu; }
NMKIT_HOST_DEVICE inline uint32_t abs_f32_bits(uint16_t bf16) { return (static_cast<uint32_t>(bf16) << 16) & 0x7FFFFFFFu; }
NMKIT_HOST_DEVICE inline float to_f32(float x) { return x; }
NMKIT_HOST_DEVICE inline float to_f32(uint16_t bf16) { return quant_rules::float_of(static_cast<uint32_t>(bf16) << 16); }

// The largest |x| bits among this lane's elements (k = begin + lane, begin + lane + lanes, ... below
// K; the kernel's group path reads [0, begin) as vectors first). Unsigned order of these bits is the
// order of magnitudes, with infinities and NaN (>= 0x7F800000) above every finite value, so the row
// maximum also says whether the row is finite.
template <class Src>
NMKIT_HOST_DEVICE uint32_t lane_abs_bits_max(const Src* row, int64_t begin, int64_t K, int lane, int lanes,
                                             uint32_t max = 0) {
  for (int64_t k = begin + lane; k < K; k += lanes) {
    const uint32_t bits = abs_f32_bits(row[k]);
    max = bits > max ? bits : max;
  }
  return max;
}

// Code word t (output columns 4t..4t+3, little-endian) of a finite row with factors `scale`.
template <class Src>
NMKIT_HOST_DEVICE uint32_t code_word(const Src* row, const LiftRows& shape, quant_rules::RowScale scale,
                                     int64_t t) {
  const int64_t j0 = 4 * t;
  if (j0 >= shape.real || scale.inv == 0.0f) return 0;  // inv is 0 only for an all-zero row
  // 32-bit indices: a row's columns fit (LiftRows), and 64-bit divisions are calls on the GPU,
  // around which ptxas spilled registers.
  const int64_t i0 = quant_rules::lifted_source(static_cast<uint32_t>(j0), static_cast<uint32_t>(shape.in_group),
                                                static_cast<uint32_t>(shape.out_group));
  uint32_t word = 0;
  for (int l = 0; l < 4; ++l) {
    const int64_t i = i0 + l;
    if (j0 + l < shape.real && i < shape.K) {
      const uint8_t code = quant_rules::code_of(shape.e4m3, to_f32(row[i]) * scale.inv);
      word |= static_cast<uint32_t>(code) << (8 * l);
    }
  }
  return word;
}

// The group path (docs/design.md 14): a group of kIn = in_group inputs gives kIn / 2 - 1 lifting
// windows (one word each: window w holds the codes of inputs 2w .. 2w + 3), so each input is
// converted and scaled once instead of once per window that holds it (1.5 times for 6:8), and a
// thread reads its group with vector loads. Plain quantization and a 2:4 lift are kIn = 4.
template <int kIn>
NMKIT_HOST_DEVICE constexpr bool group_path_fits(const LiftRows& shape) {
  return shape.in_group == kIn && shape.out_group == 2 * kIn - 4;
}

// Groups [0, whole_groups) lie inside K and below `real`; words from whole_groups * (kIn / 2 - 1)
// on are code_word's.
template <int kIn>
NMKIT_HOST_DEVICE int64_t whole_groups(const LiftRows& shape) {
  const int64_t by_inputs = shape.K / kIn, by_outputs = shape.real / (2 * kIn - 4);
  return by_inputs < by_outputs ? by_inputs : by_outputs;
}

// The words of a whole group from its kIn inputs `in`, of a finite row: the same codes as
// code_word of those words.
template <int kIn, class Src>
NMKIT_HOST_DEVICE void group_words(const Src* in, bool e4m3, quant_rules::RowScale scale, uint32_t* words) {
  uint32_t codes[kIn];
  NMKIT_ROWS_UNROLL
  for (int l = 0; l < kIn; ++l) {
    codes[l] = scale.inv == 0.0f ? 0u : quant_rules::code_of(e4m3, to_f32(in[l]) * scale.inv);
  }
  NMKIT_ROWS_UNROLL
  for (int w = 0; w < kIn / 2 - 1; ++w) {
    words[w] = codes[2 * w] | codes[2 * w + 1] << 8 | codes[2 * w + 2] << 16 | codes[2 * w + 3] << 24;
  }
}

}  // namespace nmkit::cuda
