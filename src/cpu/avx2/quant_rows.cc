// Per-token quantization, plain and fused with lifting, with AVX2 + F16C. The float32 operations are
// those of the scalar rules (quant_kernels.h), so the codes are identical to the scalar tier's.
// Lifting: the row is quantized into scratch, then each 16 output codes are one pshufb of one
// 16-byte load (LiftPhases).
#include <immintrin.h>

#include <cstring>

#include "cpu/quant_kernels.h"

namespace nmkit::cpu::avx2 {
namespace {

constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

uint32_t abs_bits_max_f32(const std::byte* row, int64_t K) {
  const __m256i mask = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
  const auto* p = reinterpret_cast<const __m256i*>(row);
  int64_t k = 0;
  for (; k + 32 <= K; k += 32, p += 4) {
    m0 = _mm256_max_epu32(m0, _mm256_and_si256(_mm256_loadu_si256(p), mask));
    m1 = _mm256_max_epu32(m1, _mm256_and_si256(_mm256_loadu_si256(p + 1), mask));
    m2 = _mm256_max_epu32(m2, _mm256_and_si256(_mm256_loadu_si256(p + 2), mask));
    m3 = _mm256_max_epu32(m3, _mm256_and_si256(_mm256_loadu_si256(p + 3), mask));
  }
  for (; k + 8 <= K; k += 8, ++p) {
    m0 = _mm256_max_epu32(m0, _mm256_and_si256(_mm256_loadu_si256(p), mask));
  }
  __m256i m = _mm256_max_epu32(_mm256_max_epu32(m0, m1), _mm256_max_epu32(m2, m3));
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
  uint32_t max = 0;
  for (uint32_t lane : lanes) max = lane > max ? lane : max;
  for (; k < K; ++k) {
    uint32_t bits;
    std::memcpy(&bits, row + 4 * k, 4);
    bits &= 0x7FFFFFFFu;
    max = bits > max ? bits : max;
  }
  return max;
}

// bf16 and f16 alike: the magnitude order of both is the unsigned order of their low 15 bits.
uint32_t abs_bits_max_16(const std::byte* row, int64_t K) {
  const __m256i mask = _mm256_set1_epi16(0x7FFF);
  __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
  const auto* p = reinterpret_cast<const __m256i*>(row);
  int64_t k = 0;
  for (; k + 64 <= K; k += 64, p += 4) {
    m0 = _mm256_max_epu16(m0, _mm256_and_si256(_mm256_loadu_si256(p), mask));
    m1 = _mm256_max_epu16(m1, _mm256_and_si256(_mm256_loadu_si256(p + 1), mask));
    m2 = _mm256_max_epu16(m2, _mm256_and_si256(_mm256_loadu_si256(p + 2), mask));
    m3 = _mm256_max_epu16(m3, _mm256_and_si256(_mm256_loadu_si256(p + 3), mask));
  }
  for (; k + 16 <= K; k += 16, ++p) {
    m0 = _mm256_max_epu16(m0, _mm256_and_si256(_mm256_loadu_si256(p), mask));
  }
  __m256i m = _mm256_max_epu16(_mm256_max_epu16(m0, m1), _mm256_max_epu16(m2, m3));
  alignas(32) uint16_t lanes[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
  uint32_t max = 0;
  for (uint16_t lane : lanes) max = lane > max ? lane : max;
  for (; k < K; ++k) {
    uint16_t bits;
    std::memcpy(&bits, row + 2 * k, 2);
    const uint32_t magnitude = bits & 0x7FFFu;
    max = magnitude > max ? magnitude : max;
  }
  return max;
}

template <DType D>
__m256 load8(const std::byte* p) {
  if constexpr (D == DType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (D == DType::BF16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  }
}

// 8 products to 8 codes as int32 lanes (quant_kernels.h rules; products are finite here).
template <QuantType T>
__m256i encode8(__m256 v) {
  if constexpr (T == QuantType::Int8) {
    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    return _mm256_cvtps_epi32(_mm256_round_ps(v, kRne));  // integral already: conversion is exact
  } else {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i mag = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(mag, 20), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_add_epi32(mag, _mm256_add_epi32(_mm256_set1_epi32(0x7FFFF), lsb));
    __m256i normal = _mm256_sub_epi32(_mm256_srli_epi32(rounded, 20), _mm256_set1_epi32(120 << 3));
    normal = _mm256_min_epi32(normal, _mm256_set1_epi32(0x7E));
    const __m256 scaled = _mm256_mul_ps(_mm256_castsi256_ps(mag), _mm256_set1_ps(512.0f));
    const __m256i sub = _mm256_cvtps_epi32(_mm256_round_ps(scaled, kRne));
    // mag has its top bit clear, so the signed compare is the unsigned one.
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x3C800000), mag);
    return _mm256_or_si256(_mm256_blendv_epi8(normal, sub, small), sign);
  }
}

// 32 values at p to 32 codes at dst.
template <DType D, QuantType T>
void quantize32(const std::byte* p, __m256 vinv, uint8_t* dst) {
  constexpr size_t size = D == DType::F32 ? 4 : 2;
  const __m256i c0 = encode8<T>(_mm256_mul_ps(load8<D>(p), vinv));
  const __m256i c1 = encode8<T>(_mm256_mul_ps(load8<D>(p + 8 * size), vinv));
  const __m256i c2 = encode8<T>(_mm256_mul_ps(load8<D>(p + 16 * size), vinv));
  const __m256i c3 = encode8<T>(_mm256_mul_ps(load8<D>(p + 24 * size), vinv));
  __m256i packed;
  if constexpr (T == QuantType::Int8) {  // -127..127: signed saturation keeps every value
    packed = _mm256_packs_epi16(_mm256_packs_epi32(c0, c1), _mm256_packs_epi32(c2, c3));
  } else {  // 0..255: unsigned saturation keeps every value
    packed = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
  }
  // The packs work per 128-bit lane: dword d of the result holds 4 codes of vector d%4, half d/4.
  packed = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), packed);
}

