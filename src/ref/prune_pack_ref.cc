#include "ref/prune_pack_ref.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace nmkit {

bool ref_prune_pack_row(const cpu::PrunePackRow& row, const std::byte* src, size_t esize, std::byte* values,
                        uint8_t* bits) {
  const int64_t K = row.K, G = row.group;
  const int64_t groups = (K + G - 1) / G;
  std::memset(bits, 0, static_cast<size_t>((groups * G + 7) / 8));
  const auto element = [&](int64_t k) {
    uint32_t v = 0;
    std::memcpy(&v, src + k * static_cast<int64_t>(esize), esize);  // little-endian: the low bytes
    return v;
  };
  for (int64_t k = 0; k < K; ++k) {
    if ((element(k) & row.magnitude) >= row.non_finite) return false;
  }
  int64_t slot = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t k0 = g * G;
    const int64_t n = std::min(G, K - k0);
    // Pruning: element i is kept when fewer than keep elements of its group beat it.
    std::vector<uint32_t> pruned(static_cast<size_t>(G), 0);  // the pruned row's group; padding +0
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t mi = element(k0 + i) & row.magnitude;
      int beaten_by = 0;
      for (int64_t j = 0; j < n; ++j) {
        const uint32_t mj = element(k0 + j) & row.magnitude;
        beaten_by += (mj > mi || (mj == mi && j < i)) ? 1 : 0;
      }
      if (beaten_by < row.keep) pruned[static_cast<size_t>(i)] = element(k0 + i);
    }
    // Packing: the non-zeros, then the lowest zero positions, until keep are chosen.
    std::vector<bool> chosen(static_cast<size_t>(G), false);
    int count = 0;
    for (int64_t i = 0; i < G; ++i) {
      if ((pruned[static_cast<size_t>(i)] & row.magnitude) != 0) {
        chosen[static_cast<size_t>(i)] = true;
        ++count;
      }
    }
    for (int64_t i = 0; i < G && count < row.keep; ++i) {
      if (!chosen[static_cast<size_t>(i)]) {
        chosen[static_cast<size_t>(i)] = true;
        ++count;
      }
    }
    int position = 0;
    for (int64_t i = 0; i < G; ++i) {
      if (!chosen[static_cast<size_t>(i)]) continue;
      const uint32_t v = pruned[static_cast<size_t>(i)];
      std::memcpy(values + slot * static_cast<int64_t>(esize), &v, esize);
      ++slot;
      if (row.sparse24) {  // nibble g: bits 4g..4g+3 of the row, first position | second << 2
        bits[g / 2] = static_cast<uint8_t>(bits[g / 2] | (i << (2 * position + 4 * (g % 2))));
      } else {
        const int64_t k = k0 + i;
        bits[k / 8] = static_cast<uint8_t>(bits[k / 8] | (1u << (k % 8)));
      }
      ++position;
    }
  }
  return true;
}

}  // namespace nmkit
