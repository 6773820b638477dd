// Per-token quantization, plain and fused with lifting, with AVX-512 (F/BW/VL/VBMI). The float32
// operations are those of the scalar rules (quant_kernels.h): absmax as the maximum of |x| bits, one
// multiply by inv, round half to even, so the codes are identical to the scalar tier's.
// Lifting: rows are quantized into scratch (L1 resident: at most K bytes), then each 64 output codes
// are one vpermb of one 64-byte load (LiftPhases), so X is read once from memory and X' written once.
// Measured against making the codes in registers and permuting two 64-code chunks with vpermt2b:
// 42 vs 36 GB/s in cache (bf16 [64, 4096] -> int8, 6:8, one thread).
// GCC 12's AVX-512 headers fill the unused pass-through operand of unmasked intrinsics with
// _mm512_undefined_epi32() (a self-initialised variable), which -Wuninitialized reports once inlined.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>

#include "cpu/quant_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

// Horizontal maximum of 16 unsigned lanes (GCC 12's _mm512_reduce_max_epu32 trips
// -Wmaybe-uninitialized inside its own header).
uint32_t reduce_max_epu32(__m512i v) {
  __m256i m = _mm256_max_epu32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xB1));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(h));
}

constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

uint32_t abs_bits_max_f32(const std::byte* row, int64_t K) {
  const __m512i mask = _mm512_set1_epi32(0x7FFFFFFF);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0, m3 = m0;
  const auto* p = reinterpret_cast<const float*>(row);
  int64_t k = 0;
  for (; k + 64 <= K; k += 64) {
    m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(p + k), mask));
    m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_loadu_si512(p + k + 16), mask));
    m2 = _mm512_max_epu32(m2, _mm512_and_si512(_mm512_loadu_si512(p + k + 32), mask));
    m3 = _mm512_max_epu32(m3, _mm512_and_si512(_mm512_loadu_si512(p + k + 48), mask));
  }
  for (; k + 16 <= K; k += 16) {
    m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(p + k), mask));
  }
  if (k < K) {
    const auto tail = static_cast<__mmask16>((1u << (K - k)) - 1);
    m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_maskz_loadu_epi32(tail, p + k), mask));
  }
  const __m512i m = _mm512_max_epu32(_mm512_max_epu32(m0, m1), _mm512_max_epu32(m2, m3));
  return reduce_max_epu32(m);
}

// bf16 and f16 alike: the magnitude order of both is the unsigned order of their low 15 bits.
uint32_t abs_bits_max_16(const std::byte* row, int64_t K) {
  const __m512i mask = _mm512_set1_epi16(0x7FFF);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0, m3 = m0;
  const auto* p = reinterpret_cast<const uint16_t*>(row);
  int64_t k = 0;
  for (; k + 128 <= K; k += 128) {
    m0 = _mm512_max_epu16(m0, _mm512_and_si512(_mm512_loadu_si512(p + k), mask));
    m1 = _mm512_max_epu16(m1, _mm512_and_si512(_mm512_loadu_si512(p + k + 32), mask));
    m2 = _mm512_max_epu16(m2, _mm512_and_si512(_mm512_loadu_si512(p + k + 64), mask));
    m3 = _mm512_max_epu16(m3, _mm512_and_si512(_mm512_loadu_si512(p + k + 96), mask));
  }
  for (; k + 32 <= K; k += 32) {
    m0 = _mm512_max_epu16(m0, _mm512_and_si512(_mm512_loadu_si512(p + k), mask));
  }
  if (k < K) {
    const auto tail = static_cast<__mmask32>((1ull << (K - k)) - 1);
    m1 = _mm512_max_epu16(m1, _mm512_and_si512(_mm512_maskz_loadu_epi16(tail, p + k), mask));
  }
  const __m512i m = _mm512_max_epu16(_mm512_max_epu16(m0, m1), _mm512_max_epu16(m2, m3));
  const __m512i wide = _mm512_max_epu32(_mm512_and_si512(m, _mm512_set1_epi32(0xFFFF)),
                                        _mm512_srli_epi32(m, 16));
  return reduce_max_epu32(wide);
}

