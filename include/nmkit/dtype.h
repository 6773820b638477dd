// Element types as safetensors names them, and the exact conversions between f16/bf16 and f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "nmkit/status.h"

namespace nmkit {

enum class DType : uint8_t {
  F64, F32, F16, BF16, F8_E4M3, F8_E5M2,
  I64, I32, I16, I8, U64, U32, U16, U8, Bool,
};

// Bytes per element.
size_t dtype_size(DType dtype);
// The safetensors spelling: "F32", "BF16", "F8_E4M3", "BOOL", ...
std::string_view dtype_name(DType dtype);
// The safetensors name ("F32", "BF16", ...); an Error naming the bad value and the accepted ones otherwise.
Result<DType> dtype_from_name(std::string_view name);
// f32, f16 and bf16: the dtypes nmkit prunes and computes with (every value converts exactly to f32).
bool is_prunable(DType dtype);
bool is_floating(DType dtype);

// IEEE binary16 <-> binary32. f16 -> f32 is exact (NaN payloads kept); f32 -> f16 rounds to nearest
// even, with overflow to infinity and NaN kept NaN (quiet).
// Branch-free so that block conversions vectorise (a branchy version cost ~1 ns per element and
// halved f16 pruning throughput): exponent and mantissa moved to f32 positions read as
// 2^(e-127) * 1.m (or an f32 subnormal for e = 0); scaling by 2^(127-15) rebiases exactly,
// subnormals included. Needs subnormals honoured (no flush-to-zero), which nmkit never enables.
inline float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t em = bits & 0x7FFFu;
  float moved;
  const uint32_t moved_bits = em << 13;
  __builtin_memcpy(&moved, &moved_bits, 4);
  const float scaled = moved * 0x1p112f;
  uint32_t finite;
  __builtin_memcpy(&finite, &scaled, 4);
  const uint32_t special = moved_bits | 0x7F800000u;  // infinity or NaN, payload kept
  const uint32_t is_special = 0u - static_cast<uint32_t>(em >= 0x7C00u);  // all ones or zero
  const uint32_t out = sign | (special & is_special) | (finite & ~is_special);
  float value;
  __builtin_memcpy(&value, &out, 4);
  return value;
}
uint16_t f32_to_f16(float value);
// bfloat16 is the top half of a binary32: bf16 -> f32 is exact; f32 -> bf16 rounds to nearest even.
inline float bf16_to_f32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_bf16(float value);
// Rounds n f32 values in place to bf16 precision exactly as f32_to_bf16 does, and writes their bf16
// bits to `bits` unless it is null. Branch-free, so the compiler vectorizes it (the element-wise
// call costs ~0.2 ms per call of a 16 x 4096 linear layer with bf16 activations).
void round_to_bf16(float* values, uint16_t* bits, size_t n);
// The bf16 bits of n f32 values, rounded as f32_to_bf16 does, without touching the values (one read
// and a half-size write: what a bf16 GEMM takes as activations).
void f32_to_bf16_bits(const float* values, uint16_t* bits, size_t n);

// The first NaN or infinity in x[0, n) (all exponent bits set), or -1. A branch-free pass that the
// compiler vectorizes first, the element search only when it found one: input checks on every call.
int64_t first_non_finite(const float* x, int64_t n);
// The same over n stored F32, F16 or BF16 elements, on their bits (exponent all ones), with no
// conversion: the finite check of a weight read in place costs one read of its bytes.
int64_t first_non_finite_stored(DType dtype, const void* data, int64_t n);

// Bulk conversions of n elements of a prunable dtype to and from f32 (src and dst may be unaligned).
void convert_to_f32(DType dtype, const void* src, float* dst, size_t n);
void convert_from_f32(DType dtype, const float* src, void* dst, size_t n);

}  // namespace nmkit
