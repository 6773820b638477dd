// Pruning quality metrics: the seed's PruneMetrics plus sparsity_percent, relative_error and
// retained_l1 (docs/design.md section 3). Sums are float64; aggregates add sums, never means.
#pragma once

#include <cstdint>

namespace nmkit {

// Additive state of the metrics over the real elements of one or more tensors.
struct PruneSums {
  int64_t total_count = 0;
  int64_t pruned_count = 0;   // removed by the mask, whether or not already zero
  double abs_kept = 0;        // sum |w| over kept elements
  double abs_pruned = 0;      // sum |w| over pruned elements (= sum |w - w_pruned|)
  double sq_total = 0;        // sum w^2 over all elements
  double sq_pruned = 0;       // sum w^2 over pruned elements (= ||W - W_pruned||_F^2)

  PruneSums& operator+=(const PruneSums& other);
};

struct PruneMetrics {
  int64_t pruned_count = 0;
  int64_t total_count = 0;
  double approximation_error = 0;    // mean |w - w_pruned| over all elements
  double kept_magnitude_mean = 0;    // 0 when nothing kept
  double pruned_magnitude_mean = 0;  // 0 when nothing pruned
  double sparsity_percent = 0;       // 100 * pruned / total
  double relative_error = 0;         // ||W - W_pruned||_F / ||W||_F, 0 for an all-zero W
  double retained_l1 = 1;            // sum|kept| / sum|W|, 1 for an all-zero W
};

PruneMetrics metrics_from(const PruneSums& sums);

}  // namespace nmkit
