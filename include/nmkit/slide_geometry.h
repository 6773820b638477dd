// Sizes of the SlideSparse decomposition of keep:2N onto 2:4 windows (design.md section 5).
#pragma once

#include <cstdint>

#include "nmkit/pattern.h"
#include "nmkit/status.h"

namespace nmkit {

struct SlideGeometry {
  Pattern pattern;       // keep:2N, keep <= 2N-2
  int N = 2;
  int align = 32;        // multiple of 4
  int64_t K = 0;         // logical input features
  int64_t K_pad = 0;     // ceil(K/2N)*2N
  int64_t K_prime_raw = 0;  // (K_pad/2N) * 4(N-1)
  int64_t K_prime = 0;      // ceil(K_prime_raw/align)*align

  static constexpr int kWindow = 4;
  static constexpr int kStride = 2;
  int windows_per_group() const { return N - 1; }
  // An Error for a pattern that cannot slide (odd group, keep > group-2), K < 1, or a bad align.
  static Result<SlideGeometry> make(Pattern pattern, int64_t K, int align = 32);
  // Input column feeding output column j, or -1 for padding (j >= K_prime_raw or i >= K).
  int64_t source_column(int64_t j) const;
  // N/(N-1): the ideal speedup of a 2:4 kernel on the slid weight over dense.
  double ideal_speedup() const { return static_cast<double>(N) / (N - 1); }
};

}  // namespace nmkit
