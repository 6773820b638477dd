// Scalar reference of per-token quantization, plain and fused with lifting: docs/design.md section 6
// written out value by value, the definition that every tier's kernel is compared against.
#pragma once

#include "nmkit/quant.h"
#include "nmkit/slide_geometry.h"
#include "nmkit/tensor.h"

namespace nmkit {

// codes[m, j] = q(X[m, i(j)]) (0 where the index map gives no input; i(j) = j without lift) and
// scales[m], for X [M, K] of F32, F16 or BF16 with finite values (the caller checks; an internal
// assert otherwise). absmax by float compares, rounding half to even by floor and compare, E4M3 by
// f32_to_e4m3; the index map from its formula (not SlideGeometry::source_column).
Quantized ref_quantize(const TensorView& x, QuantType type, const SlideGeometry* lift = nullptr);

}  // namespace nmkit
