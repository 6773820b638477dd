// Pruning a whole safetensors checkpoint (what `nmkit prune` and `nmkit demo` run), through the
// checkpoint transform driver (include/nmkit/checkpoint_transform.h). Every selected 2-D float
// weight is pruned to the pattern (docs/design.md sections 2-4) and stored dense-masked, sparse24 or
// nm with its record; everything else (other tensors, weights already compressed or slid) is copied.
// Gradient and norm tensors, shapes and dtypes are checked before the output is created; the weights
// are pruned inside the writer's fills, one at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/checkpoint.h"
#include "nmkit/checkpoint_transform.h"
#include "nmkit/metrics.h"
#include "nmkit/pattern.h"
#include "nmkit/prune.h"
#include "nmkit/status.h"

namespace nmkit {

struct PruneCheckpointJob {
  std::string input;
  std::string output;
  std::string grad_path;       // method Gradient: one tensor per pruned weight, under the weight's name
  std::string act_norms_path;  // method Wanda: one 1-D [K] tensor per pruned weight
  Pattern pattern;
  PruneMethod method = PruneMethod::Magnitude;
  WeightFormat format = WeightFormat::Dense;
  StoredLayout layout = StoredLayout::Canonical;  // CutlassSm80 (F16/BF16 weights) with Sparse24
  std::function<bool(std::string_view name)> selected;  // null: every name
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
  double seconds = 0;       // open to fsync, IO included
  double fill_seconds = 0;  // of which producing the tensors: reading, pruning, packing, copying
};

// An Error (InvalidArgument) unless the pruned output can be stored in `format`: sparse24 needs
// 2:4-compliant weights (group 4, keep <= 2).
Status check_format_pattern(WeightFormat format, Pattern pattern);

// The job up to the rename (see PreparedCheckpoint): on any error no output exists.
struct PreparedPrune {
  PruneOutcome outcome;
  PendingFile output;
};
Result<PreparedPrune> prepare_prune_checkpoint(const PruneCheckpointJob& job);
Result<PruneOutcome> prune_checkpoint(const PruneCheckpointJob& job);

}  // namespace nmkit
