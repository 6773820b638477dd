// Selection of four groups at once (docs/design.md 2 rules, same order as select.h), with the four
// groups in the four lanes of 128-bit integer vectors. GCC vector extensions compile to SSE2,
// which every x86-64 has, so this needs no ISA dispatch; __builtin_shufflevector (GCC >= 12 and
// clang alike, unlike GCC's __builtin_shuffle) keeps the code buildable for clang's sanitizers. Scalar rank counting costs ~4 operations
// per pair and group; here one pair comparison serves four groups (measured ~3x on 2:4).
#pragma once

#include <cstdint>
#include <cstring>

namespace nmkit::prune_detail {

using i32x4 = int32_t __attribute__((vector_size(16)));

inline i32x4 load4(const int32_t* p) {
  i32x4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store4(int32_t* p, i32x4 v) { std::memcpy(p, &v, sizeof v); }

// In-place 4x4 transpose: element j of row i moves to element i of row j.
inline void transpose4(i32x4& a, i32x4& b, i32x4& c, i32x4& d) {
  const i32x4 t0 = __builtin_shufflevector(a, b, 0, 4, 1, 5);
  const i32x4 t1 = __builtin_shufflevector(c, d, 0, 4, 1, 5);
  const i32x4 t2 = __builtin_shufflevector(a, b, 2, 6, 3, 7);
  const i32x4 t3 = __builtin_shufflevector(c, d, 2, 6, 3, 7);
  a = __builtin_shufflevector(t0, t1, 0, 1, 4, 5);
  b = __builtin_shufflevector(t0, t1, 2, 3, 6, 7);
  c = __builtin_shufflevector(t2, t3, 0, 1, 4, 5);
  d = __builtin_shufflevector(t2, t3, 2, 3, 6, 7);
}

// Loads four consecutive groups of G (a multiple of 4) int32 keys as G vectors, vector j holding
// position j of each group.
template <int G>
inline void load_columns(const int32_t* src, i32x4* col) {
  for (int b = 0; b < G / 4; ++b) {
    i32x4 r0 = load4(src + 0 * G + 4 * b), r1 = load4(src + 1 * G + 4 * b);
    i32x4 r2 = load4(src + 2 * G + 4 * b), r3 = load4(src + 3 * G + 4 * b);
    transpose4(r0, r1, r2, r3);
    col[4 * b + 0] = r0;
    col[4 * b + 1] = r1;
    col[4 * b + 2] = r2;
    col[4 * b + 3] = r3;
  }
}

// Keeps the `keep` best of each of four consecutive G-wide groups; kept[i] = 0 or 1.
// Keys are signed int32 compared as numbers: `primary` first, then `secondary` when kPair (the
// |w| tie-break of scores that are not |w| itself); equal keys go to the lower index.
template <int G, bool kPair>
inline void select4_groups(const int32_t* primary, const int32_t* secondary, int keep,
                           int32_t* kept) {
  i32x4 p[G], s[G], rank[G];
  load_columns<G>(primary, p);
  if constexpr (kPair) load_columns<G>(secondary, s);
  for (int i = 0; i < G; ++i) rank[i] = i32x4{0, 0, 0, 0};
  // Fully unrolled so that keys and ranks stay in registers (GCC's own heuristics left the outer
  // loop rolled for G = 8, with the ranks in memory: measured 1.3x slower).
#pragma GCC unroll 16
  for (int i = 0; i < G; ++i) {
#pragma GCC unroll 16
    for (int j = i + 1; j < G; ++j) {
      // -1 in the lanes where the later element j beats i, 0 where i wins (ties included).
      i32x4 later = p[j] > p[i];
      if constexpr (kPair) later |= (p[j] == p[i]) & (s[j] > s[i]);
      rank[i] -= later;
      rank[j] += later + 1;
    }
  }
  const i32x4 keep_v = {keep, keep, keep, keep};
  const i32x4 one = {1, 1, 1, 1};
  for (int b = 0; b < G / 4; ++b) {
    i32x4 k0 = (rank[4 * b + 0] < keep_v) & one, k1 = (rank[4 * b + 1] < keep_v) & one;
    i32x4 k2 = (rank[4 * b + 2] < keep_v) & one, k3 = (rank[4 * b + 3] < keep_v) & one;
    transpose4(k0, k1, k2, k3);
    store4(kept + 0 * G + 4 * b, k0);
    store4(kept + 1 * G + 4 * b, k1);
    store4(kept + 2 * G + 4 * b, k2);
    store4(kept + 3 * G + 4 * b, k3);
  }
}

// The same for any width 2 <= g <= 64 known only at run time: columns gathered element by element,
// ranks kept in memory. Slower per pair than the unrolled form, but one comparison still serves
// four groups (measured ~4x over nth_element per group for 16:32).
template <bool kPair>
inline void select4_groups_any(const int32_t* primary, const int32_t* secondary, int g, int keep,
                               int32_t* kept) {
  i32x4 p[64], s[64], rank[64];
  for (int j = 0; j < g; ++j) {
    p[j] = i32x4{primary[j], primary[g + j], primary[2 * g + j], primary[3 * g + j]};
    if constexpr (kPair) {
      s[j] = i32x4{secondary[j], secondary[g + j], secondary[2 * g + j], secondary[3 * g + j]};
    }
    rank[j] = i32x4{0, 0, 0, 0};
  }
  for (int i = 0; i < g; ++i) {
    const i32x4 pi = p[i];
    i32x4 ri = rank[i];
    for (int j = i + 1; j < g; ++j) {
      i32x4 later = p[j] > pi;
      if constexpr (kPair) later |= (p[j] == pi) & (s[j] > s[i]);
      ri -= later;
      rank[j] += later + 1;
    }
    rank[i] = ri;
  }
  const i32x4 keep_v = {keep, keep, keep, keep};
  for (int j = 0; j < g; ++j) {
    const i32x4 k = (rank[j] < keep_v) & i32x4{1, 1, 1, 1};
    kept[j] = k[0];
    kept[g + j] = k[1];
    kept[2 * g + j] = k[2];
    kept[3 * g + j] = k[3];
  }
}

}  // namespace nmkit::prune_detail
