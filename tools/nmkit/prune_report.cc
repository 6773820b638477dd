#include "tools/nmkit/prune_report.h"

#include <string>
#include <fmt/core.h>

#include "nmkit/checkpoint.h"
#include "tools/nmkit/cli_util.h"

namespace nmkit::cli {

std::string prune_table(const PruneOutcome& outcome) {
  Table table({"tensor", "shape", "pruned/total", "approx_error", "relative_error", "kept_mean", "pruned_mean",
               "bytes_before", "bytes_after"});
  const auto row = [&](const std::string& name, const std::string& shape, const PruneSums& sums,
                       size_t before, size_t after) {
    const PruneMetrics m = metrics_from(sums);
    table.add_row({name, shape, fmt::format("{}/{}", m.pruned_count, m.total_count),
                   short_float(m.approximation_error), short_float(m.relative_error),
                   short_float(m.kept_magnitude_mean), short_float(m.pruned_magnitude_mean),
                   human_bytes(static_cast<double>(before)), human_bytes(static_cast<double>(after))});
  };
  for (const auto& t : outcome.tensors) row(t.name, shape_str(t.shape), t.sums, t.dense_bytes, t.stored_bytes);
  table.add_rule();
  row(fmt::format("total ({} tensors)", outcome.tensors.size()), "", outcome.total, outcome.dense_bytes,
      outcome.stored_bytes);
  return table.render();
}

nlohmann::json section3_metrics_json(const PruneSums& sums) {
  const PruneMetrics m = metrics_from(sums);
  return nlohmann::json{
      {"total_count", m.total_count},
      {"pruned_count", m.pruned_count},
      {"sparsity_percent", m.sparsity_percent},
      {"approximation_error", m.approximation_error},
      {"kept_magnitude_mean", m.kept_magnitude_mean},
      {"pruned_magnitude_mean", m.pruned_magnitude_mean},
      {"relative_error", m.relative_error},
      {"retained_l1", m.retained_l1},
  };
}

nlohmann::json metrics_json(const PruneSums& sums, size_t dense_bytes, size_t stored_bytes) {
  nlohmann::json out = section3_metrics_json(sums);
  out["memory_bytes"] = stored_bytes;
  out["dense_bytes"] = dense_bytes;
  return out;
}

nlohmann::json prune_report(const PruneCheckpointJob& job, const PruneOutcome& outcome) {
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& t : outcome.tensors) tensors[t.name] = metrics_json(t.sums, t.dense_bytes, t.stored_bytes);
  return nlohmann::json{
      {"pattern", job.pattern.str()},
      {"method", std::string(prune_method_name(job.method))},
      {"format", std::string(stored_format_name({job.format, job.layout}))},
      {"tensors", std::move(tensors)},
      {"total", metrics_json(outcome.total, outcome.dense_bytes, outcome.stored_bytes)},
  };
}

}  // namespace nmkit::cli
