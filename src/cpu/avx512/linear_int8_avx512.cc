// AVX-512 VNNI INT8 kernels, dense and sparse24 (docs/design.md 6 and 8). vpdpbusd multiplies unsigned by
// signed bytes, so the activation codes are offset by 128 (an xor of the sign bit) and 128 times the
// row's code sum is subtracted at the end: exact, so the result equals the reference bit for bit.
// sparse24 streams 64 values and 16 bytes of meta per row and 128 K (2.5 bytes per 4 weights against
// 4, the 1.6x ceiling). The 64 byte indices are decoded in registers: each 2-bit field is moved to
// its byte by one vpmultishiftqb, and one vpermt2b gathers the matching activations from 128.
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

struct Int8Tables {
  // Byte s: bit offset of field s within the qword broadcast to its lane group (value s's field is
  // bit 2s of the 128-bit meta; lanes 0-31 read meta qword 0, lanes 32-63 qword 1).
  alignas(64) uint8_t shift[64];
  // Byte s: 4 * (s / 2), the first K of value s's group within the chunk.
  alignas(64) uint8_t base[64];
};

constexpr Int8Tables make_tables() {
  Int8Tables t{};
  for (int s = 0; s < 64; ++s) {
    t.shift[s] = static_cast<uint8_t>((2 * s) % 64);
    t.base[s] = static_cast<uint8_t>(4 * (s / 2));
  }
  return t;
}

constexpr Int8Tables kTables = make_tables();

template <int Mc>
inline void store_block(const LinearCall& call, int64_t m0, int64_t b, __m512i (&acc)[Mc][kLinearRowBlock]) {
  const auto* sums = call.w->row_sum.as<int32_t>();
  for (int m = 0; m < Mc; ++m) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row >= call.w->rows) continue;
      const int32_t total = _mm512_reduce_add_epi32(acc[m][r]) - 128 * sums[row];
      store_output(call, m0 + m, row, int8_output(call, m0 + m, row, total));
    }
  }
}

// Dense rows or an INT8 tile (cpu/linear_common.h block_rows, zero-padded to a multiple of 64): 128 K
// per step, then a last step of 64 where the width is an odd multiple of 64.
template <int Mc>
void dense_block(const LinearCall& call, int64_t b, int64_t m0) {
  const int8_t* rows[kLinearRowBlock];
  block_rows(call, b, rows);
  const int64_t width = dense_width(call), ldx = call.w->K_x;
  const int8_t* x = static_cast<const int8_t*>(call.x) + m0 * ldx;
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_si512();
  int64_t k = 0;
  for (; k + kLinearChunkInt8 <= width; k += kLinearChunkInt8) {
    __m512i xa[Mc], xb[Mc];
    for (int m = 0; m < Mc; ++m) {
      xa[m] = _mm512_xor_si512(_mm512_loadu_si512(x + m * ldx + k), sign);
      xb[m] = _mm512_xor_si512(_mm512_loadu_si512(x + m * ldx + k + 64), sign);
    }
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const __m512i wa = _mm512_loadu_si512(rows[r] + k);
      const __m512i wb = _mm512_loadu_si512(rows[r] + k + 64);
      for (int m = 0; m < Mc; ++m) {
        acc[m][r] = _mm512_dpbusd_epi32(acc[m][r], xa[m], wa);
        acc[m][r] = _mm512_dpbusd_epi32(acc[m][r], xb[m], wb);
      }
    }
  }
  if (k < width) {  // the last 64
    __m512i xa[Mc];
    for (int m = 0; m < Mc; ++m) xa[m] = _mm512_xor_si512(_mm512_loadu_si512(x + m * ldx + k), sign);
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const __m512i wa = _mm512_loadu_si512(rows[r] + k);
      for (int m = 0; m < Mc; ++m) acc[m][r] = _mm512_dpbusd_epi32(acc[m][r], xa[m], wa);
    }
  }
  store_block<Mc>(call, m0, b, acc);
}

