// Dequantization of ggml blocks to f32, bit for bit as the PyPI gguf package's
// gguf.quants.dequantize (gguf 0.19, numpy float32; docs/design.md section 11.1). Each value is the
// same sequence of float32 operations numpy performs: one multiply (Q4_0, Q5_0, Q8_0), a multiply
// then an add (Q4_1, Q5_1: `d * q + m`), a scale product then a multiply and subtract (Q4_K, Q5_K:
// `(d * sc) * q - dmin * m`; Q6_K: `(d * sc) * q`). This file is compiled with -ffp-contract=off
// (CMakeLists.txt; clang also gets the pragma below), so no multiply-add is fused: a fused one rounds once
// instead of twice and gives different bits.
#include <cstring>

#include "nmkit/dtype.h"
#include "nmkit/gguf.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

namespace nmkit {
namespace {

inline float f16_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return f16_to_f32(bits);
}

void q4_0(const uint8_t* b, float* y) {  // f16 d, 16 bytes of nibbles: low nibbles first
  const float d = f16_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 15) - 8);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

void q4_1(const uint8_t* b, float* y) {  // f16 d, f16 m, 16 bytes of nibbles
  const float d = f16_at(b);
  const float m = f16_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 15) + m;
    y[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

void q5_0(const uint8_t* b, float* y) {  // f16 d, u32 qh (fifth bits), 16 bytes of nibbles
  const float d = f16_at(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 15) | static_cast<int>((qh >> j & 1) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>((qh >> (j + 16) & 1) << 4);
    y[j] = d * static_cast<float>(lo - 16);
    y[j + 16] = d * static_cast<float>(hi - 16);
  }
}

void q5_1(const uint8_t* b, float* y) {  // f16 d, f16 m, u32 qh, 16 bytes of nibbles
  const float d = f16_at(b);
  const float m = f16_at(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 15) | static_cast<int>((qh >> j & 1) << 4);
    const int hi = (qs[j] >> 4) | static_cast<int>((qh >> (j + 16) & 1) << 4);
    y[j] = d * static_cast<float>(lo) + m;
    y[j + 16] = d * static_cast<float>(hi) + m;
  }
}

void q8_0(const uint8_t* b, float* y) {  // f16 d, 32 int8
  const float d = f16_at(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// The 6-bit scales and mins of the 8 sub-blocks of Q4_K and Q5_K, packed in 12 bytes
// (gguf's Q4_K.get_scale_min, ggml's get_scale_min_k4).
void k_scale_min(const uint8_t* s, uint8_t* sc, uint8_t* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 0x3F;
    mn[j] = s[j + 4] & 0x3F;
    sc[j + 4] = static_cast<uint8_t>((s[j + 8] & 0x0F) | ((s[j] >> 2) & 0x30));
    mn[j + 4] = static_cast<uint8_t>((s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30));
  }
}

// f16 d, f16 dmin, 12 bytes of scales, 128 bytes of nibbles: sub-block 2i holds the low nibbles of
// bytes 32i..32i+31, sub-block 2i+1 their high nibbles.
void q4_k(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const float dmin = f16_at(b + 2);
  uint8_t sc[8], mn[8];
  k_scale_min(b + 4, sc, mn);
  const uint8_t* qs = b + 16;
  for (int s = 0; s < 8; ++s) {
    const float ds = d * static_cast<float>(sc[s]);
    const float dm = dmin * static_cast<float>(mn[s]);
    const uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) y[32 * s + l] = ds * static_cast<float>((q[l] >> shift) & 15) - dm;
  }
}

// As Q4_K plus 32 bytes qh after the scales: bit s of qh[l] is the fifth bit of sub-block s, item l.
void q5_k(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const float dmin = f16_at(b + 2);
  uint8_t sc[8], mn[8];
  k_scale_min(b + 4, sc, mn);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int s = 0; s < 8; ++s) {
    const float ds = d * static_cast<float>(sc[s]);
    const float dm = dmin * static_cast<float>(mn[s]);
    const uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 15) | (((qh[l] >> s) & 1) << 4);
      y[32 * s + l] = ds * static_cast<float>(v) - dm;
    }
  }
}

// 128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d. Element p = 128h + 32r + l (half h, quarter r,
// lane l < 32): low nibble of ql[64h + 32(r%2) + l] shifted by 4(r/2), two high bits
// (qh[32h + l] >> 2r) & 3; value (q - 32) * (d * scale[p / 16]).
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
  float ds[16];
  for (int i = 0; i < 16; ++i) ds[i] = d * static_cast<float>(scales[i]);
  for (int h = 0; h < 2; ++h) {
    for (int r = 0; r < 4; ++r) {
      for (int l = 0; l < 32; ++l) {
        const int lo = (ql[64 * h + 32 * (r % 2) + l] >> (4 * (r / 2))) & 15;
        const int hi = (qh[32 * h + l] >> (2 * r)) & 3;
        const int p = 128 * h + 32 * r + l;
        y[p] = ds[p / 16] * static_cast<float>((lo | (hi << 4)) - 32);
      }
    }
  }
}

}  // namespace

Status dequantize_ggml(GgmlType type, const std::byte* src, float* dst, int64_t n_elements) {
  if (!ggml_can_dequantize(type)) {
    return Error("dequantization of ggml type " + std::string(ggml_type_name(type)) + " is not supported");
  }
  const int64_t block = ggml_block_elements(type);
  const int64_t bytes = ggml_block_bytes(type);
  NMKIT_ASSERT(n_elements % block == 0);
  if (n_elements == 0) return ok_status();  // dst may be null then
  const auto* in = reinterpret_cast<const uint8_t*>(src);
  const int64_t n_blocks = n_elements / block;
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n_elements) * 4);
      return ok_status();
    case GgmlType::F16:
      convert_to_f32(DType::F16, src, dst, static_cast<size_t>(n_elements));
      return ok_status();
    case GgmlType::BF16:
      convert_to_f32(DType::BF16, src, dst, static_cast<size_t>(n_elements));
      return ok_status();
    default:
      break;
  }
  void (*kernel)(const uint8_t*, float*) = nullptr;
  switch (type) {
    case GgmlType::Q4_0: kernel = q4_0; break;
    case GgmlType::Q4_1: kernel = q4_1; break;
    case GgmlType::Q5_0: kernel = q5_0; break;
    case GgmlType::Q5_1: kernel = q5_1; break;
    case GgmlType::Q8_0: kernel = q8_0; break;
    case GgmlType::Q4_K: kernel = q4_k; break;
    case GgmlType::Q5_K: kernel = q5_k; break;
    case GgmlType::Q6_K: kernel = q6_k; break;
    default: NMKIT_ASSERT(false);
  }
  for (int64_t i = 0; i < n_blocks; ++i) kernel(in + i * bytes, dst + i * block);
  return ok_status();
}

}  // namespace nmkit
