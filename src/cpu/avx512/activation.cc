// The activation passes with AVX-512 (F/BW): 16 values per vector, the bf16 rule of f32_to_bf16 in
// integer lanes (round to nearest even by adding 0x7FFF plus the kept lowest bit, a NaN made quiet),
// not vcvtneps2bf16, which flushes subnormals to zero. The finite check is one compare per vector
// on the bits already loaded, so the conversion reads X once for both.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's unmasked intrinsics: see quant_rows.cc
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "cpu/activation_kernels.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

// Lanes whose exponent bits are all set: NaN or infinity.
__mmask16 non_finite(__m512i u) {
  const __m512i exponent = _mm512_set1_epi32(0x7F800000);
  return _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, exponent), exponent);
}

// The bf16 bits of 16 f32 values in the low half of each 32-bit lane (f32_to_bf16's rule).
__m512i bf16_lanes(__m512i u) {
  const __m512i high = _mm512_srli_epi32(u, 16);
  const __m512i odd = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), odd), 16);
  const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7F800000));
  return _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
}

// One vector of up to 16 values (`mask` selects them): converted, stored, and its non-finite lanes.
template <bool kRounded, bool kBits>
__mmask16 convert(const float* x, float* rounded, uint16_t* bits, __mmask16 mask) {
  const __m512i u = _mm512_maskz_loadu_epi32(mask, x);
  const __m512i h = bf16_lanes(u);
  if constexpr (kRounded) _mm512_mask_storeu_epi32(rounded, mask, _mm512_slli_epi32(h, 16));
  if constexpr (kBits) _mm512_mask_cvtepi32_storeu_epi16(bits, mask, h);
  return _kand_mask16(non_finite(u), mask);
}

template <bool kRounded, bool kBits>
bool convert_all(const float* x, size_t n, float* rounded, uint16_t* bits) {
  __mmask16 bad = 0;
  size_t i = 0;
  if constexpr (kBits && !kRounded) {
    // Bits only (the bf16 GEMM's input): vcvtne2ps2bf16 rounds 32 values to nearest even and quiets
    // NaNs as the rule does, but reads subnormal inputs as zero; a step holding one (rare: |x| below
    // 2^-126) takes the integer lanes instead. Measured in L2 (295K values, one thread): 39 us with
    // the integer lanes alone.
    const __m512i magnitude_mask = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i infinity = _mm512_set1_epi32(0x7F800000);
    const __m512i largest_subnormal = _mm512_set1_epi32(0x007FFFFF);
    const __m512i one = _mm512_set1_epi32(1);
    for (; i + 32 <= n; i += 32) {
      const __m512i u0 = _mm512_loadu_si512(x + i), u1 = _mm512_loadu_si512(x + i + 16);
      const __m512i a0 = _mm512_and_si512(u0, magnitude_mask), a1 = _mm512_and_si512(u1, magnitude_mask);
      bad = _kor_mask16(bad, _kor_mask16(_mm512_cmpge_epu32_mask(a0, infinity), _mm512_cmpge_epu32_mask(a1, infinity)));
      // |x| - 1 < 2^23 - 1 (unsigned) exactly for the subnormals: zero wraps around.
      const __mmask16 sub0 = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(a0, one), largest_subnormal);
      const __mmask16 sub1 = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(a1, one), largest_subnormal);
      if (_kortestz_mask16_u8(sub0, sub1)) {
        const __m512bh h = _mm512_cvtne2ps_pbh(_mm512_castsi512_ps(u1), _mm512_castsi512_ps(u0));  // u0 low
        _mm512_storeu_si512(bits + i, reinterpret_cast<const __m512i&>(h));
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(bits + i), _mm512_cvtepi32_epi16(bf16_lanes(u0)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(bits + i + 16), _mm512_cvtepi32_epi16(bf16_lanes(u1)));
      }
    }
  }
  for (; i + 16 <= n; i += 16) {
    bad = _kor_mask16(bad, convert<kRounded, kBits>(x + i, kRounded ? rounded + i : nullptr, kBits ? bits + i : nullptr, 0xFFFF));
  }
  if (i < n) {
    const auto mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    bad = _kor_mask16(bad, convert<kRounded, kBits>(x + i, kRounded ? rounded + i : nullptr, kBits ? bits + i : nullptr, mask));
  }
  return bad == 0;
}

