// Tolerance of an f32 linear-layer output against the float64 reference (ref_dense_matmul and
// ref_sparse_matmul sum exactly the same products in float64 and round once).
//
// Derivation. Every kernel multiplies exact f32 operands (bf16 and f16 weights widen exactly), so a
// product is rounded at most once (FMA: not at all). Its sum then passes through at most
//   ceil(K_x / 8)  additions in its lane (AVX2 dense has the most: 8 lanes, K_x <= K + 31 values),
//   + 5           levels of the final reduction (16 lanes or partials -> 1),
//   + 1           addition of the bias,
// roundings, and the reference adds one rounding to f32 of the result. With n such roundings the
// error is at most gamma_n * sum(|x_k w_k|) + ... <= n * u / (1 - n u) * (sum |x_k w_k| + |bias|),
// u = 2^-24 (Higham, Accuracy and Stability, 3.1). Using eps = 2^-23 = 2u in c * eps covers the
// 1/(1 - n u) factor with room to spare, so c = ceil((K + 31) / 8) + 8 is a bound, not a guess.
#pragma once

#include <cfloat>
#include <cstdint>

namespace nmkit::test {

inline double linear_tolerance(int64_t K, double abs_sum) {
  const double c = static_cast<double>((K + 31 + 7) / 8 + 8);
  return c * static_cast<double>(FLT_EPSILON) * abs_sum;
}

}  // namespace nmkit::test
