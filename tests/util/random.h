// Deterministic random data for tests. Every suite uses a fixed seed and prints it on failure
// (SCOPED_TRACE(seed_trace(seed))) so a failing case can be reproduced.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "nmkit/tensor.h"

namespace nmkit::test {

std::string seed_trace(uint64_t seed);

// n floats uniform in [lo, hi).
std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// n small integers in [lo, hi] as floats: exact in every dtype, and ties are frequent.
std::vector<float> random_small_ints(size_t n, uint64_t seed, int lo = -8, int hi = 8);
// A tensor of the given dtype from random_floats (values rounded into the dtype).
Tensor random_tensor(DType dtype, Shape shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// Awkward sizes for K, rows and M (docs/design.md 10.5).
inline const std::vector<int64_t>& awkward_sizes() {
  static const std::vector<int64_t> sizes{1, 3, 15, 16, 17, 100, 1000, 4097};
  return sizes;
}

}  // namespace nmkit::test
