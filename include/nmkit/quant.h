// Dynamic quantization of activations (per token) and of weights (per output channel) to INT8 and
// FP8 E4M3, plain or fused with SlideSparse lifting (docs/design.md section 6).
//
// Rules (float32 arithmetic exactly as written, so every tier produces identical codes):
//   absmax = max_k |x[k]| over the real K of the row (lifting does not change it)
//   INT8: inv = 127.0f / absmax, q = clamp(round_half_even(x * inv), -127, 127), scale = absmax / 127.0f
//   E4M3: inv = 448.0f / absmax, q = f32_to_e4m3(x * inv),                       scale = absmax / 448.0f
//   absmax == 0: scale = 1 and every code 0.
// A product x * inv that is NaN (0 * inf: only when absmax < 2^-121 makes inv infinite) gives code 0.
// A NaN or infinity in the input is an Error naming the tensor, row and column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "nmkit/dtype.h"
#include "nmkit/format.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

enum class QuantType : uint8_t { Int8, E4M3 };

std::string_view quant_type_name(QuantType type);  // "int8", "e4m3"
// "int8", "e4m3" (or "fp8"); an Error naming the bad value and the accepted ones otherwise.
Result<QuantType> quant_type_from_name(std::string_view name);
// Dtype of the codes: I8 for Int8, F8_E4M3 for E4M3 (one byte each).
inline DType quant_code_dtype(QuantType type) { return type == QuantType::Int8 ? DType::I8 : DType::F8_E4M3; }
// The largest code magnitude: 127 or 448.
inline float quant_max(QuantType type) { return type == QuantType::Int8 ? 127.0f : 448.0f; }

// OCP FP8 E4M3 ("e4m3fn"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; NaN is
// S.1111.111; largest finite 448 = 0x7E; subnormals are m * 2^-9.
inline float e4m3_to_f32(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80) << 24;
  const uint32_t exponent = (code >> 3) & 0xF;
  const uint32_t mantissa = code & 0x7;
  uint32_t bits;
  if (exponent == 0xF && mantissa == 0x7) {
    bits = sign | 0x7FC00000u;  // NaN
  } else if (exponent == 0) {
    float magnitude = static_cast<float>(mantissa) * 0.001953125f;  // m * 2^-9, exact
    std::memcpy(&bits, &magnitude, 4);
    bits |= sign;
  } else {
    bits = sign | ((exponent + 120) << 23) | (mantissa << 20);  // rebias 7 -> 127
  }
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// Round to nearest, ties to even, saturating to +-448 (infinities too); NaN -> S.1111.111. The sign
// of zero is kept (-0.0f -> 0x80). Independent of the floating-point rounding mode. (The rule is
// src/quant/quant_rules.h's, shared with the CUDA kernels.)
uint8_t f32_to_e4m3(float value);

// Codes plus per-row scales. Layout: codes (rows, cols) row-major, one byte per code (int8 or the
// e4m3 byte); scales (rows) f32. A row's real value is about code * scale.
struct Quantized {
  QuantType type = QuantType::Int8;
  Tensor codes;   // I8 or F8_E4M3, [rows, cols]
  Tensor scales;  // F32, [rows]
};

// Activations X [M, K] (F32, F16 or BF16), one scale per token (row). Multithreaded over tokens,
// on the active ISA tier. Errors name `name`, the row and column of a NaN or infinity.
Result<Quantized> quantize_tokens(const TensorView& x, QuantType type, std::string_view name = "");
// Quantization fused with lifting: codes [M, K'] with codes[m, j] = q(X[m, source_column(j)]) (0
// for padding), in one pass over X. geometry.K must equal K.
Result<Quantized> quantize_lift(const TensorView& x, const SlideGeometry& geometry, QuantType type,
                                std::string_view name = "");
// The same into caller memory (no allocation; the hot path of a quantized linear layer): row m of
// codes at codes + m * codes_stride bytes, cols = K (lift == nullptr) or lift->K_prime; scales [M].
Status quantize_tokens_into(const TensorView& x, QuantType type, const SlideGeometry* lift,
                            std::byte* codes, int64_t codes_stride, float* scales,
                            std::string_view name = "");

// Weights W [rows, K] (F32, F16 or BF16), one scale per output channel (row), same rules.
Result<Quantized> quantize_weights(const TensorView& w, QuantType type, std::string_view name = "");

// A 2:4-compressed quantized weight: packed.values hold codes (dtype I8 or F8_E4M3), packed.meta is
// unchanged; scales [rows] f32. Since the values of a row hold all its non-zeros, the codes equal
// those of quantizing the dense weight and then compressing it.
struct QuantizedSparse24 {
  QuantType type = QuantType::Int8;
  Sparse24 packed;
  Tensor scales;  // F32, [rows]
};
Result<QuantizedSparse24> quantize_weights(const Sparse24& w, QuantType type,
                                           std::string_view name = "");

}  // namespace nmkit
