// The per-value and per-row arithmetic of quantization and lifting (docs/design.md sections 5 and 6),
// written once for the CPU (src/cpu, src/quant) and the GPU (src/cuda/quant_lift.cu): compiled by
// the host compiler these are plain inline functions, by nvcc __host__ __device__ ones, so a kernel
// and the CPU quantizer apply the same float32 operations in the same order and produce the same
// bytes (tests/cuda/quant_lift_host_test.cc runs the CUDA row code on the host against the CPU).
// Nothing here may depend on the floating-point environment (rounding is by rint in the default
// round-to-nearest-even mode, which CUDA's device code always uses).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define NMKIT_HOST_DEVICE __host__ __device__
#else
#define NMKIT_HOST_DEVICE
#endif

namespace nmkit::quant_rules {

NMKIT_HOST_DEVICE inline uint32_t bits_of(float value) {
  uint32_t bits;
  __builtin_memcpy(&bits, &value, 4);
  return bits;
}

NMKIT_HOST_DEVICE inline float float_of(uint32_t bits) {
  float value;
  __builtin_memcpy(&value, &bits, 4);
  return value;
}

// OCP E4M3 ("e4m3fn"): round to nearest, ties to even, saturating to +-448 (infinities too);
// NaN -> S.1111.111; the sign of zero is kept. Independent of the rounding mode.
NMKIT_HOST_DEVICE inline uint8_t e4m3_code(float value) {
  const uint32_t bits = bits_of(value);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7F);
  if (magnitude < 0x3C800000u) {  // below 2^-6, the smallest normal: multiples of 2^-9
    const float scaled = float_of(magnitude) * 512.0f;  // exact: a power of two, result below 8
    auto whole = static_cast<uint32_t>(scaled);
    const float fraction = scaled - static_cast<float>(whole);
    if (fraction > 0.5f || (fraction == 0.5f && (whole & 1) != 0)) ++whole;
    return static_cast<uint8_t>(sign | whole);
  }
  // Round the 23-bit mantissa to 3 bits (ties to even); a carry moves into the exponent as it should.
  const uint32_t rounded = magnitude + 0x7FFFFu + ((magnitude >> 20) & 1);
  uint32_t code = (rounded >> 20) - (120u << 3);
  if (code > 0x7E) code = 0x7E;  // saturate: 480 would be the NaN pattern
  return static_cast<uint8_t>(sign | code);
}

// One value by the rules of include/nmkit/quant.h: the product x * inv, NaN (0 * inf, only when inv
// is infinite) -> 0, then the INT8 clamp and round half to even, or the E4M3 encoding.
NMKIT_HOST_DEVICE inline uint8_t code_of(bool e4m3, float product) {
  if (product != product) return 0;
  if (e4m3) return e4m3_code(product);
  // Clamping before rounding equals rounding before clamping: the bounds are integers.
  const float clamped = fminf(fmaxf(product, -127.0f), 127.0f);
  return static_cast<uint8_t>(static_cast<int8_t>(rintf(clamped)));
}

// The per-row factors from absmax = max |x| over the real K: codes are code_of(x * inv) and the row
// scale is `scale`; an all-zero row has scale 1 and inv 0 (every code 0).
struct RowScale {
  float inv;
  float scale;
};
NMKIT_HOST_DEVICE inline RowScale row_scale(float absmax, float qmax) {
  if (absmax == 0.0f) return {0.0f, 1.0f};
  return {qmax / absmax, absmax / qmax};
}

// Lifting's index map (docs/design.md 5): the input column of output column j, relative to the row
// start, continuing the group pattern past K'_raw (those inputs lie past K_pad and read as zero).
// in_group = 2N, out_group = 4(N-1); a 2:4 "lift" (N = 2) is the identity. I: int64_t, or uint32_t
// where a row's columns fit (the GPU's 64-bit divisions are calls).
template <class I>
NMKIT_HOST_DEVICE inline I lifted_source(I j, I in_group, I out_group) {
  const I within = j % out_group;
  return (j / out_group) * in_group + 2 * (within / 4) + within % 4;
}

}  // namespace nmkit::quant_rules