// Records of 128 K, the last one of 64 K (32 values, 8 meta bytes) when K_x is an odd multiple of 64:
// its upper 32 lanes take zero values and zero fields, so they add nothing.
template <int Mc>
void sparse24_block(const LinearCall& call, int64_t b, int64_t m0) {
  const PackedLinear& w = *call.w;
  const int64_t chunks = w.K_x / kLinearChunkInt8;  // of 128 K
  const int8_t* values = w.values.as<int8_t>() + sparse24_int8_k(w, b, 0, 0) / 2;
  const uint8_t* meta = w.meta.as<uint8_t>() + sparse24_int8_k(w, b, 0, 0) / 8;
  const int8_t* x = static_cast<const int8_t*>(call.x) + m0 * w.K_x;
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i shift = _mm512_load_si512(kTables.shift);
  const __m512i base = _mm512_load_si512(kTables.base);
  const __m512i three = _mm512_set1_epi8(3);
  const __m512i halves = _mm512_set_epi64(1, 1, 1, 1, 0, 0, 0, 0);
  __m512i acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_si512();
  for (int64_t c = 0; c < chunks; ++c) {
    prefetch_ahead(values + c * kLinearRowBlock * 64, kLinearRowBlock * 64);
    __m512i xa[Mc], xb[Mc];
    for (int m = 0; m < Mc; ++m) {
      xa[m] = _mm512_xor_si512(_mm512_loadu_si512(x + m * w.K_x + c * kLinearChunkInt8), sign);
      xb[m] = _mm512_xor_si512(_mm512_loadu_si512(x + m * w.K_x + c * kLinearChunkInt8 + 64), sign);
    }
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t record = c * kLinearRowBlock + r;  // within the block's full records
      const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(meta + record * 16));
      const __m512i spread = _mm512_permutexvar_epi64(halves, _mm512_castsi128_si512(bits));
      // (field >> shift) & 3 | base: 0xEA is the ternary-logic table of (A & B) | C.
      const __m512i idx =
          _mm512_ternarylogic_epi32(_mm512_multishift_epi64_epi8(shift, spread), three, base, 0xEA);
      const __m512i wv = _mm512_loadu_si512(values + record * 64);
      for (int m = 0; m < Mc; ++m) {
        acc[m][r] = _mm512_dpbusd_epi32(acc[m][r], _mm512_permutex2var_epi8(xa[m], idx, xb[m]), wv);
      }
    }
  }
  if (w.K_x % kLinearChunkInt8 != 0) {  // the 64-K record
    const int64_t c = chunks;
    __m512i xa[Mc];
    for (int m = 0; m < Mc; ++m) {
      xa[m] = _mm512_xor_si512(_mm512_loadu_si512(x + m * w.K_x + c * kLinearChunkInt8), sign);
    }
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t k = int8_chunk_offset(w.K_x, c, r);
      const __m128i bits = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(meta + k / 8));
      const __m512i spread = _mm512_permutexvar_epi64(halves, _mm512_castsi128_si512(bits));
      const __m512i idx =
          _mm512_ternarylogic_epi32(_mm512_multishift_epi64_epi8(shift, spread), three, base, 0xEA);
      const __m512i wv = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, values + k / 2);
      for (int m = 0; m < Mc; ++m) {
        acc[m][r] = _mm512_dpbusd_epi32(acc[m][r], _mm512_permutexvar_epi8(idx, xa[m]), wv);
      }
    }
  }
  store_block<Mc>(call, m0, b, acc);
}

