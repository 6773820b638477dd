// Quantizing every 2-D float tensor of a safetensors file per token (what `nmkit quantize` runs;
// docs/design.md section 6), optionally fused with SlideSparse lifting (section 5), through the
// checkpoint transform driver (include/nmkit/checkpoint_transform.h). Each tensor NAME becomes
// NAME.codes (I8, or the e4m3 bytes as U8) and NAME.scales (F32, one per row): what a GPU pipeline's
// quantization kernel should produce for these activations. Other tensors are left out; the file's
// metadata is replaced by one "nmkit-quantize" entry describing the rule.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nmkit/pattern.h"
#include "nmkit/quant.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

struct QuantizeCheckpointJob {
  std::string input;
  std::string output;
  QuantType type = QuantType::Int8;
  std::optional<Pattern> lift;  // lift to K' for weights slid from this keep:2N pattern
  int align = 32;               // K' alignment (with lift)
  std::function<void(size_t i, size_t n, const std::string& name)> on_tensor;  // progress
};

struct QuantizedTensor {
  std::string name;
  Shape shape;       // of the input [M, K]
  int64_t cols = 0;  // of the codes: K, or K' when lifted
  float scale_min = 0, scale_max = 0;
};

struct QuantizeOutcome {
  std::vector<QuantizedTensor> tensors;  // file order
  size_t skipped_tensors = 0;            // not 2-D float: left out
};

// An Error, and no output, when the file holds no 2-D F32/F16/BF16 tensor.
Result<QuantizeOutcome> quantize_checkpoint(const QuantizeCheckpointJob& job);

}  // namespace nmkit
