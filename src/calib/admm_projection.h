// ADMM's projection onto the N:M set with its tightening schedule (docs/design.md 12.1).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "nmkit/pattern.h"
#include "prune/select.h"

namespace nmkit::calib_detail {

// How many weights of a row, beyond the pattern's, the projection of iteration t keeps:
// round(P (1 - (t + 1) / S)^3), P the weights the pattern prunes in a row, S = min(schedule,
// iterations); 0 from iteration S - 1 on, so the last projection is exactly the pattern.
class AdmmSchedule {
 public:
  AdmmSchedule(Pattern pattern, int64_t K, int iterations, int schedule)
      : span_(std::min(schedule, iterations)) {
    for (int64_t g = 0; g < K; g += pattern.group) {
      const int64_t n = std::min<int64_t>(pattern.group, K - g);
      pruned_per_row_ += n - std::min<int64_t>(pattern.keep, n);
    }
  }
  int64_t extras(int t) const {
    if (t + 1 >= span_) return 0;
    const double left = 1.0 - double(t + 1) / double(span_);
    return std::llround(double(pruned_per_row_) * left * left * left);
  }

 private:
  int span_ = 0;
  int64_t pruned_per_row_ = 0;
};

struct ProjectionScratch {
  std::vector<uint64_t> key;
  std::vector<int64_t> rest;
};

// The order of the projection: |x| rounded to float32 (higher first), then the original |w|, then
// the lower index (section 2's order with |x| as the score).
template <class T>
inline uint64_t projection_key(T x, float w) {
  return prune_detail::composite_key(prune_detail::score_key(std::fabs(static_cast<float>(x))),
                                     prune_detail::abs_key(w));
}

// kept[k] = 1 for the pattern's best of every group of x (row of K) and the `extras` best of the
// rest of the row, 0 otherwise; w is the row's original weights.
template <class T>
void project_row(const T* x, const float* w, int64_t K, Pattern pattern, int64_t extras,
                 ProjectionScratch& scratch, uint8_t* kept) {
  scratch.key.resize(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) scratch.key[k] = projection_key(x[k], w[k]);
  for (int64_t g = 0; g < K; g += pattern.group) {
    const int n = static_cast<int>(std::min<int64_t>(pattern.group, K - g));
    const uint64_t mask = prune_detail::select_group(scratch.key.data() + g, n, std::min(pattern.keep, n));
    for (int j = 0; j < n; ++j) kept[g + j] = static_cast<uint8_t>((mask >> j) & 1u);
  }
  if (extras <= 0) return;
  scratch.rest.clear();
  for (int64_t k = 0; k < K; ++k) {
    if (!kept[k]) scratch.rest.push_back(k);
  }
  if (extras < static_cast<int64_t>(scratch.rest.size())) {
    const uint64_t* key = scratch.key.data();
    std::nth_element(scratch.rest.begin(), scratch.rest.begin() + extras, scratch.rest.end(),
                     [key](int64_t a, int64_t b) { return key[a] != key[b] ? key[a] > key[b] : a < b; });
    scratch.rest.resize(static_cast<size_t>(extras));
  }
  for (int64_t k : scratch.rest) kept[k] = 1;
}

}  // namespace nmkit::calib_detail
