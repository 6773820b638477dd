// Selection of the `keep` best elements of one group (docs/design.md section 2), shared by every
// pruning method. A method turns each element into an unsigned key whose integer order is the
// order "higher score first, then larger |w|"; the remaining tie goes to the lower index.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "nmkit/status.h"

namespace nmkit::prune_detail {

// Keys are int32 whose signed order is the float order of what they encode.
// score_key: any float32 that is not NaN; -0 and +0 compare equal as floats, so both map to 0.
// Negative floats get their magnitude bits flipped so that a larger magnitude sorts lower.
inline int32_t score_key(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  u = (u == 0x80000000u) ? 0u : u;
  const auto i = static_cast<int32_t>(u);
  return i < 0 ? (i ^ 0x7FFFFFFF) : i;
}

// |w| as a key: the bits of a non-negative float order like its value.
inline int32_t abs_key(float value) {
  return static_cast<int32_t>(std::bit_cast<uint32_t>(value) & 0x7FFFFFFFu);
}

// One unsigned 64-bit key ordering like (primary, secondary) for the scalar paths; secondary is an
// abs_key, so non-negative.
inline uint64_t composite_key(int32_t primary, int32_t secondary) {
  const uint32_t hi = static_cast<uint32_t>(primary) ^ 0x80000000u;
  return (static_cast<uint64_t>(hi) << 32) | static_cast<uint32_t>(secondary);
}

// Rank counting: element i is kept when fewer than `keep` elements beat it. Each pair (i < j) is
// decided by one comparison (j beats i only with a strictly larger key; equal keys go to the lower
// index), so a group costs G(G-1)/2 branch-free comparisons, cheaper than sorting for G <= 16.
template <class Key, int G>
inline uint64_t select_fixed(const Key* key, int keep) {
  int rank[G] = {};
  for (int i = 0; i < G; ++i) {
    for (int j = i + 1; j < G; ++j) {
      const int later_wins = key[j] > key[i] ? 1 : 0;
      rank[i] += later_wins;
      rank[j] += 1 - later_wins;
    }
  }
  uint64_t mask = 0;
  for (int i = 0; i < G; ++i) mask |= static_cast<uint64_t>(rank[i] < keep) << i;
  return mask;
}

template <class Key>
inline uint64_t select_ranked(const Key* key, int n, int keep) {
  int rank[16] = {};
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      const int later_wins = key[j] > key[i] ? 1 : 0;
      rank[i] += later_wins;
      rank[j] += 1 - later_wins;
    }
  }
  uint64_t mask = 0;
  for (int i = 0; i < n; ++i) mask |= static_cast<uint64_t>(rank[i] < keep) << i;
  return mask;
}

// Wide groups (17..64): partition indices around the keep-th best under the same total order.
template <class Key>
inline uint64_t select_sorted(const Key* key, int n, int keep) {
  uint8_t idx[64];
  for (int i = 0; i < n; ++i) idx[i] = static_cast<uint8_t>(i);
  std::nth_element(idx, idx + keep, idx + n, [key](uint8_t a, uint8_t b) {
    return key[a] != key[b] ? key[a] > key[b] : a < b;
  });
  uint64_t mask = 0;
  for (int i = 0; i < keep; ++i) mask |= uint64_t{1} << idx[i];
  return mask;
}

// Bit i of the result is set when element i of the n-element group (n <= 64) is kept;
// min(keep, n) bits are set (a tail group of n real elements keeps at most n).
template <class Key>
inline uint64_t select_group(const Key* key, int n, int keep) {
  NMKIT_ASSERT(n >= 1 && n <= 64 && keep >= 1);
  if (keep >= n) return n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
  switch (n) {
    case 4: return select_fixed<Key, 4>(key, keep);
    case 8: return select_fixed<Key, 8>(key, keep);
    case 16: return select_fixed<Key, 16>(key, keep);
    default: break;
  }
  if (n <= 16) return select_ranked(key, n, keep);
  return select_sorted(key, n, keep);
}

}  // namespace nmkit::prune_detail
