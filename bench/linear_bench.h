// `nmkit bench linear`: nmkit's dense and sparse linear kernels side by side with OpenBLAS, oneDNN
// and Eigen's CSR product on real LLM layer shapes, in one run (issue 4).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nmkit/cpu.h"
#include "nmkit/pattern.h"

namespace nmkit::bench {

struct LinearBenchOptions {
  // (rows, K): Llama-3-8B q/o (4096 x 4096) and gate/up (14336 x 4096) projections; the CLI's
  // --shapes adds SmolLM2's and a 7B model's.
  std::vector<std::pair<int64_t, int64_t>> shapes{{4096, 4096}, {14336, 4096}};
  std::vector<int64_t> Ms{1, 16, 64, 256, 512};
  std::vector<Pattern> patterns{{2, 4}, {6, 8}};
  std::vector<std::string> dtypes{"f32", "bf16", "int8"};
  std::string json_path;         // empty: no JSON
  double min_seconds = 0.2;      // per timed kernel, after warm-up
  bool baselines = true;         // OpenBLAS, oneDNN, Eigen
  std::optional<IsaTier> tier;   // nmkit's kernels (default: the active tier)
  // Also time nmkit's own kernels (LinearOptions::onednn = false) where the plan runs oneDNN: the
  // measurement behind the plan's oneDNN thresholds (src/linear/linear_plan.cc).
  bool own_kernels = false;
};

// Prints the table (and writes the JSON list of records); returns the process exit code (1 when a
// kernel's result disagrees with the reference).
int run_linear_bench(const LinearBenchOptions& options);

}  // namespace nmkit::bench
