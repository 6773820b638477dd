// Pruning a whole checkpoint: what `nmkit prune` and `nmkit demo` run. Everything that can be checked
// without reading weights (options, selection, gradient and norm tensors, name clashes) is checked
// before the output is created; the weights are then pruned inside the writer's fill callbacks, one
// tensor at a time, so a large model is never held twice in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nmkit/checkpoint.h"
#include "nmkit/files.h"
#include "nmkit/metrics.h"
#include "nmkit/pattern.h"
#include "nmkit/prune.h"
#include "nmkit/status.h"

namespace nmkit::cli {

inline constexpr const char* kDefaultExclude = "embed|norm|lm_head|wte|wpe";

struct PruneJob {
  std::string input;
  std::string output;
  std::string grad_path;       // --grad: one tensor per pruned weight, under the weight's name
  std::string act_norms_path;  // --act-norms: one 1-D [K] tensor per pruned weight
  Pattern pattern;
  PruneMethod method = PruneMethod::Magnitude;
  WeightFormat format = WeightFormat::Dense;
  std::string include;                   // empty: every name
  std::string exclude = kDefaultExclude;  // empty: none
  std::function<void(size_t i, size_t n, const std::string& name)> on_tensor;  // progress
};

struct PrunedTensor {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  PruneSums sums;
  size_t dense_bytes = 0;   // the weight as it came in
  size_t stored_bytes = 0;  // memory_bytes of what was written (dense-masked: the same)
};

struct PruneOutcome {
  std::vector<PrunedTensor> tensors;  // file order
  PruneSums total;
  size_t dense_bytes = 0;   // pruned tensors only
  size_t stored_bytes = 0;  // pruned tensors only
  size_t copied_tensors = 0;
  size_t input_bytes = 0;   // data section of the input file
  double seconds = 0;       // open to rename, IO included
  double fill_seconds = 0;  // of which producing the tensors: reading, pruning, packing, copying
};

// Fails with the reason "pattern P cannot be stored as sparse24" unless the pruned output is 2:4
// compliant (group 4, keep <= 2).
Status check_format_pattern(WeightFormat format, Pattern pattern);

// Runs the job; on any error the output file is not created (an existing one is left untouched).
Result<PruneOutcome> run_prune_job(const PruneJob& job);

// The job up to the rename: the checkpoint is complete under its temporary name, so the caller can
// write its report too before either replaces anything (issue 13, M1).
struct PreparedPrune {
  PruneOutcome outcome;
  PendingFile output;
};
Result<PreparedPrune> prepare_prune_job(const PruneJob& job);

// The printed table: one row per pruned tensor and a total row.
std::string prune_table(const PruneOutcome& outcome);
// The --report document: {"pattern", "method", "format", "tensors": {NAME: {metric: value}}, "total"}.
nlohmann::json prune_report(const PruneJob& job, const PruneOutcome& outcome);
// The metrics of docs/design.md section 3 as a JSON object (every report's per-tensor fields).
nlohmann::json section3_metrics_json(const PruneSums& sums);
// The same plus memory_bytes (and dense_bytes).
nlohmann::json metrics_json(const PruneSums& sums, size_t dense_bytes, size_t stored_bytes);

}  // namespace nmkit::cli
