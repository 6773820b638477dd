// Scalar reference of the quantized linear layer (docs/design.md section 6) on dense, sparse24 and slid
// operands: the definition that quantized kernels are tested against.
//
//   acc[m, r] = sum_k qx[m, k] * qw[r, k]
//     INT8: int32, exact in any order.
//     E4M3: float32 from +0 in increasing k order; each product of two e4m3 values is exact in f32.
//   Y[m, r] = (scale_x[m] * scale_w[r]) * float(acc[m, r]) (+ bias[r]), float32, one rounding per op.
//
// Slid operands are ordinary ones of width K_prime: X' from quantize_lift() and the quantized slid
// weight (quantize_weights() of slide(), or its sparse24). For integer data, and always for INT8,
// Y is then bit for bit that of the original operands (tests/quant).
#pragma once

#include "nmkit/quant.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit {

// acc as a tensor [M, rows]: I32 for INT8, F32 for E4M3. Errors name the operand on a type, dtype or
// shape mismatch (x [M, K] codes against w [rows, K]) or an invalid metadata nibble.
Result<Tensor> ref_quant_accumulate(const Quantized& x, const Quantized& w);
Result<Tensor> ref_quant_accumulate(const Quantized& x, const QuantizedSparse24& w);
// Y [M, rows] F32. bias: null, or [rows] of F32, F16 or BF16.
Result<Tensor> ref_quant_linear(const Quantized& x, const Quantized& w, const TensorView* bias = nullptr);
Result<Tensor> ref_quant_linear(const Quantized& x, const QuantizedSparse24& w,
                                const TensorView* bias = nullptr);

}  // namespace nmkit
