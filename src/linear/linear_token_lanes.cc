// Activations on token lanes for the token-lane kernels: X (M, K_x) becomes slabs of 16 tokens,
// (K_x, 16) each, so one aligned 64-byte load gives 16 tokens' activations at one K.
#include <algorithm>

#include "linear/linear_driver.h"

namespace nmkit::cpu {

void transpose_token_lanes(const float* x, int64_t M, int64_t K_x, float* xt) {
  const int64_t slabs = (M + kTokenLanes - 1) / kTokenLanes;
  for (int64_t s = 0; s < slabs; ++s) {
    float* slab = xt + s * K_x * kTokenLanes;
    const int64_t tokens = std::min<int64_t>(kTokenLanes, M - s * kTokenLanes);
    // 16 K at a time, so both the 16 source rows and the destination stay in L1.
    for (int64_t k0 = 0; k0 < K_x; k0 += 16) {
      const int64_t kn = std::min<int64_t>(16, K_x - k0);
      for (int64_t t = 0; t < kTokenLanes; ++t) {
        if (t >= tokens) {  // lanes past M: zeros, so the kernels need no mask
          for (int64_t k = 0; k < kn; ++k) slab[(k0 + k) * kTokenLanes + t] = 0.0f;
          continue;
        }
        const float* src = x + (s * kTokenLanes + t) * K_x + k0;
        for (int64_t k = 0; k < kn; ++k) slab[(k0 + k) * kTokenLanes + t] = src[k];
      }
    }
  }
}

}  // namespace nmkit::cpu
