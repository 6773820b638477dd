// The activation passes with AVX2: 8 values per vector, the bf16 rule of f32_to_bf16 in integer
// lanes (see avx512/activation.cc), two vectors' bits packed into one 16-value store. The last
// n % 8 values take the baseline per-value helpers.
#include <immintrin.h>

#include <cstring>

#include "cpu/activation_kernels.h"
#include "nmkit/dtype.h"

namespace nmkit::cpu::avx2 {
namespace {

// All-ones in lanes whose exponent bits are all set: NaN or infinity.
__m256i non_finite(__m256i u) {
  const __m256i exponent = _mm256_set1_epi32(0x7F800000);
  return _mm256_cmpeq_epi32(_mm256_and_si256(u, exponent), exponent);
}

// The bf16 bits of 8 f32 values in the low half of each 32-bit lane (f32_to_bf16's rule). The
// magnitude compare is signed, which is safe: both sides are below 2^31.
__m256i bf16_lanes(__m256i u) {
  const __m256i high = _mm256_srli_epi32(u, 16);
  const __m256i odd = _mm256_and_si256(high, _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), odd), 16);
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7F800000));
  return _mm256_blendv_epi8(rounded, _mm256_or_si256(high, _mm256_set1_epi32(0x40)), nan);
}

__m256i load(const float* x) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)); }

// 16 bits lanes (each < 2^16, so the unsigned saturation of packus never fires) in value order:
// packus interleaves the 128-bit halves of a and b, the permute puts them back.
__m256i pack(__m256i a, __m256i b) { return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8); }

// The last values one at a time, with the same rule (the baseline helper).
bool convert_tail(const float* x, size_t n, float* rounded, uint16_t* bits) {
  bool finite = true;
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    finite = finite && (u & 0x7F800000u) != 0x7F800000u;
    const uint16_t h = f32_to_bf16(x[i]);
    if (bits != nullptr) bits[i] = h;
    if (rounded != nullptr) {  // not bf16_to_f32: an inline function of the header (quant_kernels.h)
      const uint32_t widened = static_cast<uint32_t>(h) << 16;
      std::memcpy(rounded + i, &widened, 4);
    }
  }
  return finite;
}

template <bool kRounded, bool kBits>
bool convert_all(const float* x, size_t n, float* rounded, uint16_t* bits) {
  __m256i bad = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i u0 = load(x + i), u1 = load(x + i + 8);
    bad = _mm256_or_si256(bad, _mm256_or_si256(non_finite(u0), non_finite(u1)));
    const __m256i h0 = bf16_lanes(u0), h1 = bf16_lanes(u1);
    if constexpr (kRounded) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(rounded + i), _mm256_slli_epi32(h0, 16));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(rounded + i + 8), _mm256_slli_epi32(h1, 16));
    }
    if constexpr (kBits) _mm256_storeu_si256(reinterpret_cast<__m256i*>(bits + i), pack(h0, h1));
  }
  const bool finite = _mm256_testz_si256(bad, bad) != 0;
  return convert_tail(x + i, n - i, kRounded ? rounded + i : nullptr, kBits ? bits + i : nullptr) && finite;
}

}  // namespace

bool all_finite(const float* x, size_t n) {
  __m256i bad = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_or_si256(non_finite(load(x + i)), non_finite(load(x + i + 8))),
                                               _mm256_or_si256(non_finite(load(x + i + 16)), non_finite(load(x + i + 24)))));
  }
  for (; i + 8 <= n; i += 8) bad = _mm256_or_si256(bad, non_finite(load(x + i)));
  bool finite = _mm256_testz_si256(bad, bad) != 0;
  for (; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    finite = finite && (u & 0x7F800000u) != 0x7F800000u;
  }
  return finite;
}

bool all_finite_bf16(const uint16_t* bits, size_t n) {
  const __m256i exponent = _mm256_set1_epi16(0x7F80);
  __m256i bad = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + i));
    bad = _mm256_or_si256(bad, _mm256_cmpeq_epi16(_mm256_and_si256(h, exponent), exponent));
  }
  bool finite = _mm256_testz_si256(bad, bad) != 0;
  for (; i < n; ++i) finite = finite && (bits[i] & 0x7F80u) != 0x7F80u;
  return finite;
}

bool to_bf16(const float* x, size_t n, float* rounded, uint16_t* bits) {
  if (rounded != nullptr && bits != nullptr) return convert_all<true, true>(x, n, rounded, bits);
  if (rounded != nullptr) return convert_all<true, false>(x, n, rounded, bits);
  if (bits != nullptr) return convert_all<false, true>(x, n, rounded, bits);
  return all_finite(x, n);
}

}  // namespace nmkit::cpu::avx2
