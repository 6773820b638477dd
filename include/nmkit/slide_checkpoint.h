// Sliding a whole safetensors checkpoint (what `nmkit slide` runs; docs/design.md section 5), through
// the checkpoint transform driver (include/nmkit/checkpoint_transform.h): every selected 2-D float
// weight that complies with a keep:2N pattern (stored dense or compressed) is rewritten as its 2:4
// form [rows, K'], dense or sparse24, with a record holding the slide geometry; weights already slid
// and everything else are copied.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/checkpoint.h"
#include "nmkit/checkpoint_transform.h"
#include "nmkit/pattern.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/status.h"

namespace nmkit {

struct SlideCheckpointJob {
  std::string input;
  std::string output;
  Pattern pattern;  // keep:2N the weights comply with
  int align = 32;   // K' alignment
  WeightFormat format = WeightFormat::Dense;  // Dense or Sparse24 (a slid weight is 2:4)
  StoredLayout layout = StoredLayout::Canonical;  // CutlassSm80 (F16/BF16 weights) with Sparse24
  std::function<bool(std::string_view name)> selected;  // null: every name
  // Appended ("; HINT") to the error of a weight that does not comply with the pattern (the CLI says
  // which command prunes it).
  std::string noncompliant_hint;
  std::function<void(size_t i, size_t n, const std::string& name)> on_tensor;  // progress
};

struct SlidTensor {
  std::string name;
  int64_t rows = 0;
  SlideGeometry geometry;
};

struct SlideOutcome {
  std::vector<SlidTensor> tensors;  // file order
  size_t copied_tensors = 0;
};

// Checks the pattern, alignment and format before any file is opened; on any error no output exists.
Result<SlideOutcome> slide_checkpoint(const SlideCheckpointJob& job);

}  // namespace nmkit