// 16 values from element k on (the first `mask` lanes when Masked).
template <DType D, bool Masked>
__m512 load16(const std::byte* row, int64_t k, __mmask16 mask) {
  if constexpr (D == DType::F32) {
    const auto* p = reinterpret_cast<const float*>(row) + k;
    return Masked ? _mm512_maskz_loadu_ps(mask, p) : _mm512_loadu_ps(p);
  } else {
    const auto* p = reinterpret_cast<const uint16_t*>(row) + k;
    const __m256i h = Masked ? _mm256_maskz_loadu_epi16(mask, p)
                             : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (D == DType::BF16) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}

// 16 products to 16 codes as int32 lanes (quant_kernels.h rules; products are finite here).
template <QuantType T>
__m512i codes32(__m512 v) {
  if constexpr (T == QuantType::Int8) {
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    return _mm512_cvt_roundps_epi32(v, kRne);
  } else {
    // Adding C = 2^(max(E, -6) + 20) to |v| (E: exponent of |v|) leaves a sum whose last mantissa bit
    // weighs 2^(max(E, -6) - 3): e4m3's spacing at |v| (2^-9 below 2^-6), so the add rounds |v| to
    // e4m3 with ties to even (embedded rounding: independent of MXCSR). Sum and C share the exponent
    // field, so the sum's mantissa bits count e4m3 steps above C: 8 + m for a normal result, m for a
    // subnormal one, and code = (max(E, -6) + 6) * 8 + those bits; a carry into 2^(E+1) gives 16,
    // which is the next exponent's code. Saturation at 0x7E as in f32_to_e4m3.
    const __m512i bits = _mm512_castps_si512(v);
    const __m512 mag = _mm512_castsi512_ps(_mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)));
    const __m512i exponent = _mm512_max_epu32(_mm512_and_si512(bits, _mm512_set1_epi32(0x7F800000)),
                                              _mm512_set1_epi32(121 << 23));  // at least 2^-6
    const __m512i c = _mm512_add_epi32(exponent, _mm512_set1_epi32(20 << 23));
    const __m512i sum = _mm512_castps_si512(_mm512_add_round_ps(mag, _mm512_castsi512_ps(c), kRne));
    const __m512i steps = _mm512_and_si512(sum, _mm512_set1_epi32(0x7FFFFF));
    // (exponent >> 23) - 121 = max(E, -6) + 6; times 8 is (exponent >> 20) - 968.
    __m512i code = _mm512_add_epi32(steps, _mm512_sub_epi32(_mm512_srli_epi32(exponent, 20), _mm512_set1_epi32(968)));
    code = _mm512_min_epi32(code, _mm512_set1_epi32(0x7E));
    // code | ((bits >> 24) & 0x80): the sign as bit 7 of the code.
    return _mm512_ternarylogic_epi32(code, _mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80), 0xF8);
  }
}

template <QuantType T>
__m128i encode16(__m512 v) {
  return _mm512_cvtepi32_epi8(codes32<T>(v));
}

// 64 products (four vectors, in order) to 64 codes: two packs and one dword permute instead of four
// vpmovdb and three inserts. The packs work per 128-bit lane, leaving at dword 4l+s the codes
// 4l..4l+3 of vector s; the permute moves them to dword 4s+l. Saturation changes no code (INT8 is
// clamped to +-127 already; E4M3 codes are 0..255 and packed unsigned).
template <QuantType T>
__m512i encode64(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  const __m512i c0 = codes32<T>(v0), c1 = codes32<T>(v1), c2 = codes32<T>(v2), c3 = codes32<T>(v3);
  __m512i packed;
  if constexpr (T == QuantType::Int8) {
    packed = _mm512_packs_epi16(_mm512_packs_epi32(c0, c1), _mm512_packs_epi32(c2, c3));
  } else {
    packed = _mm512_packus_epi16(_mm512_packus_epi32(c0, c1), _mm512_packus_epi32(c2, c3));
  }
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, packed);
}

