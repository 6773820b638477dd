// Sizes and index map of the SlideSparse decomposition (docs/design.md section 5).
#include "nmkit/slide_geometry.h"

#include <string>

#include "nmkit/tensor.h"

namespace nmkit {

Result<SlideGeometry> SlideGeometry::make(Pattern pattern, int64_t K, int align) {
  const std::string what = "pattern " + pattern.str();
  if (pattern.group % 2 != 0) {
    return Error(what + " cannot slide onto 2:4: group " + std::to_string(pattern.group) +
                 " is odd (sliding needs keep:2N)");
  }
  if (pattern.keep > pattern.group - 2) {
    return Error(what + " cannot slide onto 2:4: keep " + std::to_string(pattern.keep) +
                 " > group-2 = " + std::to_string(pattern.group - 2));
  }
  if (pattern.keep < 1 || pattern.group < 4 || pattern.group > Pattern::kMaxGroup) {
    return Error(what + " is not a valid keep:2N pattern (1 <= keep <= 2N-2, 4 <= 2N <= 64)");
  }
  if (align <= 0 || align % 4 != 0) {
    return Error("slide align " + std::to_string(align) + " is not a positive multiple of 4");
  }
  if (K < 1) return Error("slide K " + std::to_string(K) + " must be at least 1");

  SlideGeometry g;
  g.pattern = pattern;
  g.align = align;
  g.K = K;
  // K_pad = groups * 2N and K_prime = ceil(groups * 4(N-1) / align) * align, each checked: a
  // [0, K] tensor with K near 2^63 costs no bytes in a file, and its sizes must not wrap.
  const int64_t groups = g.groups();
  const auto K_pad = checked_mul(groups, pattern.group);
  const auto K_prime_raw = checked_mul(groups, 4 * int64_t{g.N() - 1});
  const auto K_prime_up = K_prime_raw ? checked_add(*K_prime_raw, align - 1) : std::nullopt;
  if (!K_pad || !K_prime_up) {
    return Error("slide K " + std::to_string(K) + " is too large: its padded width for " + what +
                 " exceeds 2^63");
  }
  return g;
}

int64_t SlideGeometry::source_column(int64_t j) const {
  if (j < 0 || j >= K_prime_raw()) return -1;
  const int N = this->N();
  const int64_t out_group = 4 * static_cast<int64_t>(N - 1);
  const int64_t q = j / out_group;
  const int64_t r = j % out_group;
  const int64_t w = r / kWindow;
  const int64_t lane = r % kWindow;
  const int64_t i = q * 2 * N + kStride * w + lane;
  return i < K ? i : -1;
}

}  // namespace nmkit
