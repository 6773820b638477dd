// AVX-512 dense and sparse24 kernels, f32 and bf16 weights, f32 activations (docs/design.md 8).
// Shape: a block of 4 rows is applied to up to 4 tokens at a time with 16 ZMM accumulators, the
// activations of a 32-wide K chunk held in registers. sparse24 gathers the activations that meet
// the 16 kept values of a row with one vpermt2ps whose indices are decoded in registers from the
// row's 32-bit meta word (broadcast, variable shift, ternary logic), so only 2 bits per kept value
// are streamed: 8.5 bytes per 4 f32 weights against 16 (1.88x), 4.5 against 8 for bf16 (1.78x).
// Every lane sums K/32 (sparse24) or K/16 (dense) products, then 4 levels of reduction.
// GCC 12's AVX-512 headers seed some intrinsics with _mm512_undefined_*(), which -Wuninitialized
// reports inside the header; the values are fully overwritten, so the warning is silenced here only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
// bf16 -> f32 is exact: the bf16 bits are the high half of the f32.
inline __m512 load16(const uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// Writes the Mc x 4 sums of a row block (rows past the weight's end are padding).
template <int Mc>
inline void store_block(const LinearCall& call, int64_t m0, int64_t b, __m512 (&acc)[Mc][kLinearRowBlock]) {
  for (int m = 0; m < Mc; ++m) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row < call.w->rows) store_output(call, m0 + m, row, _mm512_reduce_add_ps(acc[m][r]));
    }
  }
}

// The first n (0..16) values at p, zero past them (masked: nothing past them is read).
inline __m512 load16_first(const float* p, int n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
}
inline __m512 load16_first(const uint16_t* p, int n) {
  const __m256i bits = _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1), p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// Dense rows (cpu/linear_common.h block_rows): 32 K per step, the rows' last partial step with
// masked loads (X is zero there, but the row's memory may end).
template <int Mc, class T>
void dense_block(const LinearCall& call, int64_t b, int64_t m0) {
  const T* rows[kLinearRowBlock];
  block_rows(call, b, rows);
  const int64_t width = dense_width(call), ldx = call.w->K_x;
  const float* x = static_cast<const float*>(call.x) + m0 * ldx;
  __m512 acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_ps();
  auto step = [&](int64_t k, auto load) {
    __m512 xa[Mc], xb[Mc];
    for (int m = 0; m < Mc; ++m) {
      xa[m] = _mm512_loadu_ps(x + m * ldx + k);
      xb[m] = _mm512_loadu_ps(x + m * ldx + k + 16);
    }
    for (int r = 0; r < kLinearRowBlock; ++r) {
      __m512 wa, wb;
      load(rows[r] + k, wa, wb);
      for (int m = 0; m < Mc; ++m) {
        acc[m][r] = _mm512_fmadd_ps(wa, xa[m], acc[m][r]);
        acc[m][r] = _mm512_fmadd_ps(wb, xb[m], acc[m][r]);
      }
    }
  };
  const int64_t full = width / kLinearChunk * kLinearChunk;
  for (int64_t k = 0; k < full; k += kLinearChunk) {
    step(k, [](const T* p, __m512& wa, __m512& wb) {
      wa = load16(p);
      wb = load16(p + 16);
    });
  }
  if (const int tail = static_cast<int>(width - full); tail > 0) {
    step(full, [tail](const T* p, __m512& wa, __m512& wb) {
      wa = load16_first(p, tail < 16 ? tail : 16);
      wb = load16_first(p + 16, tail > 16 ? tail - 16 : 0);
    });
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
  // Lane j takes bits [2j, 2j+2) of the word (its position in group j/2) plus 4*(j/2).
  const __m512i shifts = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i base = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
  const __m512i three = _mm512_set1_epi32(3);
  __m512 acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c) {
    prefetch_ahead(values + c * kLinearRowBlock * 16, kLinearRowBlock * 16 * int64_t{sizeof(T)});
    __m512 xa[Mc], xb[Mc];
    for (int m = 0; m < Mc; ++m) {
      xa[m] = _mm512_loadu_ps(x + m * w.K_x + c * kLinearChunk);
      xb[m] = _mm512_loadu_ps(x + m * w.K_x + c * kLinearChunk + 16);
    }
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const __m512i word = _mm512_set1_epi32(static_cast<int>(meta[c * kLinearRowBlock + r]));
      // (word >> shift) & 3 | base: 0xEA is the ternary-logic table of (A & B) | C.
      const __m512i idx = _mm512_ternarylogic_epi32(_mm512_srlv_epi32(word, shifts), three, base, 0xEA);
      const __m512 wv = load16(values + (c * kLinearRowBlock + r) * 16);
      for (int m = 0; m < Mc; ++m) {
        acc[m][r] = _mm512_fmadd_ps(_mm512_permutex2var_ps(xa[m], idx, xb[m]), wv, acc[m][r]);
      }
    }
  }
  store_block<Mc>(call, m0, b, acc);
}

