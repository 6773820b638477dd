// N:M pruning with the exact tail, score, tie and bad-value rules of docs/design.md section 2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "nmkit/format.h"
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

// As prune_into, but each dense-masked row goes to sink(row, bytes) (w.cols() elements of w's dtype,
// valid during the call) instead of a [rows, K] tensor: called once per row, on the pool's threads,
// rows in any order. The metrics' sums go to `sums`, or are not computed when it is null (a model
// pruned on load has no use for them, and they cost more than the selection). After an error, some
// rows may have been handed over.
using PrunedRowSink = std::function<void(int64_t row, const std::byte* masked)>;
Status prune_rows_to(const TensorView& w, Pattern pattern, PruneMethod method, const ScoreInputs& inputs,
                     const PrunedRowSink& sink, PruneSums* sums = nullptr, std::string_view name = "");

// `w` pruned and compressed in one pass, with no dense-masked tensor: rows [row0, row0 + w.rows())
// of `out` (from empty_nm / empty_sparse24 of nmkit/format.h, out.K = w.cols(), out.pattern =
// pattern, or 2:4 for Sparse24) get the bytes of compress_nm / compress_sparse24 of prune(w)
// converted to out's dtype (F32, F16 or BF16; through f32, bf16 rounded to nearest even). Several
// weights can so fill one stacked tensor. Sums as prune_rows_to's. Errors as prune's, and shape
// mismatches.
Status prune_compress(const TensorView& w, Pattern pattern, PruneMethod method, const ScoreInputs& inputs,
                      NMPacked& out, int64_t row0, PruneSums* sums = nullptr, std::string_view name = "");
Status prune_compress(const TensorView& w, Pattern pattern, PruneMethod method, const ScoreInputs& inputs,
                      Sparse24& out, int64_t row0, PruneSums* sums = nullptr, std::string_view name = "");

struct PruneResult {
  Tensor pruned;  // dense-masked, dtype and shape of the input
  PruneSums sums;
};
Result<PruneResult> prune(const TensorView& w, Pattern pattern, PruneMethod method,
                          const ScoreInputs& inputs = {}, std::string_view name = "");

}  // namespace nmkit
