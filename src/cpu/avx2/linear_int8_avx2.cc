// AVX2 INT8 kernels, dense, sparse24 and nm. Without VNNI, products go through vpmaddubsw, which
// multiplies unsigned by signed bytes into saturating 16-bit pairs: |w| times x carrying w's sign
// keeps every pair within 2 * 127 * 127 < 32767 (codes are in [-127, 127]), so nothing saturates,
// then vpmaddwd widens to int32. sparse24 decodes 32 byte indices per step with four pdep (BMI2;
// fast on Intel and on AMD from Zen 3) and gathers activations with two in-lane vpshufb and a blend.
#include <immintrin.h>

#include "cpu/linear_common.h"
#include "cpu/linear_kernels.h"

namespace nmkit::cpu::avx2 {
namespace {

inline int32_t reduce8(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// int32 lanes of sum over byte pairs of w * x, exactly.
inline __m256i dot32(__m256i w_abs, __m256i w, __m256i x) {
  const __m256i pairs = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x, w));
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

template <int Mc>
inline void store_block(const LinearCall& call, int64_t m0, int64_t b, __m256i (&acc)[Mc][kLinearRowBlock]) {
  for (int m = 0; m < Mc; ++m) {
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t row = b * kLinearRowBlock + r;
      if (row < call.w->rows) store_output(call, m0 + m, row, int8_output(call, m0 + m, row, reduce8(acc[m][r])));
    }
  }
}

// Dense rows or an INT8 tile (cpu/linear_common.h block_rows, zero-padded to a multiple of 64),
// 32 K per step.
template <int Mc>
void dense_block(const LinearCall& call, int64_t b, int64_t m0) {
  const int8_t* rows[kLinearRowBlock];
  block_rows(call, b, rows);
  const int64_t width = dense_width(call), ldx = call.w->K_x;
  const int8_t* x = static_cast<const int8_t*>(call.x) + m0 * ldx;
  __m256i acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm256_setzero_si256();
  for (int64_t k = 0; k < width; k += 32) {
    __m256i xs[Mc];
    for (int m = 0; m < Mc; ++m) xs[m] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + m * ldx + k));
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[r] + k));
      const __m256i wa = _mm256_abs_epi8(wv);
      for (int m = 0; m < Mc; ++m) acc[m][r] = _mm256_add_epi32(acc[m][r], dot32(wa, wv, xs[m]));
    }
  }
  store_block<Mc>(call, m0, b, acc);
}

// Records of 128 K in halves of 64 K; the last record is one half when K_x is an odd multiple of 64.
template <int Mc>
void sparse24_block(const LinearCall& call, int64_t b, int64_t m0) {
  const PackedLinear& w = *call.w;
  const int64_t chunks = int8_chunks(w.K_x);
  const int8_t* x = static_cast<const int8_t*>(call.x) + m0 * w.K_x;
  // Byte s of a 128-bit lane (16 values = 8 groups = 32 K): 4 * ((s / 2) % 4), the first K of its
  // group within the 16 activations it is gathered from (values 0-7 from the lane's first 16, 8-15
  // from its second 16).
  const __m256i base = _mm256_setr_epi8(0, 0, 4, 4, 8, 8, 12, 12, 0, 0, 4, 4, 8, 8, 12, 12,
                                        0, 0, 4, 4, 8, 8, 12, 12, 0, 0, 4, 4, 8, 8, 12, 12);
  __m256i acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm256_setzero_si256();
  for (int64_t c = 0; c < chunks; ++c) {
    const int halves = static_cast<int>(int8_chunk_width(w.K_x, c) / 64);
    for (int h = 0; h < halves; ++h) {  // 32 values = 64 K per half
      __m256i xa[Mc], xb[Mc];
      for (int m = 0; m < Mc; ++m) {
        const int8_t* xp = x + m * w.K_x + c * kLinearChunkInt8 + 64 * h;
        const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp));
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + 32));
        xa[m] = _mm256_permute2x128_si256(p, q, 0x20);  // K 0-15 | K 32-47
        xb[m] = _mm256_permute2x128_si256(p, q, 0x31);  // K 16-31 | K 48-63
      }
      for (int r = 0; r < kLinearRowBlock; ++r) {
        const int64_t k = sparse24_int8_k(w, b, c, r);
        uint64_t fields;
        __builtin_memcpy(&fields, w.meta.as<uint8_t>() + k / 8 + 8 * h, 8);
        // Field s (2 bits at 2s) to byte s.
        const uint64_t spread = 0x0303030303030303ull;
        const __m256i idx = _mm256_add_epi8(
            _mm256_setr_epi64x(static_cast<long long>(_pdep_u64(fields & 0xFFFF, spread)),
                               static_cast<long long>(_pdep_u64((fields >> 16) & 0xFFFF, spread)),
                               static_cast<long long>(_pdep_u64((fields >> 32) & 0xFFFF, spread)),
                               static_cast<long long>(_pdep_u64(fields >> 48, spread))),
            base);
        const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.values.as<int8_t>() + k / 2 + 32 * h));
        const __m256i wa = _mm256_abs_epi8(wv);
        for (int m = 0; m < Mc; ++m) {
          const __m256i gathered =
              _mm256_blend_epi32(_mm256_shuffle_epi8(xa[m], idx), _mm256_shuffle_epi8(xb[m], idx), 0xCC);
          acc[m][r] = _mm256_add_epi32(acc[m][r], dot32(wa, wv, gathered));
        }
      }
    }
  }
  store_block<Mc>(call, m0, b, acc);
}