// sparse24 bf16 weights times bf16 activations: two chunks (64 K, 32 kept values) per step. The
// 32 word indices come from the two rows' meta words with one vpmultishiftqb; one vpermt2w gathers
// the activations that meet the values, already paired by group as vdpbf16ps multiplies them (the
// two kept values of a group are adjacent), so one instruction does 32 products.
template <int Mc>
void sparse24_bf16x_block(const LinearCall& call, int64_t b, int64_t m0) {
  const PackedLinear& w = *call.w;
  const int64_t chunks = w.K_x / kLinearChunk;  // even: K_x is a multiple of 64
  const uint16_t* values = w.values.as<uint16_t>() + b * chunks * kLinearRowBlock * 16;
  const uint32_t* meta = w.meta.as<uint32_t>() + b * chunks * kLinearRowBlock;
  const uint16_t* x = call.x_bf16 + m0 * w.K_x;
  // Byte s: bit offset 2s of value s's field; base 4 * (s / 2), its group's first K.
  const __m256i ctrl = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40,
                                        42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62);
  const __m256i base = _mm256_setr_epi8(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28, 32, 32, 36, 36, 40,
                                        40, 44, 44, 48, 48, 52, 52, 56, 56, 60, 60);
  const __m256i three = _mm256_set1_epi8(3);
  __m512 acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_ps();
  for (int64_t c = 0; c < chunks; c += 2) {
    prefetch_ahead(values + c * kLinearRowBlock * 16, 2 * kLinearRowBlock * 16 * 2);
    __m512i xa[Mc], xb[Mc];
    for (int m = 0; m < Mc; ++m) {
      xa[m] = _mm512_loadu_si512(x + m * w.K_x + c * kLinearChunk);
      xb[m] = _mm512_loadu_si512(x + m * w.K_x + c * kLinearChunk + 32);
    }
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const uint64_t word = uint64_t{meta[c * kLinearRowBlock + r]} | uint64_t{meta[(c + 1) * kLinearRowBlock + r]} << 32;
      const __m256i fields = _mm256_multishift_epi64_epi8(ctrl, _mm256_set1_epi64x(static_cast<long long>(word)));
      const __m512i idx = _mm512_cvtepu8_epi16(_mm256_ternarylogic_epi32(fields, three, base, 0xEA));
      const __m512i wv = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + (c * kLinearRowBlock + r) * 16))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + ((c + 1) * kLinearRowBlock + r) * 16)), 1);
      for (int m = 0; m < Mc; ++m) {
        const __m512i gathered = _mm512_permutex2var_epi16(xa[m], idx, xb[m]);
        acc[m][r] = _mm512_dpbf16_ps(acc[m][r], reinterpret_cast<__m512bh>(gathered), reinterpret_cast<__m512bh>(wv));
      }
    }
  }
  store_block<Mc>(call, m0, b, acc);
}

// Runs Block<Mc> over tokens in groups of 4 (then the remainder) for every row block of the call.
// The row block's weights are re-read from L1/L2 for each group of 4 tokens.
template <template <int, class> class Block, class T>
void run(const LinearCall& call) {
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    int64_t m = 0;
    for (; m + 4 <= call.M; m += 4) Block<4, T>::run(call, b, m);
    switch (call.M - m) {
      case 3: Block<3, T>::run(call, b, m); break;
      case 2: Block<2, T>::run(call, b, m); break;
      case 1: Block<1, T>::run(call, b, m); break;
      default: break;
    }
  }
}

template <int Mc, class T>
struct Dense {
  static void run(const LinearCall& call, int64_t b, int64_t m) { dense_block<Mc, T>(call, b, m); }
};
template <int Mc, class T>
struct Bf16x {
  static void run(const LinearCall& call, int64_t b, int64_t m) { sparse24_bf16x_block<Mc>(call, b, m); }
};
template <int Mc, class T>
struct Sparse {
  static void run(const LinearCall& call, int64_t b, int64_t m) { sparse24_block<Mc, T>(call, b, m); }
};

}  // namespace

void fill_linear(LinearKernels& slots) {
  slots.dense_f32 = run<Dense, float>;
  slots.dense_bf16 = run<Dense, uint16_t>;
  slots.sparse24_f32 = run<Sparse, float>;
  slots.sparse24_bf16 = run<Sparse, uint16_t>;
  slots.sparse24_bf16x = run<Bf16x, uint16_t>;
}

}  // namespace nmkit::cpu::avx512
