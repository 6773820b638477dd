// Small helpers shared by every tier's linear kernels (plain C++: safe in any tier's flags).
#pragma once

#include <algorithm>
#include <cstdint>

#include "cpu/linear_kernels.h"

namespace nmkit::cpu {

// Position (0..31) in its 32-wide chunk of kept value j (0..15) of a packed sparse24 meta word: value
// j is in group j/2, and its 2-bit position in the group is field j of the word.
inline int sparse24_position(uint32_t word, int j) {
  return 4 * (j >> 1) + static_cast<int>((word >> (2 * j)) & 3u);
}

// Writes one f32 output, adding the bias (exact f32 sum, as the reference does).
inline void store_output(const LinearCall& call, int64_t m, int64_t row, float sum) {
  const PackedLinear& w = *call.w;
  if (w.has_bias) sum += w.bias.as<float>()[row];
  call.y[m * call.ldy + row] = sum;
}

}  // namespace nmkit::cpu
