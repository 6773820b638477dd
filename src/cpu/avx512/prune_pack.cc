// The fused magnitude prune + pack (src/cpu/prune_kernels.h) with AVX-512 (F/BW/VBMI2): one vector of
// 32 16-bit or 16 32-bit elements at a time, whole groups per vector (the group divides the lanes).
// Selection is rank counting inside each group, as select.h does it, with the group's other
// elements brought to every lane by G-1 in-group rotations (vpermw/vpermd): a lane's rank is the
// number of its group's elements that beat it (a strictly larger |w|, or an equal one at a lower
// index), and it is kept when its rank is below keep. The kept lanes' non-zeros are the packed
// positions in every group that holds `keep` of them (what pruning leaves but for kept zeros); the
// other groups take section 4.3's fill rule one by one. The values leave by one vpcompress, the
// positions are the mask bits themselves (nm) or one table nibble per group (sparse24).
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's unmasked intrinsics: see quant_rows.cc
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/prune_kernels.h"

namespace nmkit::cpu::avx512 {
namespace {

// 32 lanes of 16 bits (bf16, f16).
struct Lanes16 {
  using E = uint16_t;
  static constexpr int kLanes = 32;
  static __m512i load(uint64_t lanes, const E* p) { return _mm512_maskz_loadu_epi16(static_cast<__mmask32>(lanes), p); }
  static __m512i set1(uint32_t v) { return _mm512_set1_epi16(static_cast<short>(v)); }
  static __m512i rotate(__m512i index, __m512i a) { return _mm512_permutexvar_epi16(index, a); }
  static uint64_t greater(__m512i a, __m512i b) { return _mm512_cmpgt_epu16_mask(a, b); }
  static uint64_t equal_in(uint64_t lanes, __m512i a, __m512i b) {
    return _mm512_mask_cmpeq_epu16_mask(static_cast<__mmask32>(lanes), a, b);
  }
  static uint64_t at_least(__m512i a, __m512i b) { return _mm512_cmpge_epu16_mask(a, b); }
  static uint64_t below(__m512i a, __m512i b) { return _mm512_cmplt_epu16_mask(a, b); }
  static uint64_t nonzero(__m512i a) { return _mm512_test_epi16_mask(a, a); }
  static __m512i add_in(__m512i r, uint64_t lanes, __m512i one) {
    return _mm512_mask_add_epi16(r, static_cast<__mmask32>(lanes), r, one);
  }
  static __m512i keep_only(uint64_t lanes, __m512i x) { return _mm512_maskz_mov_epi16(static_cast<__mmask32>(lanes), x); }
  static __m512i compress(uint64_t lanes, __m512i x) { return _mm512_maskz_compress_epi16(static_cast<__mmask32>(lanes), x); }
  static void store_first(E* p, int n, __m512i v) {
    _mm512_mask_storeu_epi16(p, static_cast<__mmask32>((uint64_t{1} << n) - 1), v);
  }
};

// 16 lanes of 32 bits (f32).
struct Lanes32 {
  using E = uint32_t;
  static constexpr int kLanes = 16;
  static __m512i load(uint64_t lanes, const E* p) { return _mm512_maskz_loadu_epi32(static_cast<__mmask16>(lanes), p); }
  static __m512i set1(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  static __m512i rotate(__m512i index, __m512i a) { return _mm512_permutexvar_epi32(index, a); }
  static uint64_t greater(__m512i a, __m512i b) { return _mm512_cmpgt_epu32_mask(a, b); }
  static uint64_t equal_in(uint64_t lanes, __m512i a, __m512i b) {
    return _mm512_mask_cmpeq_epu32_mask(static_cast<__mmask16>(lanes), a, b);
  }
  static uint64_t at_least(__m512i a, __m512i b) { return _mm512_cmpge_epu32_mask(a, b); }
  static uint64_t below(__m512i a, __m512i b) { return _mm512_cmplt_epu32_mask(a, b); }
  static uint64_t nonzero(__m512i a) { return _mm512_test_epi32_mask(a, a); }
  static __m512i add_in(__m512i r, uint64_t lanes, __m512i one) {
    return _mm512_mask_add_epi32(r, static_cast<__mmask16>(lanes), r, one);
  }
  static __m512i keep_only(uint64_t lanes, __m512i x) { return _mm512_maskz_mov_epi32(static_cast<__mmask16>(lanes), x); }
  static __m512i compress(uint64_t lanes, __m512i x) { return _mm512_maskz_compress_epi32(static_cast<__mmask16>(lanes), x); }
  static void store_first(E* p, int n, __m512i v) {
    _mm512_mask_storeu_epi32(p, static_cast<__mmask16>((uint64_t{1} << n) - 1), v);
  }
};

// Section 4.3's fill rule on each of `groups` G-bit fields of nz (the groups of one vector): a field
// with fewer than keep bits gets its lowest clear positions until it has keep.
template <int G>
uint64_t fill_groups(uint64_t nz, int groups, int keep) {
  constexpr uint64_t all = (uint64_t{1} << G) - 1;
  uint64_t chosen = 0;
  for (int g = 0; g < groups; ++g) {
    uint64_t bits = (nz >> (g * G)) & all;
    uint64_t zeros = all & ~bits;
    for (int c = __builtin_popcountll(bits); c < keep; ++c) {
      bits |= zeros & (~zeros + 1);
      zeros &= zeros - 1;
    }
    chosen |= bits << (g * G);
  }
  return chosen;
}

// sparse24's nibble (first position | second << 2) of a group of four with exactly two positions.
constexpr uint8_t kPairNibble[16] = {0, 0, 0, 0x4, 0, 0x8, 0x9, 0, 0, 0xC, 0xD, 0, 0xE, 0, 0, 0};

// Rotation s + 1 brings lane (i + s + 1) mod G of each group to lane i; it reaches a lower index
// (which wins a tie) exactly in the lanes where i mod G + s + 1 >= G. Built at compile time, not per
// row.
template <class E, int W, int G>
struct Rotations {
  alignas(64) E index[G - 1][W] = {};
  uint64_t wrap[G - 1] = {};
  constexpr Rotations() {
    for (int s = 1; s < G; ++s) {
      for (int i = 0; i < W; ++i) {
        index[s - 1][i] = static_cast<E>(i / G * G + (i % G + s) % G);
        wrap[s - 1] |= static_cast<uint64_t>(i % G + s >= G) << i;
      }
    }
  }
};

// The Bytes bytes of a vector's bit-stream word, or the `room` of them left at the row's end.
template <int Bytes>
void store_bits(uint8_t* dst, uint64_t word, int64_t room) {
  if (room >= Bytes) {
    std::memcpy(dst, &word, Bytes);
    return;
  }
  for (int64_t b = 0; b < room; ++b) dst[b] = static_cast<uint8_t>(word >> (8 * b));
}

template <class L, int G>
bool prune_pack_row(const PrunePackRow& row, const typename L::E* src, typename L::E* values, uint8_t* bits) {
  using E = typename L::E;
  constexpr int W = L::kLanes;
  static_assert(W % G == 0 && G >= 2 && G <= 16);
  const int64_t K = row.K;
  const int64_t K_pad = (K + G - 1) / G * G;
  const int64_t bit_bytes = (K_pad + 7) / 8;
  static constexpr Rotations<E, W, G> kRotations{};
  __m512i rotation[G - 1];
  for (int s = 0; s < G - 1; ++s) std::memcpy(&rotation[s], kRotations.index[s], sizeof kRotations.index[s]);
  const uint64_t* wraps = kRotations.wrap;
  const __m512i magnitude = L::set1(row.magnitude), non_finite = L::set1(row.non_finite);
  const __m512i one = L::set1(1), keep = L::set1(static_cast<uint32_t>(row.keep));
  E* out = values;
  for (int64_t c = 0; c < K; c += W) {
    const int n = static_cast<int>(std::min<int64_t>(W, K - c));
    const uint64_t lanes = (uint64_t{1} << n) - 1;
    // The source is often a file mapping in 4 KiB pages, where the hardware prefetchers stop at
    // every page boundary; a prefetch 2 KiB ahead (past the row's end too: it never faults) keeps
    // the loads fed.
    _mm_prefetch(reinterpret_cast<const char*>(src + c) + 2048, _MM_HINT_T0);
    const __m512i x = L::load(lanes, src + c);  // lanes past K read as +0
    const __m512i a = _mm512_and_si512(x, magnitude);
    if (L::at_least(a, non_finite) != 0) return false;
    __m512i rank = _mm512_setzero_si512();
    for (int s = 0; s < G - 1; ++s) {
      const __m512i b = L::rotate(rotation[s], a);
      rank = L::add_in(rank, L::greater(b, a) | L::equal_in(wraps[s], b, a), one);
    }
    // Lanes past K are +0 at higher indices than the tail group's real elements, so they beat none
    // of them; they are never kept themselves.
    const uint64_t kept = L::below(rank, keep) & lanes;
    const uint64_t nz = kept & L::nonzero(a);
    const int groups = static_cast<int>(std::min<int64_t>(W, K_pad - c) / G);
    const uint64_t chosen = (nz == kept && n == W) ? nz : fill_groups<G>(nz, groups, row.keep);
    const int count = __builtin_popcountll(chosen);
    L::store_first(out, count, L::compress(chosen, L::keep_only(kept, x)));
    out += count;
    // W bits of the row's bit stream start at bit c in both formats: one bit per position (nm), or
    // one nibble per group of four (sparse24).
    uint64_t word = chosen;
    if (row.sparse24) {
      word = 0;
      for (int g = 0; g < groups; ++g) word |= uint64_t{kPairNibble[(chosen >> (4 * g)) & 15u]} << (4 * g);
    }
    store_bits<W / 8>(bits + c / 8, word, bit_bytes - c / 8);
  }
  return true;
}

template <class L>
bool by_group(const PrunePackRow& row, const typename L::E* src, typename L::E* values, uint8_t* bits) {
  switch (row.group) {
    case 2: return prune_pack_row<L, 2>(row, src, values, bits);
    case 4: return prune_pack_row<L, 4>(row, src, values, bits);
    case 8: return prune_pack_row<L, 8>(row, src, values, bits);
    default: return prune_pack_row<L, 16>(row, src, values, bits);
  }
}

}  // namespace

bool prune_pack16(const PrunePackRow& row, const uint16_t* src, uint16_t* values, uint8_t* bits) {
  return by_group<Lanes16>(row, src, values, bits);
}

bool prune_pack32(const PrunePackRow& row, const uint32_t* src, uint32_t* values, uint8_t* bits) {
  return by_group<Lanes32>(row, src, values, bits);
}

}  // namespace nmkit::cpu::avx512
