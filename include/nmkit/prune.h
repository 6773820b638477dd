// N:M pruning with the exact tail, score, tie and bad-value rules of docs/design.md section 2.
#pragma once

#include <cstddef>
#include <string_view>

#include "nmkit/metrics.h"
#include "nmkit/pattern.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

enum class PruneMethod { Magnitude, Gradient, Wanda };

Result<PruneMethod> parse_prune_method(std::string_view text);  // "magnitude" | "gradient" | "wanda"
std::string_view prune_method_name(PruneMethod method);

// What a score needs besides the weight: the gradient (same shape) for Gradient, the per-input-
// feature L2 norms (1-D, length K, prunable dtype) for Wanda.
struct ScoreInputs {
  const TensorView* gradient = nullptr;
  const TensorView* act_norms = nullptr;
};

// Prunes the 2-D weight `w` into `dst` (w.nbytes() bytes, same dtype and shape: the dense-masked
// tensor) and returns the metrics' sums. Multithreaded over rows. Errors name `name`, the row and
// column, and the value: NaN/inf in weight, gradient or norm; missing or mis-shaped inputs; non-2-D
// or non-prunable weights. On error dst's contents are unspecified.
Result<PruneSums> prune_into(const TensorView& w, Pattern pattern, PruneMethod method,
                             const ScoreInputs& inputs, std::byte* dst, std::string_view name = "");

struct PruneResult {
  Tensor pruned;  // dense-masked, dtype and shape of the input
  PruneSums sums;
};
Result<PruneResult> prune(const TensorView& w, Pattern pattern, PruneMethod method,
                          const ScoreInputs& inputs = {}, std::string_view name = "");

}  // namespace nmkit