template <DType D, QuantType T>
// `next`: the following row of the chunk (or null), prefetched while this one is converted from L1, so
// that memory keeps streaming during the arithmetic (the absmax pass then finds it in cache).
void quantize_row(const std::byte* src, int64_t K, float inv, uint8_t* dst, const std::byte* next) {
  constexpr size_t size = D == DType::F32 ? 4 : 2;
  const __m256 vinv = _mm256_set1_ps(inv);
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    if (next != nullptr) {
      for (size_t line = 0; line < 32 * size; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next + static_cast<size_t>(k) * size + line), _MM_HINT_T0);
      }
    }
    quantize32<D, T>(src + static_cast<size_t>(k) * size, vinv, dst + k);
  }
  if (k < K) {  // the tail through zero-padded local buffers (zeros give code 0 and are dropped)
    alignas(32) std::byte in[32 * size] = {};
    alignas(32) uint8_t out[32];
    const auto rest = static_cast<size_t>(K - k);
    std::memcpy(in, src + static_cast<size_t>(k) * size, rest * size);
    quantize32<D, T>(in, vinv, out);
    std::memcpy(dst + k, out, rest);
  }
}

void gather_row(const LiftPhases& phases, const uint8_t* codes, uint8_t* dst, int64_t cols) {
  const uint8_t* cycle = codes;
  int v = 0;
  int64_t j = 0;
  for (; j < cols; j += 16) {
    const __m128i index = _mm_loadu_si128(reinterpret_cast<const __m128i*>(phases.index + v * 16));
    const __m128i src = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cycle + phases.base[v]));
    const __m128i out = _mm_shuffle_epi8(src, index);
    if (j + 16 <= cols) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), out);
    } else {
      alignas(16) uint8_t last[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(last), out);
      std::memcpy(dst + j, last, static_cast<size_t>(cols - j));
    }
    if (++v == phases.count) {
      v = 0;
      cycle += phases.in_advance;
    }
  }
}

// n codes from src to dst: the 32-byte blocks wholly inside dst with non-temporal stores, the
// partial blocks at either end with ordinary stores.
void stream_row(uint8_t* dst, const uint8_t* src, int64_t n) {
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) & 31);
  int64_t i = misalign == 0 ? 0 : (32 - misalign < n ? 32 - misalign : n);
  if (i > 0) std::memcpy(dst, src, static_cast<size_t>(i));
  for (; i + 32 <= n; i += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
  }
  if (i < n) std::memcpy(dst + i, src + i, static_cast<size_t>(n - i));
}

// The lifting gather tables of this tier's vectors (16-byte pshufb).
constexpr LiftPhases LiftTable::* kGatherPhases = &LiftTable::v16;

}  // namespace

#include "cpu/quant_rows-inl.h"  // rows_impl, quantize_rows

}  // namespace nmkit::cpu::avx2