// nm records (cpu/linear_kernels.h, superchunks of lcm(group, 64) K): per 64 K and row, one 64-bit
// mask word and the next popcount(word) codes, placed into their lanes by one vpexpandb (AVX-512
// VBMI2; register form) from a full 64-byte load (the packed slack covers the last), then the dense
// vpdpbusd. 6:8 streams 56 bytes per row and 64 K against dense's 64 (0.875). kOneStep: the group
// divides 64, so a superchunk is one step and the kernel one loop over them (written as the general
// two loops, GCC stored the accumulators every step: docs/data.md "The gap, found").
template <int Mc, bool kOneStep>
void nm_block(const LinearCall& call, int64_t b, int64_t m0) {
  const PackedLinear& w = *call.w;
  const int8_t* x = static_cast<const int8_t*>(call.x) + m0 * w.K_x;
  const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm512_setzero_si512();
  const int64_t superchunks = w.K_x / w.superchunk, steps = w.superchunk / 64;
  const int64_t mask_words = w.mask_stride / 8, value_stride = w.value_stride, superchunk = w.superchunk, K_x = w.K_x;
  // The block's records of a superchunk are adjacent, one superchunk's after the other's.
  const int8_t* const values = w.values.as<int8_t>() + nm_record(w, b, 0, 0) * value_stride;
  // Mask words read as uint64_t, not memcpy'd bytes: a char-typed read may alias the accumulators,
  // and GCC then stored them every step.
  const uint64_t* const masks = reinterpret_cast<const uint64_t*>(w.meta.as<uint8_t>()) + nm_record(w, b, 0, 0) * mask_words;
  for (int64_t c = 0; c < superchunks; ++c) {
    const int8_t* v = values + c * kLinearRowBlock * value_stride;
    const uint64_t* bits = masks + c * kLinearRowBlock * mask_words;
    const int8_t* xc = x + c * superchunk;
    if constexpr (kOneStep) {
      prefetch_ahead(v, kLinearRowBlock * 64);  // at most 64 codes a row: a constant count of lines
      __m512i xs[Mc];
      for (int m = 0; m < Mc; ++m) xs[m] = _mm512_xor_si512(_mm512_loadu_si512(xc + m * K_x), sign);
      for (int r = 0; r < kLinearRowBlock; ++r) {
        const uint64_t word = bits[r];
        const __m512i codes = _mm512_maskz_expand_epi8(word, _mm512_loadu_si512(v + r * value_stride));
        for (int m = 0; m < Mc; ++m) acc[m][r] = _mm512_dpbusd_epi32(acc[m][r], xs[m], codes);
      }
    } else {
      prefetch_ahead(v, kLinearRowBlock * value_stride);
      int64_t offset[kLinearRowBlock] = {};
      for (int64_t s = 0; s < steps; ++s) {
        __m512i xs[Mc];
        for (int m = 0; m < Mc; ++m) xs[m] = _mm512_xor_si512(_mm512_loadu_si512(xc + m * K_x + 64 * s), sign);
        for (int r = 0; r < kLinearRowBlock; ++r) {
          const uint64_t word = bits[r * mask_words + s];
          const __m512i codes = _mm512_maskz_expand_epi8(word, _mm512_loadu_si512(v + r * value_stride + offset[r]));
          offset[r] += __builtin_popcountll(word);
          for (int m = 0; m < Mc; ++m) acc[m][r] = _mm512_dpbusd_epi32(acc[m][r], xs[m], codes);
        }
      }
    }
  }
  store_block<Mc>(call, m0, b, acc);
}

// Row block b of an nm weight expanded into dense int8 rows (dst + r * ld), 64 K per vpexpandb.
void nm_tile(const PackedLinear& w, int64_t b, int8_t* dst, int64_t ld) {
  const int64_t superchunks = w.K_x / w.superchunk, steps = w.superchunk / 64;
  for (int64_t c = 0; c < superchunks; ++c) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t record = nm_record(w, b, c, r);
      const int8_t* v = w.values.as<int8_t>() + record * w.value_stride;
      const uint8_t* bits = w.meta.as<uint8_t>() + record * w.mask_stride;
      for (int64_t s = 0; s < steps; ++s) {
        uint64_t word;
        __builtin_memcpy(&word, bits + 8 * s, 8);
        _mm512_storeu_si512(dst + r * ld + c * w.superchunk + 64 * s, _mm512_maskz_expand_epi8(word, _mm512_loadu_si512(v)));
        v += __builtin_popcountll(word);
      }
    }
  }
}

template <void (*Block1)(const LinearCall&, int64_t, int64_t), void (*Block2)(const LinearCall&, int64_t, int64_t),
          void (*Block3)(const LinearCall&, int64_t, int64_t), void (*Block4)(const LinearCall&, int64_t, int64_t)>
