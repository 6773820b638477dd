// Scalar references of the linear layer on dense and compressed weights: the definition that the
// fast kernels are tested against (docs/design.md 10.5), and the seed's `sparse_matmul`.
#pragma once

#include "nmkit/format.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

struct MatmulResult {
  Tensor y;                          // F32 [M, rows]
  double theoretical_speedup = 1.0;  // dense MACs / executed MACs
};

// Y = X * W^T with X [M, K] and W [rows, K] of any prunable dtypes (they may differ). Each output
// accumulates the products in float64 in increasing k order, over exactly the products the format
// executes (every k for dense; the stored slots for sparse24 and nm, stored zeros included, the
// padding slots of a tail group skipped since X has no column there), and rounds once to f32.
// Products of f32 values are exact in float64, so only the additions round.
// theoretical_speedup: dense 1; sparse24 K / (K_pad/2); nm K / (groups*keep); 1 when K == 0.
// Errors name the operand and shape on a dtype or shape mismatch, or an invalid packed tensor.
Result<MatmulResult> ref_dense_matmul(const TensorView& w, const TensorView& x);
Result<MatmulResult> ref_sparse_matmul(const Sparse24& w, const TensorView& x);
Result<MatmulResult> ref_sparse_matmul(const NMPacked& w, const TensorView& x);

}  // namespace nmkit