template <DType D, QuantType T>
// `next`: the following row of the chunk (or null), prefetched while this one is converted from L1, so
// that memory keeps streaming during the arithmetic (the absmax pass then finds it in cache).
void quantize_row(const std::byte* src, int64_t K, float inv, uint8_t* dst, const std::byte* next) {
  const __m512 vinv = _mm512_set1_ps(inv);
  int64_t k = 0;
  constexpr int64_t size = D == DType::F32 ? 4 : 2;
  for (; k + 64 <= K; k += 64) {
    if (next != nullptr) {
      for (int64_t line = 0; line < 64 * size; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next + k * size + line), _MM_HINT_T0);
      }
    }
    _mm512_storeu_si512(dst + k, encode64<T>(_mm512_mul_ps(load16<D, false>(src, k, 0), vinv),
                                             _mm512_mul_ps(load16<D, false>(src, k + 16, 0), vinv),
                                             _mm512_mul_ps(load16<D, false>(src, k + 32, 0), vinv),
                                             _mm512_mul_ps(load16<D, false>(src, k + 48, 0), vinv)));
  }
  for (; k + 16 <= K; k += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k),
                     encode16<T>(_mm512_mul_ps(load16<D, false>(src, k, 0), vinv)));
  }
  if (k < K) {
    const auto tail = static_cast<__mmask16>((1u << (K - k)) - 1);
    _mm_mask_storeu_epi8(dst + k, tail, encode16<T>(_mm512_mul_ps(load16<D, true>(src, k, tail), vinv)));
  }
}

void gather_row(const LiftPhases& phases, const uint8_t* codes, uint8_t* dst, int64_t cols) {
  const uint8_t* cycle = codes;
  int v = 0;
  int64_t j = 0;
  for (; j + 64 <= cols; j += 64) {
    const __m512i index = _mm512_loadu_si512(phases.index + v * 64);
    const __m512i src = _mm512_loadu_si512(cycle + phases.base[v]);
    _mm512_storeu_si512(dst + j, _mm512_permutexvar_epi8(index, src));
    if (++v == phases.count) {
      v = 0;
      cycle += phases.in_advance;
    }
  }
  if (j < cols) {
    const __mmask64 tail = (1ull << (cols - j)) - 1;
    const __m512i index = _mm512_loadu_si512(phases.index + v * 64);
    const __m512i src = _mm512_loadu_si512(cycle + phases.base[v]);
    _mm512_mask_storeu_epi8(dst + j, tail, _mm512_permutexvar_epi8(index, src));
  }
}

// n codes from src to dst: the 64-byte lines wholly inside dst with non-temporal stores, the partial
// lines at either end with masked ordinary stores (src has 64 readable bytes past n).
void stream_row(uint8_t* dst, const uint8_t* src, int64_t n) {
  const auto misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(dst) & 63);
  int64_t i = misalign == 0 ? 0 : (64 - misalign < n ? 64 - misalign : n);
  if (i > 0) _mm512_mask_storeu_epi8(dst, (1ull << i) - 1, _mm512_loadu_si512(src));
  for (; i + 64 <= n; i += 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), _mm512_loadu_si512(src + i));
  }
  if (i < n) _mm512_mask_storeu_epi8(dst + i, (1ull << (n - i)) - 1, _mm512_loadu_si512(src + i));
}

// The lifting gather tables of this tier's vectors (64-byte vpermb).
constexpr LiftPhases LiftTable::* kGatherPhases = &LiftTable::v64;

}  // namespace

#include "cpu/quant_rows-inl.h"  // rows_impl, quantize_rows

}  // namespace nmkit::cpu::avx512