// Byte j of kExpand[m] (8 bytes per mask byte m): the rank of bit j among m's set bits where bit j is
// set, 0x80 (pshufb's zero) where it is not. Plain arrays: no library template is instantiated with
// this tier's flags.
struct ExpandBytes {
  uint64_t shuffle[256];
};

constexpr ExpandBytes make_expand_bytes() {
  ExpandBytes t{};
  for (int m = 0; m < 256; ++m) {
    uint64_t entry = 0;
    int next = 0;
    for (int j = 0; j < 8; ++j) entry |= static_cast<uint64_t>((m >> j) & 1 ? next++ : 0x80) << (8 * j);
    t.shuffle[m] = entry;
  }
  return t;
}

constexpr ExpandBytes kExpand = make_expand_bytes();

// 16 K of an nm row from mask bytes lo and hi: the shuffle that places the next values, the second
// byte's ranks moved past the first byte's values (its 0x80 entries stay at or above 0x80: zeros).
inline __m128i expand_control(uint32_t lo, uint32_t hi) {
  const auto first = static_cast<uint64_t>(__builtin_popcount(lo));
  return _mm_set_epi64x(static_cast<long long>(kExpand.shuffle[hi] + first * 0x0101010101010101ull),
                        static_cast<long long>(kExpand.shuffle[lo]));
}

// nm records (cpu/linear_kernels.h, superchunks of lcm(group, 64) K) in steps of 32 K: each 16-K half
// loads the next 16 values and places them with one vpshufb (AVX2 has no expand); values are read up
// to 16 past the row's last one, into the packed slack.
template <int Mc>
void nm_block(const LinearCall& call, int64_t b, int64_t m0) {
  const PackedLinear& w = *call.w;
  const int8_t* x = static_cast<const int8_t*>(call.x) + m0 * w.K_x;
  __m256i acc[Mc][kLinearRowBlock];
  for (auto& row : acc) for (auto& a : row) a = _mm256_setzero_si256();
  const int64_t superchunks = w.K_x / w.superchunk, steps = w.superchunk / 32;
  for (int64_t c = 0; c < superchunks; ++c) {
    const int8_t* v[kLinearRowBlock];
    const uint8_t* bits[kLinearRowBlock];
    for (int r = 0; r < kLinearRowBlock; ++r) {
      const int64_t record = nm_record(w, b, c, r);
      v[r] = w.values.as<int8_t>() + record * w.value_stride;
      bits[r] = w.meta.as<uint8_t>() + record * w.mask_stride;
    }
    for (int64_t s = 0; s < steps; ++s) {
      __m256i xs[Mc];
      for (int m = 0; m < Mc; ++m) {
        xs[m] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + m * w.K_x + c * w.superchunk + 32 * s));
      }
      for (int r = 0; r < kLinearRowBlock; ++r) {
        const uint8_t* m4 = bits[r] + 4 * s;
        const auto low_half = static_cast<int64_t>(__builtin_popcount(m4[0]) + __builtin_popcount(m4[1]));
        const __m256i values = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(v[r] + low_half),
                                                   reinterpret_cast<const __m128i*>(v[r]));
        const __m256i control = _mm256_set_m128i(expand_control(m4[2], m4[3]), expand_control(m4[0], m4[1]));
        const __m256i codes = _mm256_shuffle_epi8(values, control);
        v[r] += low_half + __builtin_popcount(m4[2]) + __builtin_popcount(m4[3]);
        const __m256i wa = _mm256_abs_epi8(codes);
        for (int m = 0; m < Mc; ++m) acc[m][r] = _mm256_add_epi32(acc[m][r], dot32(wa, codes, xs[m]));
      }
    }
  }
  store_block<Mc>(call, m0, b, acc);
}

template <void (*Block1)(const LinearCall&, int64_t, int64_t), void (*Block2)(const LinearCall&, int64_t, int64_t)>
void run(const LinearCall& call) {
  for (int64_t b = call.block_begin; b < call.block_end; ++b) {
    int64_t m = 0;
    for (; m + 2 <= call.M; m += 2) Block2(call, b, m);
    if (m < call.M) Block1(call, b, m);
  }
}

}  // namespace

void fill_linear_int8(LinearKernels& slots) {
  slots.dense_i8 = run<dense_block<1>, dense_block<2>>;
  slots.sparse24_i8 = run<sparse24_block<1>, sparse24_block<2>>;
  slots.nm_i8 = run<nm_block<1>, nm_block<2>>;
}

}  // namespace nmkit::cpu::avx2
