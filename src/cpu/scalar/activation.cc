// The activation passes for any x86-64: the core's branch-free loops (include/nmkit/dtype.h), which
// the compiler vectorizes as far as the baseline ISA allows.
#include <algorithm>
#include <cstring>

#include "cpu/activation_kernels.h"
#include "cpu/linear_kernels.h"
#include "nmkit/dtype.h"

namespace nmkit::cpu::scalar {

bool all_finite(const float* x, size_t n) { return first_non_finite(x, static_cast<int64_t>(n)) < 0; }

bool all_finite_bf16(const uint16_t* bits, size_t n) {
  unsigned any = 0;  // branch-free, so the loop vectorizes
  for (size_t i = 0; i < n; ++i) any |= static_cast<unsigned>((bits[i] & 0x7F80u) == 0x7F80u);
  return any == 0;
}

bool to_bf16(const float* x, size_t n, float* rounded, uint16_t* bits) {
  const bool finite = all_finite(x, n);  // on the input: rounding can carry a finite value to infinity
  if (rounded == nullptr) {
    if (bits != nullptr) f32_to_bf16_bits(x, bits, n);
    return finite;
  }
  // memcpy's pointers must be valid even for zero bytes, and an empty X may be a null pointer.
  if (rounded != x && n > 0) std::memcpy(rounded, x, n * sizeof(float));
  round_to_bf16(rounded, bits, n);
  return finite;
}

void to_token_lanes(const float* x, int64_t ldx, int64_t tokens, int64_t K, int64_t K_x, float* xt) {
  const int64_t slabs = (tokens + kTokenLanes - 1) / kTokenLanes;
  for (int64_t s = 0; s < slabs; ++s) {
    float* slab = xt + s * K_x * kTokenLanes;
    const int64_t here = std::min<int64_t>(kTokenLanes, tokens - s * kTokenLanes);
    // 16 K at a time (K_x is a multiple of 16), so both the 16 source rows and the destination stay in L1.
    for (int64_t k0 = 0; k0 < K_x; k0 += 16) {
      for (int64_t t = 0; t < kTokenLanes; ++t) {
        if (t >= here) {  // no row past X: zeros
          for (int64_t k = k0; k < k0 + 16; ++k) slab[k * kTokenLanes + t] = 0.0f;
          continue;
        }
        const float* src = x + (s * kTokenLanes + t) * ldx;
        for (int64_t k = k0; k < k0 + 16; ++k) slab[k * kTokenLanes + t] = k < K ? src[k] : 0.0f;
      }
    }
  }
}

}  // namespace nmkit::cpu::scalar
