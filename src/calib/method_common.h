// What the calibrated methods that move kept weights (SparseGPT, ADMM) share around their search:
// the checked Hessian (dead inputs, damping), the checked float32 copy of the weight, and the
// dense-masked result built from the moved weights with its section 3 sums and weight error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nmkit/metrics.h"
#include "nmkit/status.h"
#include "nmkit/tensor.h"

namespace nmkit::calib_detail {

// "layer 'NAME': " (empty for an unnamed layer), the prefix of every calibration error.
std::string layer_prefix(std::string_view name);

// "%g" of v, for messages.
std::string num(double v);

// H (K x K, upper triangle read) checked finite, both triangles filled, with design section 12's
// dead-input rule applied (H[k,k] = 0 -> 1, listed in `dead`); the damping is only checked here
// (finite, >= 0): the caller adds damping * mean_diag to the diagonal.
struct CheckedHessian {
  std::vector<double> h;
  std::vector<int64_t> dead;
  double mean_diag = 0;
};
Result<CheckedHessian> checked_hessian(const double* H, int64_t K, double damping, std::string_view name);

// The weight as float32, or an error naming the layer, row, column and value of its first
// non-finite element (row-major order).
Result<std::vector<float>> finite_f32(const TensorView& w, std::string_view name);

// trace(A H A^T) = sum over rows r of a_r . (H a_r), A [rows, K] row-major, H symmetric K x K (its
// upper triangle read): the output error's squares (output_error.cc) and the swaps' objective.
double quadratic_trace(const std::vector<double>& a, int64_t rows, int64_t K, const double* H);

// Section 3 sums of the mask `kept` (rows * K bytes, non-zero = kept) over `original` (float32).
PruneSums kept_sums(const std::vector<float>& original, const std::vector<uint8_t>& kept, int64_t rows, int64_t K);

struct MovedWeights {
  Tensor pruned;  // dtype and shape of w
  PruneSums sums;  // section 3 sums of the mask over the ORIGINAL weights
  double weight_relative_error = 0;  // ||W - W_pruned||_F / ||W||_F after rounding to the dtype
};

// The pruned tensor with values[i] where kept[i] != 0 and +0 elsewhere, rounded to w's dtype;
// `original` is w as float32. An update that overflows the dtype is an error naming `method`.
Result<MovedWeights> moved_weights(const TensorView& w, const std::vector<float>& original,
                                   const std::vector<double>& values, const std::vector<uint8_t>& kept,
                                   std::string_view method, std::string_view name);

}  // namespace nmkit::calib_detail
