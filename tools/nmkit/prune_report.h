// What `nmkit prune` and `nmkit demo` print about a pruned checkpoint (the pruning itself is the
// library's: include/nmkit/prune_checkpoint.h), and the section-3 metrics every report shares.
#pragma once

#include <cstddef>

#include <nlohmann/json.hpp>

#include "nmkit/metrics.h"
#include "nmkit/prune_checkpoint.h"

namespace nmkit::cli {

// The printed table: one row per pruned tensor and a total row.
std::string prune_table(const PruneOutcome& outcome);
// The --report document: {"pattern", "method", "format", "tensors": {NAME: {metric: value}}, "total"}.
nlohmann::json prune_report(const PruneCheckpointJob& job, const PruneOutcome& outcome);
// The metrics of docs/design.md section 3 as a JSON object (every report's per-tensor fields).
nlohmann::json section3_metrics_json(const PruneSums& sums);
// The same plus memory_bytes (and dense_bytes).
nlohmann::json metrics_json(const PruneSums& sums, size_t dense_bytes, size_t stored_bytes);

}  // namespace nmkit::cli
