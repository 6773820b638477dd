// Metrics from additive sums (docs/design.md section 3): aggregates over a model add PruneSums and call
// metrics_from once, so a model's means are weighted by element counts, never averaged per tensor.
#include "nmkit/metrics.h"

#include <cmath>

namespace nmkit {

PruneSums& PruneSums::operator+=(const PruneSums& other) {
  total_count += other.total_count;
  pruned_count += other.pruned_count;
  abs_kept += other.abs_kept;
  abs_pruned += other.abs_pruned;
  sq_total += other.sq_total;
  sq_pruned += other.sq_pruned;
  return *this;
}

PruneMetrics metrics_from(const PruneSums& sums) {
  PruneMetrics m;
  m.total_count = sums.total_count;
  m.pruned_count = sums.pruned_count;
  const int64_t kept_count = sums.total_count - sums.pruned_count;
  const auto total = static_cast<double>(sums.total_count);
  if (sums.total_count > 0) {
    // A pruned element contributes |w - 0| = |w|; a kept one contributes 0.
    m.approximation_error = sums.abs_pruned / total;
    m.sparsity_percent = 100.0 * static_cast<double>(sums.pruned_count) / total;
  }
  if (kept_count > 0) m.kept_magnitude_mean = sums.abs_kept / static_cast<double>(kept_count);
  if (sums.pruned_count > 0) {
    m.pruned_magnitude_mean = sums.abs_pruned / static_cast<double>(sums.pruned_count);
  }
  m.relative_error = sums.sq_total > 0 ? std::sqrt(sums.sq_pruned) / std::sqrt(sums.sq_total) : 0.0;
  const double abs_total = sums.abs_kept + sums.abs_pruned;
  m.retained_l1 = abs_total > 0 ? sums.abs_kept / abs_total : 1.0;
  return m;
}

}  // namespace nmkit
