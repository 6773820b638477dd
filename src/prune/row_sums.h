// Per-row float64 sums of the pruning metrics (docs/design.md 3). Four interleaved lanes per quantity
// (element i of a block feeds lane i % 4) break the add latency chains; the lane order is fixed,
// so a row's sums do not depend on the thread count. kept is 0 or 1, so d*kept and d - d*kept are
// exactly d or 0: no branches, and every product of floats widened to double is exact.
// SSE2 intrinsics: part of x86-64 itself, so no ISA dispatch is needed; the compiler's own
// vectorisation of this loop converted element by element (measured 2x slower).
#pragma once

#include <emmintrin.h>

#include <cstdint>

namespace nmkit::prune_detail {

struct RowSums {
  // [0] holds lanes 0 and 1, [1] lanes 2 and 3.
  __m128d abs_kept[2], abs_pruned[2], sq_kept[2], sq_pruned[2];
  int64_t kept = 0;

  RowSums() {
    for (int h = 0; h < 2; ++h) {
      abs_kept[h] = abs_pruned[h] = sq_kept[h] = sq_pruned[h] = _mm_setzero_pd();
    }
  }

  void add_quad(__m128 w4, __m128i k4) {
    const __m128d abs_mask = _mm_castsi128_pd(_mm_set1_epi64x(0x7FFFFFFFFFFFFFFF));
    const __m128d d[2] = {_mm_and_pd(_mm_cvtps_pd(w4), abs_mask),
                          _mm_and_pd(_mm_cvtps_pd(_mm_movehl_ps(w4, w4)), abs_mask)};
    const __m128d k[2] = {_mm_cvtepi32_pd(k4), _mm_cvtepi32_pd(_mm_shuffle_epi32(k4, 0xEE))};
    for (int h = 0; h < 2; ++h) {
      const __m128d dk = _mm_mul_pd(d[h], k[h]);
      const __m128d dp = _mm_sub_pd(d[h], dk);
      abs_kept[h] = _mm_add_pd(abs_kept[h], dk);
      abs_pruned[h] = _mm_add_pd(abs_pruned[h], dp);
      sq_kept[h] = _mm_add_pd(sq_kept[h], _mm_mul_pd(dk, dk));
      sq_pruned[h] = _mm_add_pd(sq_pruned[h], _mm_mul_pd(dp, dp));
    }
  }

  void add(const float* w, const int32_t* k, int64_t n) {
    int64_t i = 0;
    __m128i count = _mm_setzero_si128();
    for (; i + 4 <= n; i += 4) {
      const __m128i k4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k + i));
      add_quad(_mm_loadu_ps(w + i), k4);
      count = _mm_add_epi32(count, k4);
    }
    if (i < n) {  // the last 1..3 elements, zero-padded (adding exact zeros changes nothing)
      float wt[4] = {0, 0, 0, 0};
      int32_t kt[4] = {0, 0, 0, 0};
      for (int64_t j = i; j < n; ++j) {
        wt[j - i] = w[j];
        kt[j - i] = k[j];
      }
      const __m128i k4 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kt));
      add_quad(_mm_loadu_ps(wt), k4);
      count = _mm_add_epi32(count, k4);
    }
    alignas(16) int32_t c[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(c), count);
    kept += int64_t{c[0]} + c[1] + c[2] + c[3];
  }

  static double total(const __m128d* x) {
    alignas(16) double a[2], b[2];
    _mm_store_pd(a, x[0]);
    _mm_store_pd(b, x[1]);
    return (a[0] + a[1]) + (b[0] + b[1]);
  }
};

}  // namespace nmkit::prune_detail
