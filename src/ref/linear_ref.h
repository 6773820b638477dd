// Scalar reference of nmkit's INT8 linear kernels (docs/design.md 6): the definition the SIMD kernels
// must match bit for bit. Float linear kernels are checked against ref_dense_matmul /
// ref_sparse_matmul (include/nmkit/reference.h) with a derived tolerance instead.
#pragma once

#include <cstdint>

#include "nmkit/format.h"

namespace nmkit {

// The INT8 epilogue, exactly: the int32 sum converted to f32 (round to nearest even), times the
// f32 product of the two scales, then plus the bias (when there is one). Every kernel applies it in
// this order with no fused multiply-add, so all tiers agree bit for bit.
inline float int8_epilogue(int32_t acc, float x_scale, float w_scale) {
  const float scale = x_scale * w_scale;
  return scale * static_cast<float>(acc);
}

// Y[m, r] = int8_epilogue(sum_k qx[m, k] * qw[r, k], sx[m], sw[r]) (+ bias[r]); qx [M, K] and qw
// [rows, K] row-major codes in [-127, 127]; bias may be null. The sums are exact (int64, then
// checked to fit int32 as the kernels' accumulators must).
void ref_int8_linear(const int8_t* qx, const float* sx, int64_t M, int64_t K, const int8_t* qw, const float* sw,
                     int64_t rows, const float* bias, float* y);

// The same for an INT8 weight in the nm format (docs/design.md 4.3): `weight` holds I8 codes as its
// values and the keep:group bitmask, the products taken straight from the format (the k-th set mask
// bit of a row names the column of its k-th value); sw [rows] its per-row scales.
void ref_int8_nm_linear(const int8_t* qx, const float* sx, int64_t M, const NMPacked& weight, const float* sw,
                        const float* bias, float* y);

}  // namespace nmkit