void run(const LinearCall& call) {
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    int64_t m = 0;
    for (; m + 4 <= call.M; m += 4) Block4(call, b, m);
    switch (call.M - m) {
      case 3: Block3(call, b, m); break;
      case 2: Block2(call, b, m); break;
      case 1: Block1(call, b, m); break;
      default: break;
    }
  }
}

// The one-step kernel where the group divides 64 (every 6:8, 4:8, 2:4, 1:4 weight), else the general.
void nm_rows(const LinearCall& call) {
  if (64 % call.w->pattern.group == 0) {
    run<nm_block<1, true>, nm_block<2, true>, nm_block<3, true>, nm_block<4, true>>(call);
  } else {
    run<nm_block<1, false>, nm_block<2, false>, nm_block<3, false>, nm_block<4, false>>(call);
  }
}

// Row block b expanded into dense int8 rows (dst + r * ld), 64 dense bytes (16 groups) per step: each lane
// takes its group's two 2-bit positions with vpmultishiftqb, compares them with its own position,
// and one vpermb places value 2 * group (+1 for the second position) where either matches.
// The 64-K record of an odd multiple of 64 (cpu/linear_common.h) is its first half alone.
void sparse24_tile(const PackedLinear& w, int64_t b, int8_t* dst, int64_t ld) {
  const int64_t chunks = int8_chunks(w.K_x);
  alignas(64) uint8_t lane_pos[64], first[64], second[64], base[64];
  for (int k = 0; k < 64; ++k) {
    lane_pos[k] = static_cast<uint8_t>(k % 4);
    first[k] = static_cast<uint8_t>(4 * (k / 4));
    second[k] = static_cast<uint8_t>(4 * (k / 4) + 2);
    base[k] = static_cast<uint8_t>(2 * (k / 4));
  }
  const __m512i pos = _mm512_load_si512(lane_pos), ctrl0 = _mm512_load_si512(first),
                ctrl1 = _mm512_load_si512(second), three = _mm512_set1_epi8(3), one = _mm512_set1_epi8(1);
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t halves = int8_chunk_width(w.K_x, c) / 64;
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t k = sparse24_int8_k(w, b, c, r);
      const __mmask64 present = halves == 2 ? ~0ull : 0xFFFFFFFFull;  // 64 values, or 32 in a 64-K record
      const __m512i values = _mm512_maskz_loadu_epi8(present, w.values.as<int8_t>() + k / 2);
      const auto* meta = w.meta.as<uint8_t>() + k / 8;
      for (int h = 0; h < halves; ++h) {
        long long word;
        __builtin_memcpy(&word, meta + 8 * h, 8);
        const __m512i src = _mm512_set1_epi64(word);
        const __mmask64 k0 = _mm512_cmpeq_epi8_mask(_mm512_and_si512(_mm512_multishift_epi64_epi8(ctrl0, src), three), pos);
        const __mmask64 k1 = _mm512_cmpeq_epi8_mask(_mm512_and_si512(_mm512_multishift_epi64_epi8(ctrl1, src), three), pos);
        const __m512i idx0 = _mm512_add_epi8(_mm512_load_si512(base), _mm512_set1_epi8(static_cast<char>(32 * h)));
        const __m512i idx = _mm512_mask_add_epi8(idx0, k1, idx0, one);
        _mm512_storeu_si512(dst + r * ld + c * kLinearChunkInt8 + 64 * h,
                            _mm512_maskz_permutexvar_epi8(k0 | k1, idx, values));
      }
    }
  }
}

}  // namespace

void fill_linear_int8(LinearKernels& slots) {
  slots.sparse24_i8_tile = sparse24_tile;
  slots.dense_i8 = run<dense_block<1>, dense_block<2>, dense_block<3>, dense_block<4>>;
  slots.sparse24_i8 = run<sparse24_block<1>, sparse24_block<2>, sparse24_block<3>, sparse24_block<4>>;
  slots.nm_i8 = nm_rows;
  slots.nm_i8_tile = nm_tile;
}

}  // namespace nmkit::cpu::avx512
