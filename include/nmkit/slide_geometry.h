// Sizes of the SlideSparse decomposition of keep:2N onto 2:4 windows (docs/design.md section 5).
#pragma once

#include <cstdint>

#include "nmkit/pattern.h"
#include "nmkit/status.h"

namespace nmkit {

// Only (pattern, align, K) are stored; every size is derived from them, so no two can disagree.
// make() checks that every derived size fits int64, so the functions below cannot overflow on a
// geometry it returned.
struct SlideGeometry {
  Pattern pattern;  // keep:2N, keep <= 2N-2
  int align = 32;   // multiple of 4
  int64_t K = 0;    // logical input features

  static constexpr int kWindow = 4;
  static constexpr int kStride = 2;
  int N() const { return pattern.group / 2; }
  int windows_per_group() const { return N() - 1; }
  int64_t groups() const { return pattern.groups(K); }  // ceil(K/2N)
  int64_t K_pad() const { return groups() * pattern.group; }  // ceil(K/2N)*2N
  int64_t K_prime_raw() const { return groups() * 4 * (N() - 1); }  // (K_pad/2N) * 4(N-1)
  int64_t K_prime() const { return (K_prime_raw() + align - 1) / align * align; }  // aligned up
  // An Error for a pattern that cannot slide (odd group, keep > group-2), K < 1, a bad align, or a
  // K whose padded or slid width exceeds int64.
  static Result<SlideGeometry> make(Pattern pattern, int64_t K, int align = 32);
  // Input column feeding output column j, or -1 for padding (j >= K_prime_raw or i >= K).
  int64_t source_column(int64_t j) const;
  // N/(N-1): the ideal speedup of a 2:4 kernel on the slid weight over dense.
  double ideal_speedup() const { return static_cast<double>(N()) / (N() - 1); }
};

}  // namespace nmkit
