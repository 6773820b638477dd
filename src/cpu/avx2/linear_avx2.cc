// AVX2 + FMA dense and sparse24 kernels, f32 and bf16 weights, f32 activations (docs/design.md 8).
// Shape as in the AVX-512 tier, scaled to 16 YMM registers: a block of 4 rows and up to 2 tokens.
// sparse24 works on 16-wide halves of a chunk: the 8 kept values of a half come from two 8-wide
// activation vectors, gathered with two vpermps and one blend; the indices are decoded in
// registers from 16 bits of the row's meta word, so the weight bytes match the AVX-512 tier's.
// Every lane sums K/16 (sparse24) or K/8 (dense) products, then 3 levels of reduction.
#include <immintrin.h>

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx2 {
namespace {

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

inline float reduce8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <int Mc>
inline void store_block(const LinearCall& call, int64_t m0, int64_t b, __m256 (&acc)[Mc][kLinearRowBlock]) {
  for (int m = 0; m < Mc; ++m) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row < call.w->rows) store_output(call, m0 + m, row, reduce8(acc[m][r]));
    }
  }
}

// The first n (0..8) values at p, zero past them; nothing past them is read.
inline __m256 load8_first(const float* p, int n) {
  alignas(32) static constexpr int32_t kLanes[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_load_si256(reinterpret_cast<const __m256i*>(kLanes)));
  return _mm256_maskload_ps(p, mask);
}
inline __m256 load8_first(const uint16_t* p, int n) {
  alignas(16) uint16_t bits[8] = {};
  for (int i = 0; i < n; ++i) bits[i] = p[i];
  return load8(bits);
}

// Dense rows (cpu/linear_common.h block_rows): 8 K per step, the rows' last partial step with
// masked loads (X is zero there, but the row's memory may end).
template <int Mc, class T>
void dense_block(const LinearCall& call, int64_t b, int64_t m0) {
  const T* rows[kLinearRowBlock];
  block_rows(call, b, rows);
  const int64_t width = dense_width(call), ldx = call.w->K_x;
  const float* x = static_cast<const float*>(call.x) + m0 * ldx;
  __m256 acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm256_setzero_ps();
  const int64_t full = width / 8 * 8;
  for (int64_t k = 0; k < full; k += 8) {
    __m256 xs[Mc];
    for (int m = 0; m < Mc; ++m) xs[m] = _mm256_loadu_ps(x + m * ldx + k);
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const __m256 wv = load8(rows[r] + k);
      for (int m = 0; m < Mc; ++m) acc[m][r] = _mm256_fmadd_ps(wv, xs[m], acc[m][r]);
    }
  }
  if (const int tail = static_cast<int>(width - full); tail > 0) {
    __m256 xs[Mc];
    for (int m = 0; m < Mc; ++m) xs[m] = _mm256_loadu_ps(x + m * ldx + full);
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const __m256 wv = load8_first(rows[r] + full, tail);
      for (int m = 0; m < Mc; ++m) acc[m][r] = _mm256_fmadd_ps(wv, xs[m], acc[m][r]);
    }
  }
  store_block<Mc>(call, m0, b, acc);
}

template <int Mc, class T>
void sparse24_block(const LinearCall& call, int64_t b, int64_t m0) {
  const PackedLinear& w = *call.w;
  const int64_t chunks = w.K_x / kLinearChunk;
  const T* values = w.values.as<T>() + b * chunks * kLinearRowBlock * 16;
  const uint32_t* meta = w.meta.as<uint32_t>() + b * chunks * kLinearRowBlock;
  const float* x = static_cast<const float*>(call.x) + m0 * w.K_x;
  // Lane j of a half takes bits [2j, 2j+2) of the half's 16 meta bits, plus 4*((j/2)%2): lanes 0-3
  // index the first 8 activations, lanes 4-7 the second 8.
  const __m256i shifts = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  const __m256i base = _mm256_setr_epi32(0, 0, 4, 4, 0, 0, 4, 4);
  const __m256i three = _mm256_set1_epi32(3);
  __m256 acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm256_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c) {
    for (int h = 0; h < 2; ++h) {
      __m256 xa[Mc], xb[Mc];
      for (int m = 0; m < Mc; ++m) {
        xa[m] = _mm256_loadu_ps(x + m * w.K_x + c * kLinearChunk + 16 * h);
        xb[m] = _mm256_loadu_ps(x + m * w.K_x + c * kLinearChunk + 16 * h + 8);
      }
      for (int r = 0; r < kLinearRowBlock; ++r) {
        const uint32_t half = meta[c * kLinearRowBlock + r] >> (16 * h);
        const __m256i idx = _mm256_or_si256(
            _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(half)), shifts), three), base);
        const __m256 wv = load8(values + (c * kLinearRowBlock + r) * 16 + 8 * h);
        for (int m = 0; m < Mc; ++m) {
          const __m256 lo = _mm256_permutevar8x32_ps(xa[m], idx);
          const __m256 hi = _mm256_permutevar8x32_ps(xb[m], idx);
          acc[m][r] = _mm256_fmadd_ps(_mm256_blend_ps(lo, hi, 0xF0), wv, acc[m][r]);
        }
      }
    }
  }
  store_block<Mc>(call, m0, b, acc);
}

template <int Mc, class T>
struct Dense {
  static void run(const LinearCall& call, int64_t b, int64_t m) { dense_block<Mc, T>(call, b, m); }
};
template <int Mc, class T>
struct Sparse {
  static void run(const LinearCall& call, int64_t b, int64_t m) { sparse24_block<Mc, T>(call, b, m); }
};

// Tokens in pairs, then the odd one; the row block is re-read from L1/L2 for each pair.
template <template <int, class> class Block, class T>
void run(const LinearCall& call) {
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    int64_t m = 0;
    for (; m + 2 <= call.M; m += 2) Block<2, T>::run(call, b, m);
    if (m < call.M) Block<1, T>::run(call, b, m);
  }
}

}  // namespace

void fill_linear(LinearKernels& slots) {
  slots.dense_f32 = run<Dense, float>;
  slots.dense_bf16 = run<Dense, uint16_t>;
  slots.sparse24_f32 = run<Sparse, float>;
  slots.sparse24_bf16 = run<Sparse, uint16_t>;
}

}  // namespace nmkit::cpu::avx2