// Transposes 16 rows of 16 floats in registers: afterwards r[k] holds element k of every row.
// Pairs of rows interleave (unpack), then quads (shuffle_ps), then 128-bit lanes twice (shuffle_f32x4).
inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 4; ++i) {
      t[8 * h + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0x88);
      t[8 * h + 4 + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0xDD);
    }
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
  }
}

}  // namespace

void to_token_lanes(const float* x, int64_t ldx, int64_t tokens, int64_t K, int64_t K_x, float* xt) {
  // 16 tokens x 16 K per step: 16 row loads (masked past K, zero past the last token), one
  // transpose, 16 stores of 64 contiguous bytes. The scalar pass wrote one float at a time: at
  // 192x576 and 256 tokens it was a fifth of the token-lane kernel's time. Every loop below has a
  // constant trip count, so the 16 registers stay registers (a loop to a run-time count made GCC
  // keep them on the stack).
  static_assert(kTokenLanes == 16, "one transpose16 per 16 tokens x 16 K");
  const int64_t slabs = (tokens + kTokenLanes - 1) / kTokenLanes;
  for (int64_t s = 0; s < slabs; ++s) {
    float* slab = xt + s * K_x * kTokenLanes;
    const int64_t here = tokens - s * kTokenLanes < kTokenLanes ? tokens - s * kTokenLanes : kTokenLanes;
    const float* rows = x + s * kTokenLanes * ldx;
    for (int64_t k0 = 0; k0 < K_x; k0 += 16) {
      float* out = slab + k0 * kTokenLanes;
      const auto mask = K - k0 >= 16 ? static_cast<__mmask16>(0xFFFF)
                        : K > k0     ? static_cast<__mmask16>((1u << (K - k0)) - 1u)
                                     : static_cast<__mmask16>(0);
      __m512 r[16];
      for (int t = 0; t < 16; ++t) {
        r[t] = t < here ? _mm512_maskz_loadu_ps(mask, rows + t * ldx + k0) : _mm512_setzero_ps();
      }
      transpose16(r);
      for (int k = 0; k < 16; ++k) _mm512_storeu_ps(out + k * kTokenLanes, r[k]);
    }
  }
}

bool all_finite(const float* x, size_t n) {
  // Four vectors per step, their masks or-ed: the loop runs at the load rate.
  __mmask16 bad = 0;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __mmask16 low = _kor_mask16(non_finite(_mm512_loadu_si512(x + i)), non_finite(_mm512_loadu_si512(x + i + 16)));
    const __mmask16 high = _kor_mask16(non_finite(_mm512_loadu_si512(x + i + 32)), non_finite(_mm512_loadu_si512(x + i + 48)));
    bad = _kor_mask16(bad, _kor_mask16(low, high));
  }
  for (; i < n; i += 16) {
    const auto mask = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1u);
    bad = _kor_mask16(bad, _kand_mask16(non_finite(_mm512_maskz_loadu_epi32(mask, x + i)), mask));
  }
  return bad == 0;
}

bool all_finite_bf16(const uint16_t* bits, size_t n) {
  const __m512i exponent = _mm512_set1_epi16(0x7F80);
  __mmask32 bad = 0;
  for (size_t i = 0; i < n; i += 32) {
    const auto mask = n - i >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << (n - i)) - 1u);
    const __m512i h = _mm512_maskz_loadu_epi16(mask, bits + i);
    bad = _kor_mask32(bad, _mm512_cmpeq_epi16_mask(_mm512_and_si512(h, exponent), exponent));
  }
  return bad == 0;
}

bool to_bf16(const float* x, size_t n, float* rounded, uint16_t* bits) {
  if (rounded != nullptr && bits != nullptr) return convert_all<true, true>(x, n, rounded, bits);
  if (rounded != nullptr) return convert_all<true, false>(x, n, rounded, bits);
  if (bits != nullptr) return convert_all<false, true>(x, n, rounded, bits);
  return all_finite(x, n);
}

}  // namespace nmkit::cpu::avx512
